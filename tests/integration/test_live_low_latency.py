"""`mpstream live --low-latency` for real, served by nginx and the origin behind it: the segment
being written arrives in chunks before it is finished, a blocking playlist reload returns as
soon as its part exists and lists it, a reload far past the edge is refused at once, parts are
the very bytes of their segment, many viewers are answered together, and the ended stream's
playlists end. Killed with -9, neither the stream nor the server leaves a program behind."""

import asyncio
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
import requests
from aiohttp.test_utils import TestClient, TestServer

from mpstream.manifests.llhls import MediaPlaylist
from mpstream.manifests.lltree import LowLatencyTree, read_low_latency
from mpstream.proc import pid_alive, stop
from mpstream.server.origin.app import create_app
from mpstream.server.stack import ServerStack
from tests.servers import _free_port

pytestmark = pytest.mark.long  # a stream followed for many parts: `make test-live`

SEGMENT_S = 2.0
PART_S = 0.5


def _start_live(out: Path, segment_s: float = SEGMENT_S, part_s: float = PART_S
                ) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mpstream.cli", "live", "synthetic", "--ladder", "tiny",
         "--segment-duration", f"{segment_s:g}", "--window", "12", "--low-latency",
         "--part-duration", f"{part_s:g}", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        described = read_low_latency(out)
        if described and described[1] == "running":
            return proc
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.2)
    stop(proc, graceful=signal.SIGINT, timeout=20)
    raise AssertionError("the low-latency stream did not start within 60 s")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ll")
    tmp.chmod(0o755)
    out = tmp / "tree"
    proc = _start_live(out)
    try:
        with ServerStack(out, port=_free_port(), workdir=tmp / "server") as stack:
            base = f"{stack.base_url}/media"
            playlist = f"{base}/hls/{read_low_latency(out)[0].renditions[0].playlist}/index.m3u8"
            deadline = time.monotonic() + 20
            while requests.get(playlist, timeout=5).status_code != 200:
                assert time.monotonic() < deadline, "no LL-HLS playlist within 20 s"
                time.sleep(0.2)
            yield proc, out, stack, playlist
    finally:
        stop(proc, graceful=signal.SIGINT, timeout=20)


def _edge(text: str) -> tuple[int, int]:
    """(the segment being written, its parts listed): the fixture yields as soon as the first
    part exists, when no segment may be finished yet."""
    return MediaPlaylist.parse(text).edge


def _lists(text: str, msn: int, part: int) -> bool:
    return MediaPlaylist.parse(text).lists(msn, part)


def test_a_blocking_reload_returns_once_its_part_exists_and_lists_it(served):
    _, _, _, playlist = served
    for _ in range(4):
        msn, part = _edge(requests.get(playlist, timeout=5).text)
        t0 = time.monotonic()
        reply = requests.get(playlist, params={"_HLS_msn": msn, "_HLS_part": part}, timeout=10)
        waited = time.monotonic() - t0
        assert reply.status_code == 200 and _lists(reply.text, msn, part), reply.text[-300:]
        assert waited < PART_S + 0.4, f"held {waited:.2f} s for the next part"


def test_the_mpds_clock_is_the_streams_own(served):
    _, out, stack, _ = served
    mpd = (out / "dash" / "manifest.mpd").read_text()
    assert 'value="/api/time"' in mpd
    reply = requests.get(f"{stack.base_url}/api/time", timeout=5)
    assert reply.status_code == 200 and reply.headers["Cache-Control"] == "no-store"
    # The origin answers it (nginx alone has no drift to tell): the wall clock, held back by
    # the encoder's drift (none while it keeps up: tests/unit/test_origin_clock.py).
    drift = float(reply.headers["X-Encoder-Drift"])
    assert drift >= 0.0
    assert abs(datetime.fromisoformat(reply.text).timestamp() - (time.time() - drift)) < 1.0


def test_a_playlist_is_compressed_for_a_player_that_takes_it(served):
    _, _, _, playlist = served
    with requests.get(playlist, headers={"Accept-Encoding": "gzip"}, stream=True,
                      timeout=5) as packed:
        wire = packed.raw.read(decode_content=False)
    plain = requests.get(playlist, headers={"Accept-Encoding": "identity"}, timeout=5)
    assert packed.headers.get("Content-Encoding") == "gzip"
    assert "Content-Encoding" not in plain.headers
    assert gzip.decompress(wire).startswith(b"#EXTM3U") and plain.text.startswith("#EXTM3U")
    # The bytes on the wire: a fraction of the playlist's.
    assert len(wire) < len(plain.content) / 2, (len(wire), len(plain.content))


