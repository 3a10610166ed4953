"""Told of writes, not polling: an inotify watch (asyncinotify) on a low-latency tree's dash/
folder, where ffmpeg writes the segments, and on the tree itself, for live.json.

The origin looks at the tree only when the kernel says something in it changed, and then only
at the files it names, so with no write it does no work, with a write little, and a part is
announced as soon as ffmpeg's write returns. No write is
lost between a look and the next wait: the watch exists before the first look, and each wait
first takes every event already queued (the writes that came during the last look), so a write
after that is either seen by the look that follows or queues an event that ends the next wait
at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from asyncinotify import Event, Inotify, Mask, Watch

from mpstream.manifests.lltree import LIVE_JSON

# Every way ffmpeg changes dash/: a segment begun (CREATE), written to (MODIFY), renamed into
# place (MOVED_FROM/MOVED_TO: its .tmp and its final name), deleted past the window (DELETE).
_DASH = (Mask.CREATE | Mask.MODIFY | Mask.CLOSE_WRITE | Mask.MOVED_FROM | Mask.MOVED_TO
         | Mask.DELETE)
# The tree: live.json replaced by a rename (its state), dash/ made again by a new stream.
_ROOT = Mask.CREATE | Mask.MOVED_TO | Mask.CLOSE_WRITE | Mask.ONLYDIR


@dataclass
class Touched:
    """What changed since the last wait: files of dash/ by name, all of dash/ (`rescan`: events
    were lost, or dash/ is new), live.json (the stream's state)."""

    names: set[str] = field(default_factory=set)
    rescan: bool = False
    state: bool = False


class TreeWatch:
    """The watch of one tree; `touched()` waits for the next change. Closed on `close()` (or
    by leaving it as a context manager), which removes the watches with their descriptor."""

    def __init__(self, root: Path):
        self.root, self.dash = root, root / "dash"
        self._inotify = Inotify()
        # Never block the event loop: the queue is read only when it is readable anyway, and
        # asyncinotify 4.4's NONBLOCK flag is O_CLOEXEC's value.
        os.set_blocking(self._inotify.fd, False)
        self._inotify.sync_timeout = 0  # sync_get(): None at once when nothing is queued
        self._root_watch = self._inotify.add_watch(root, _ROOT)
        self._dash_watch: Watch | None = None
        self._watch_dash()

    def __enter__(self) -> TreeWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        try:
            self._inotify.fd  # noqa: B018  (raises once closed)
        except ValueError:
            return True
        return False

    def close(self) -> None:
        self._inotify.close()

    def _watch_dash(self) -> bool:
        """Watch dash/ (again, when a new stream made it anew); False while there is none."""
        try:
            self._dash_watch = self._inotify.add_watch(self.dash, _DASH | Mask.ONLYDIR)
        except (FileNotFoundError, NotADirectoryError):
            self._dash_watch = None
            return False
        return True

    async def touched(self) -> Touched:
        """Waits for at least one change, then takes every change already queued."""
        seen = Touched()
        self._note(await self._inotify.get(), seen)
        while (event := self._inotify.sync_get()) is not None:
            self._note(event, seen)
        return seen

    def _note(self, event: Event, seen: Touched) -> None:
        watch = event.watch
        if Mask.Q_OVERFLOW in event.mask or watch is None:
            # Events were dropped (the queue overflowed), or one of a watch already gone:
            # look at everything.
            seen.rescan = seen.state = True
        elif watch is self._root_watch:
            name = str(event.name or "")
            if name == LIVE_JSON:
                seen.state = True
            elif name == "dash" and self._watch_dash():
                seen.rescan = True
        elif Mask.IGNORED in event.mask:
            # dash/ was removed (a new stream replaced the tree): watched again when it is back.
            if watch is self._dash_watch:
                self._dash_watch = None
            seen.rescan = True
        elif event.name is not None:
            seen.names.add(str(event.name))
