"""The low-latency origin is told of writes (inotify), not polling: a write that lands between
its look at the tree and its next wait still wakes a held request, it does no work while
nothing is written, it sees the stream end, and its watch goes with the app."""

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path

from aiohttp import web

from mpstream.server.origin.app import Origin, create_app
from mpstream.server.origin.watch import Touched, TreeWatch
from tests.unit.test_low_latency import STYP, _tree, chunk

WAKE_S = 1.0  # far more than a wake-up takes; a lost one would wait forever


def _inotify_fds() -> int:
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # the listing's own descriptor, gone by now
            count += os.readlink(fd) == "anon_inode:inotify"
    return count


def _growing(tmp_path, tree, parts: int) -> Path:
    path = tmp_path / "dash" / f"{tree.segment_name('0', 1)}.tmp"
    path.write_bytes(STYP + chunk(13) * parts)
    return path


def _chunks(origin: Origin) -> int:
    seg = origin.index.segment("0", 1)
    return 0 if seg is None else len(seg.chunks)


def test_a_write_between_a_look_and_the_next_wait_still_wakes_the_waiter(tmp_path, monkeypatch):
    """ffmpeg's next part lands just after each of the origin's looks, before it waits again
    (twice); the request waiting for the second of those parts must be answered at once, with
    no other write to wake the origin."""
    _, tree = _tree(tmp_path)
    origin = Origin(tmp_path, tree)
    growing = _growing(tmp_path, tree, 1)
    look, late_writes = origin.look, [chunk(13), chunk(13)]

    def look_then_a_write_lands(touched: Touched) -> bool:
        changed = look(touched)
        if late_writes:
            with growing.open("ab") as f:
                f.write(late_writes.pop(0))
        return changed

    monkeypatch.setattr(origin, "look", look_then_a_write_lands)

    async def held_request() -> tuple[bool, float]:
        with TreeWatch(tmp_path) as watch:
            origin.look(Touched(rescan=True, state=True))
            assert _chunks(origin) == 1  # the first write came after the look
            task = asyncio.create_task(origin.keep_current(watch))
            asked = time.monotonic()
            ok = await origin.wait_until(lambda: _chunks(origin) == 3, WAKE_S)
            task.cancel()
            return ok, time.monotonic() - asked

    ok, waited = asyncio.run(held_request())
    assert ok and not late_writes
    assert waited < WAKE_S / 2


def test_a_request_is_answered_when_its_part_is_written(tmp_path):
    _, tree = _tree(tmp_path)
    origin = Origin(tmp_path, tree)
    growing = _growing(tmp_path, tree, 1)

    async def held_request() -> tuple[bool, float]:
        with TreeWatch(tmp_path) as watch:
            origin.look(Touched(rescan=True, state=True))
            task = asyncio.create_task(origin.keep_current(watch))
            loop = asyncio.get_running_loop()
            written_at: list[float] = []

            def ffmpeg_writes() -> None:
                with growing.open("ab") as f:
                    f.write(chunk(13))
                written_at.append(time.monotonic())

            loop.call_later(0.05, ffmpeg_writes)
            ok = await origin.wait_until(lambda: _chunks(origin) == 2, WAKE_S)
            task.cancel()
            return ok, time.monotonic() - written_at[0]

    ok, after = asyncio.run(held_request())
    assert ok and after < 0.1


def test_nothing_is_done_while_nothing_is_written(tmp_path, monkeypatch):
    _, tree = _tree(tmp_path)
    origin = Origin(tmp_path, tree)
    _growing(tmp_path, tree, 1)
    looks: list[Touched] = []
    look = origin.look

    def counted(touched: Touched) -> bool:
        looks.append(touched)
        return look(touched)

    monkeypatch.setattr(origin, "look", counted)

    async def idle() -> None:
        with TreeWatch(tmp_path) as watch:
            look(Touched(rescan=True, state=True))
            task = asyncio.create_task(origin.keep_current(watch))
            await asyncio.sleep(0.3)
            task.cancel()

    asyncio.run(idle())
    assert looks == []