def test_a_reload_far_past_the_edge_is_refused_at_once(served):
    _, _, _, playlist = served
    msn, part = _edge(requests.get(playlist, timeout=5).text)
    for args in ({"_HLS_msn": msn + 3}, {"_HLS_msn": msn, "_HLS_part": part + 4}):
        t0 = time.monotonic()
        reply = requests.get(playlist, params=args, timeout=10)
        assert reply.status_code == 400 and time.monotonic() - t0 < 1, (args, reply.text)


def test_the_segment_being_written_arrives_in_chunks_and_whole(served):
    _, out, stack, playlist = served
    tree = read_low_latency(out)[0]
    rep = tree.renditions[0].rep
    msn, _ = _edge(requests.get(playlist, timeout=5).text)
    url = f"{stack.base_url}/media/dash/{tree.segment_name(rep, msn + 1)}"
    t0 = time.monotonic()
    arrivals, body = [], b""
    with requests.get(url, stream=True, timeout=15) as reply:
        assert reply.status_code == 200 and "Content-Length" not in reply.headers
        for piece in reply.raw.stream(65536, decode_content=False):
            arrivals.append(time.monotonic() - t0)
            body += piece
    assert arrivals[0] < SEGMENT_S + 0.5, "the first chunk waited for the whole segment"
    assert arrivals[-1] - arrivals[0] > SEGMENT_S / 2, arrivals
    # the same bytes as the finished file, whose parts are its chunks
    final = out / "dash" / tree.segment_name(rep, msn + 1)
    assert body == final.read_bytes()
    parts = [requests.get(f"{stack.base_url}/media/dash/{tree.part_name(rep, msn + 1, k)}",
                          timeout=10) for k in range(tree.parts_per_segment)]
    assert all(p.status_code == 200 for p in parts)
    assert b"".join(p.content for p in parts) == body


