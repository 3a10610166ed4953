"""The origin's HTTP side (aiohttp), behind nginx: what nginx cannot answer from a finished
file under /media/ comes here.

- `GET /media/hls/<rendition>/index.m3u8[?_HLS_msn=M[&_HLS_part=P]]`: the LL-HLS media playlist
  made from the index; with `_HLS_msn` it is held until it lists that segment or part (at most
  three target durations, then 503), or refused with 400 at once when it asks too far ahead.
  Asked for (without `_HLS_msn`) before the stream's first segment is finished, it is held
  until it is.
- `GET /media/dash/<segment>.m4s` of the segment being written (or about to be): its bytes as
  they are written, with chunked transfer, ended only when the segment is complete. A stream
  that stops mid-segment breaks the connection instead: nothing half-written is ever ended as
  if complete.
- `GET /media/dash/<segment>.p<K>.m4s`: part K of a segment, once it is written (held until
  then).
- `GET /api/time`: the stream's clock for the MPD's UTCTiming: the wall clock, held back by as
  far as the encoder has drifted behind it (clock.py), which `X-Encoder-Drift` says in seconds.

Each held request waits on the index's change event, so one viewer never holds up another. The
index is brought up to date when inotify says the tree changed (watch.py), never on a timer:
with no write the origin does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from aiohttp import web

from mpstream.manifests.llhls import MediaPlaylist
from mpstream.manifests.lltree import LowLatencyTree, Rendition, read_low_latency
from mpstream.server.origin.index import StreamIndex, reload_answer
from mpstream.server.origin.watch import Touched, TreeWatch

PLAYLIST_TYPE = "application/vnd.apple.mpegurl"
SEGMENT_TYPE = "video/iso.segment"
NO_CACHE = {"Cache-Control": "no-cache"}
IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}
# With the stream's clock: how far (s) it is held back behind the wall clock.
DRIFT_HEADER = "X-Encoder-Drift"


class Origin:
    """The index of one tree, kept current by what a watch of the tree reports, and the
    requests it answers."""

    def __init__(self, root: Path, tree: LowLatencyTree):
        self.root, self.tree = root, tree
        self.index = StreamIndex(root, tree)
        self.changed = asyncio.Condition()
        # Each rendition's playlist and its text, made once per change of the index: every held
        # reload checks it on each change and many are answered with it at once, so made per
        # request it held the last of 50 viewers for a hundred milliseconds and more.
        self._playlists: dict[str, tuple[MediaPlaylist, str] | None] = {}

    def look(self, touched: Touched) -> bool:
        """Brings the index up to date with what changed; True when a playlist would differ."""
        changed = (self.index.scan() if touched.rescan
                   else bool(touched.names) and self.index.update(touched.names))
        if touched.state and not self.index.ended:
            described = read_low_latency(self.root)
            if described and described[1] == "ended":
                self.index.ended = changed = True
        return changed

    async def keep_current(self, watch: TreeWatch) -> None:
        """Looks again after each change the watch reports, and wakes every held request."""
        while True:
            if self.look(await watch.touched()):
                await self._changed()

    async def _changed(self) -> None:
        self._playlists.clear()
        async with self.changed:
            self.changed.notify_all()

    def current(self, rendition: Rendition) -> tuple[MediaPlaylist, str] | None:
        """The rendition's playlist as the index has it now, and its text; None before its
        first segment."""
        if rendition.playlist not in self._playlists:
            made = self.index.playlist(rendition)
            self._playlists[rendition.playlist] = None if made is None else (made, made.text())
        return self._playlists[rendition.playlist]

    async def wait_until(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Whether `ready()` came true within `timeout` seconds (checked on every change)."""
        async with self.changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait_for(ready), timeout)
            return ready()

    # --- LL-HLS playlists ------------------------------------------------------------------

    async def playlist(self, request: web.Request) -> web.StreamResponse:
        rendition = self.tree.rendition(request.match_info["rendition"])
        if rendition is None:
            raise web.HTTPNotFound(text="no such rendition in this stream")
        msn, part = _blocking_args(request)
        current = self.current(rendition)
        if msn is None and not _has_segment(current):
            # A viewer joining before the stream's first segment is finished (the master
            # playlist is out as soon as the encoder's init segments are) is held until it is.
            # A playlist of parts only is valid LL-HLS, but hls.js (1.7) takes a playlist
            # without a complete segment for an empty one and gives up (levelEmptyError).
            await self.wait_until(lambda: _has_segment(self.current(rendition)),
                                  3 * self.tree.segment_duration)
            current = self.current(rendition)
        if msn is not None:
            if current is not None and reload_answer(current[0], msn, part) == "refuse":
                raise web.HTTPBadRequest(text=f"_HLS_msn={msn} _HLS_part={part} is too far "
                                              "past the live edge")

            def listed() -> bool:
                now = self.current(rendition)
                return now is not None and reload_answer(now[0], msn, part) == "ready"

            if not await self.wait_until(listed, 3 * self.tree.segment_duration):
                raise web.HTTPServiceUnavailable(text="the part asked for was not written in "
                                                      "three target durations")
            current = self.current(rendition)
        if current is None:
            raise web.HTTPNotFound(text="the stream has no segment yet")
        return web.Response(text=current[1], content_type=PLAYLIST_TYPE, headers=NO_CACHE)

    async def time(self, request: web.Request) -> web.Response:
        clock = self.index.clock
        return web.Response(text=clock.xsdate(), content_type="text/plain",
                            headers={"Cache-Control": "no-store",
                                     DRIFT_HEADER: f"{clock.drift_s:.3f}"})

    # --- segments and parts ----------------------------------------------------------------

    async def media(self, request: web.Request) -> web.StreamResponse:
        parsed = self.tree.parse_name(request.match_info["name"])
        if parsed is None or parsed[3]:
            raise web.HTTPNotFound()
        rep, number, part, _ = parsed
        if part is not None:
            return await self._part(rep, number, part)
        return await self._growing(request, rep, number)

    async def _part(self, rep: str, number: int, part: int) -> web.Response:
        def written() -> bool:
            seg = self.index.segment(rep, number)
            return seg is not None and (len(seg.chunks) > part or seg.complete)

        if not self._near_edge(rep, number):
            raise web.HTTPNotFound()
        if not await self.wait_until(written, 3 * self.tree.part_target + 1):
            raise web.HTTPServiceUnavailable(text="the part was not written in time")
        seg = self.index.segment(rep, number)
        if seg is None or part >= len(seg.chunks):
            raise web.HTTPNotFound(text="the segment has no such part")
        chunk = seg.chunks[part]
        body = _read_at(self.index.path_of(rep, number), chunk.offset, chunk.size)
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type=SEGMENT_TYPE, headers=IMMUTABLE)

    def _near_edge(self, rep: str, number: int) -> bool:
        """A segment that exists, or the next one or two: worth waiting for."""
        if self.index.segment(rep, number) is not None:
            return True
        # Before anything is written the edge is the stream's first segment (number 1).
        edge = self.index.open_number(rep) or 1
        return edge <= number <= edge + 1

    async def _growing(self, request: web.Request, rep: str, number: int
                       ) -> web.StreamResponse:
        if not self._near_edge(rep, number) or not await self.wait_until(
                lambda: self.index.segment(rep, number) is not None,
                self.tree.segment_duration + 1):
            raise web.HTTPNotFound()
        fd = _open_first(self.index.path_of(rep, number))
        if fd is None:
            raise web.HTTPNotFound()
        try:
            response = web.StreamResponse(headers={**IMMUTABLE, "Content-Type": SEGMENT_TYPE})
            response.enable_chunked_encoding()
            await response.prepare(request)
            await self._send_as_written(response, fd, rep, number)
            await response.write_eof()
            return response
        finally:
            os.close(fd)

    async def _send_as_written(self, response: web.StreamResponse, fd: int, rep: str,
                               number: int) -> None:
        sent = 0
        while True:
            seg = self.index.segment(rep, number)
            if seg is None:
                # Removed before it was complete (the stream ended mid-segment): break the
                # connection rather than end the body as if it were whole.
                raise ConnectionResetError("the segment was removed while being written")
            if seg.size > sent:
                data = os.pread(fd, seg.size - sent, sent)
                sent += len(data)
                await response.write(data)
                continue
            if seg.complete:
                return
            if not await self.wait_until(_grew(self.index, rep, number, sent),
                                         2 * self.tree.segment_duration):
                raise ConnectionResetError("the segment stopped growing")