def test_the_stream_ending_is_seen_from_live_json(tmp_path):
    _, tree = _tree(tmp_path)
    origin = Origin(tmp_path, tree)
    _growing(tmp_path, tree, 1)

    def live_json(state: str) -> None:
        tmp = tmp_path / ".live.json.tmp"
        tmp.write_text(json.dumps({"state": state,
                                   "extra": {"low_latency": tree.model_dump(mode="json")}}))
        tmp.replace(tmp_path / "live.json")

    live_json("running")

    async def until_ended() -> bool:
        with TreeWatch(tmp_path) as watch:
            origin.look(Touched(rescan=True, state=True))
            assert not origin.index.ended
            task = asyncio.create_task(origin.keep_current(watch))
            asyncio.get_running_loop().call_later(0.05, live_json, "ended")
            ok = await origin.wait_until(lambda: origin.index.ended, WAKE_S)
            task.cancel()
            return ok

    assert asyncio.run(until_ended())
    playlist = origin.current(tree.renditions[0])
    assert playlist is not None and playlist[0].ended


def test_a_dash_folder_made_anew_is_watched_again(tmp_path):
    _, tree = _tree(tmp_path)
    origin = Origin(tmp_path, tree)

    async def replaced() -> bool:
        with TreeWatch(tmp_path) as watch:
            origin.look(Touched(rescan=True, state=True))
            task = asyncio.create_task(origin.keep_current(watch))
            dash = tmp_path / "dash"
            for child in dash.iterdir():
                child.unlink()
            dash.rmdir()
            await asyncio.sleep(0.05)
            dash.mkdir()
            await asyncio.sleep(0.05)
            init = _tree(tmp_path / "again")[0].dash / tree.init_name("0")
            (dash / tree.init_name("0")).write_bytes(init.read_bytes())
            _growing(tmp_path, tree, 2)
            ok = await origin.wait_until(lambda: _chunks(origin) == 2, WAKE_S)
            task.cancel()
            return ok

    (tmp_path / "again").mkdir()
    assert asyncio.run(replaced())


def test_the_watch_is_closed_with_the_app(tmp_path):
    _, tree = _tree(tmp_path)
    before = _inotify_fds()

    async def serve_and_stop() -> int:
        runner = web.AppRunner(create_app(tmp_path, tree))
        await runner.setup()
        during = _inotify_fds()
        await runner.cleanup()
        return during

    assert asyncio.run(serve_and_stop()) == before + 1
    assert _inotify_fds() == before


def test_an_update_by_the_names_written_agrees_with_a_scan(tmp_path):
    """The watch's names (a segment begun, grown, renamed into place, deleted past the window)
    bring the index where a scan of the whole folder does."""
    by_name, tree = _tree(tmp_path)
    by_scan = Origin(tmp_path, tree).index
    dash = tmp_path / "dash"

    def name(n: int, writing: bool) -> str:
        return tree.segment_name("0", n) + (".tmp" if writing else "")

    def begin(n: int) -> list[str]:
        (dash / name(n, True)).write_bytes(STYP + chunk(13))
        return [name(n, True)]

    def grow(n: int) -> list[str]:
        with (dash / name(n, True)).open("ab") as f:
            f.write(chunk(13))
        return [name(n, True)]

    def finish(n: int) -> list[str]:
        (dash / name(n, True)).rename(dash / name(n, False))
        return [name(n, True), name(n, False)]

    def delete(n: int) -> list[str]:
        (dash / name(n, False)).unlink()
        return [name(n, False)]

    steps = [(begin, 1), (grow, 1), (grow, 1), (finish, 1), (begin, 2), (grow, 2),
             (finish, 2), (begin, 3), (delete, 1)]
    for step, n in steps:  # each step done, then both brought up to date
        by_name.update(step(n))
        by_scan.scan()
        ours, theirs = (i.playlist(tree.renditions[0]) for i in (by_name, by_scan))
        assert ours is not None and theirs is not None and ours.text() == theirs.text()
    assert [s.msn for s in ours.segments] == [2] and ours.open_msn == 3