def test_many_viewers_are_answered_together(served):
    _, _, _, playlist = served
    msn, part = _edge(requests.get(playlist, timeout=5).text)
    answers: list[tuple[int, float, bool]] = []

    def viewer() -> None:
        reply = requests.get(playlist, params={"_HLS_msn": msn, "_HLS_part": part}, timeout=15)
        answers.append((reply.status_code, time.monotonic(), _lists(reply.text, msn, part)))

    threads = [threading.Thread(target=viewer) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(code == 200 and listed for code, _, listed in answers)
    spread = max(t for _, t, _ in answers) - min(t for _, t, _ in answers)
    assert spread < PART_S, f"30 viewers answered {spread:.2f} s apart"


def test_the_ended_stream_ends_its_playlists_and_leaves_nothing_half_written(served):
    proc, out, _, playlist = served
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    deadline = time.monotonic() + 5
    while "#EXT-X-ENDLIST" not in (text := requests.get(playlist, timeout=5).text):
        assert time.monotonic() < deadline, text[-300:]
        time.sleep(0.2)
    assert "#EXT-X-PART:" not in text and "PRELOAD-HINT" not in text
    assert not list(out.rglob("*.tmp"))


def test_a_playlist_asked_for_during_the_first_segment_waits_for_it_unless_blocking(tmp_path):
    """A viewer joining while the first segment is written: a plain request is held until the
    segment is finished (hls.js gives up on a playlist of parts only); a blocking reload for a
    part that exists is answered at once with the parts. The origin is served here directly as
    soon as the stream runs (nginx and a collector take seconds to start on a loaded machine,
    which may be past the first segment); the blocking answer listing no segment is what shows
    the request came during the first one."""
    tmp_path.chmod(0o755)
    out = tmp_path / "tree"
    proc = _start_live(out, segment_s=8.0)
    try:
        asyncio.run(_join_during_the_first_segment(out, read_low_latency(out)[0]))
    finally:
        stop(proc, graceful=signal.SIGINT, timeout=20)


async def _join_during_the_first_segment(out: Path, tree: LowLatencyTree) -> None:
    async with TestClient(TestServer(create_app(out, tree))) as client:
        path = f"/media/hls/{tree.renditions[0].playlist}/index.m3u8"
        first = out / "dash" / tree.segment_name(tree.renditions[0].rep, 1)
        blocking = await client.get(path, params={"_HLS_msn": "1", "_HLS_part": "0"})
        parts = MediaPlaylist.parse(await blocking.text())
        assert parts.segments == (), "answered after the first segment was finished"
        assert parts.edge[0] == 1 and parts.edge[1] >= 1, parts.edge
        plain = MediaPlaylist.parse(await (await client.get(path)).text())
        assert first.exists() and plain.segments[0].msn == 1


def test_parts_of_a_fifth_of_a_second_follow_through_the_encoder_mpd_and_playlists(tmp_path):
    """`--part-duration 0.2` without a target: chunks of 0.2 s (5 frames at 25 fps), the MPD's
    availabilityTimeOffset one part into the segment and its ServiceDescription's target three
    parts plus the default round trip (0.7 s), LL-HLS PART-TARGET the longest part (the
    audio's 10 AAC frames) and PART-HOLD-BACK the target; a blocking reload is answered within
    a part of its part being written. Served by the origin directly (no nginx, no collector:
    quick to start on a loaded machine)."""
    tmp_path.chmod(0o755)
    out = tmp_path / "tree"
    proc = _start_live(out, part_s=0.2)
    try:
        tree = read_low_latency(out)[0]
        assert (tree.part_duration, tree.target_latency_s) == (0.2, 0.7)
        assert tree.part_target == pytest.approx(0.213, abs=5e-4)
        asyncio.run(_follow_short_parts(out, tree))
    finally:
        stop(proc, graceful=signal.SIGINT, timeout=20)


async def _follow_short_parts(out: Path, tree: LowLatencyTree) -> None:
    from lxml import etree

    from mpstream.manifests.cmaf import read_chunks, track_timescale

    async with TestClient(TestServer(create_app(out, tree))) as client:
        path = f"/media/hls/{tree.renditions[0].playlist}/index.m3u8"
        text = await (await client.get(path)).text()  # held until a segment is finished
        assert "#EXT-X-PART-INF:PART-TARGET=0.213" in text and "PART-HOLD-BACK=0.700" in text
        for _ in range(5):  # the next part, five times: each answered as it is written
            msn, part = MediaPlaylist.parse(text).edge
            asked = time.monotonic()
            answer = await client.get(path, params={"_HLS_msn": str(msn),
                                                    "_HLS_part": str(part)})
            text = await answer.text()
            assert answer.status == 200 and _lists(text, msn, part)
            assert time.monotonic() - asked < 1.0, "a blocking reload held past its part"
        root = etree.parse(str(out / "dash" / "manifest.mpd")).getroot()
        ns = "{urn:mpeg:dash:schema:mpd:2011}"
        assert root.get("type") == "dynamic"
        assert {t.get("availabilityTimeOffset") for t in root.iter(f"{ns}SegmentTemplate")} \
            == {"1.800"}
        assert root.find(f"{ns}ServiceDescription/{ns}Latency").get("target") == "700"
    finished = MediaPlaylist.parse(text).segments[-1].msn
    rep = tree.renditions[0].rep
    scale = track_timescale((out / "dash" / tree.init_name(rep)).read_bytes())
    done = out / "dash" / tree.segment_name(rep, finished)
    chunks, _ = read_chunks(done.read_bytes())
    assert [round(c.ticks / scale, 3) for c in chunks] == [0.2] * 10


def test_kill_9_leaves_no_encoder_and_no_origin(tmp_path):
    tmp_path.chmod(0o755)
    out = tmp_path / "tree"
    live = _start_live(out)
    serve = subprocess.Popen(
        [sys.executable, "-m", "mpstream.cli", "serve", "--media", str(out), "--port",
         str(_free_port())], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        encoder = _state(out)["extra"]["ffmpeg_pid"]
        origin = _wait_for_origin(out)
        assert pid_alive(encoder) and pid_alive(origin)
        os.kill(live.pid, signal.SIGKILL)
        os.kill(serve.pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while pid_alive(encoder) or pid_alive(origin):
            assert time.monotonic() < deadline, "ffmpeg or the origin outlived its parent"
            time.sleep(0.2)
    finally:
        stop(serve, timeout=5)
        stop(live, timeout=5)


def _state(out: Path) -> dict:
    return json.loads((out / "live.json").read_text())


def _wait_for_origin(out: Path) -> int:
    """The pid of the origin serving `out` (once `serve` has started it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = subprocess.run(["pgrep", "-f", f"mpstream.server.origin --tree {out}"],
                               capture_output=True, text=True).stdout.split()
        if found:
            return int(found[0])
        time.sleep(0.2)
    raise AssertionError("serve started no origin within 30 s")