def _grew(index: StreamIndex, rep: str, number: int, sent: int) -> Callable[[], bool]:
    def check() -> bool:
        seg = index.segment(rep, number)
        return seg is None or seg.size > sent or seg.complete
    return check


def _has_segment(current: tuple[MediaPlaylist, str] | None) -> bool:
    return current is not None and bool(current[0].segments or current[0].ended)


def _blocking_args(request: web.Request) -> tuple[int | None, int | None]:
    def number(key: str) -> int | None:
        text = request.query.get(key)
        if text is None:
            return None
        if not text.isdigit():
            raise web.HTTPBadRequest(text=f"{key}={text}: not a non-negative integer")
        return int(text)

    msn, part = number("_HLS_msn"), number("_HLS_part")
    if part is not None and msn is None:
        raise web.HTTPBadRequest(text="_HLS_part without _HLS_msn")
    return msn, part


def _open_first(paths: list[Path]) -> int | None:
    """A descriptor of the first of `paths` that exists: a segment's final name, or the one it
    is being written under (the descriptor stays valid when ffmpeg renames it)."""
    for path in [*paths, paths[0]]:
        with contextlib.suppress(FileNotFoundError):
            return os.open(path, os.O_RDONLY)
    return None


def _read_at(paths: list[Path], offset: int, size: int) -> bytes | None:
    fd = _open_first(paths)
    if fd is None:
        return None
    try:
        return os.pread(fd, size, offset)
    finally:
        os.close(fd)


def create_app(root: Path, tree: LowLatencyTree) -> web.Application:
    origin = Origin(root, tree)
    app = web.Application()
    app.router.add_get("/media/hls/{rendition}/index.m3u8", origin.playlist)
    app.router.add_get(r"/media/dash/{name:[^/]+\.m4s}", origin.media)
    app.router.add_get("/api/time", origin.time)

    async def watching(app: web.Application) -> AsyncIterator[None]:
        # The watch exists before the first look: a write between the two is not missed.
        with TreeWatch(root) as watch:
            if origin.look(Touched(rescan=True, state=True)):
                await origin._changed()
            task = asyncio.create_task(origin.keep_current(watch))
            yield
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app.cleanup_ctx.append(watching)
    return app
