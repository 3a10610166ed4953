"""One byte range of a download asked of one path."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from mpstream.transports.mphttp.clock import unix
from mpstream.transports.mphttp.connection import Conn, PathState
from mpstream.transports.mphttp.errors import PartFailed
from mpstream.transports.mphttp.rangeplan import stalled


class Download(Protocol):
    """The download a part belongs to (fetch.py's Fetch), which reads its response."""

    parts: list[Part]

    async def read_response(self, conn: Conn, part: Part) -> None: ...

    def part_failed(self, part: Part, exc: PartFailed) -> None: ...


# A part's rate is a sample of its path's only when it carried enough to say more than slow
# start's first window.
RATE_SAMPLE_MIN_BYTES = 24 * 1024


@dataclass(eq=False)
class Part:
    """A range of one download asked of one path. `start`/`end` are absolute offsets (end
    exclusive); a suffix request (`suffix` bytes from the end) learns them from its response.
    Received bytes wait in `buf` (holding offsets from `buf_start`) until the browser has
    them."""

    fetch: Download
    path: PathState
    start: int | None
    end: int | None
    suffix: int | None = None
    copy_of: Part | None = None
    conditional: bool = False  # carries the browser's If-None-Match and the like
    state: str = "new"  # new, sent; then done, failed or cancelled
    conn: Conn | None = None
    # What its response is: range (a 206 of its bytes), relay (the origin's own answer, which
    # goes to the browser as it is), discard (read and dropped), reject (not what was asked).
    mode: str = ""
    buf: bytearray = field(default_factory=bytearray)
    buf_start: int = 0
    received: int = 0
    useful: int = 0  # bytes that no other part had brought first
    draining: bool = False  # cancelled, but read to its end to keep the connection
    t_request: float = 0.0
    t_first_byte: float | None = None
    t_done: float | None = None
    last_activity: float = 0.0
    sent_idle: bool = False
    head_seen: bool = False
    reason: str | None = None
    timeout_s: float = 2.0  # the proxy's --stall-timeout, set when it is made
    copied: bool = False  # another part asks for its remainder too
    sending: asyncio.Task[None] | None = None

    @property
    def reached(self) -> int:
        """One past the last byte this part has received."""
        return (self.start or 0) + self.received

    def remaining(self) -> int:
        if not self.live():
            return 0
        if self.start is None or self.end is None:
            return self.suffix or 0
        return max(0, self.end - self.reached)

    def live(self) -> bool:
        return self.state in ("new", "sent")

    def waiting(self, t: float) -> float:
        """How long it has waited for its next bytes (s) since its turn on its connection
        came; 0 while it is not its turn."""
        if (self.state == "sent" and self.conn is not None and bool(self.conn.queue)
                and self.conn.queue[0] is self):
            return t - self.conn.seen(self.last_activity)
        return 0.0

    def stalled(self, t: float, latency_s: float) -> bool:
        """Its turn on its connection has come, and nothing has arrived for long."""
        return stalled(self.waiting(t), latency_s)

    async def read_response(self, conn: Conn) -> None:
        await self.fetch.read_response(conn, self)

    def failed(self, exc: PartFailed) -> None:
        self.fetch.part_failed(self, exc)

    def record(self) -> dict[str, Any]:
        return {"path": self.path.index, "start": self.start,
                "end": None if self.end is None else self.end - 1, "suffix": self.suffix,
                "copy_of": None if self.copy_of is None else
                self.fetch.parts.index(self.copy_of),
                "outcome": self.state, "received": self.received, "useful": self.useful,
                "t_request": unix(self.t_request),
                "t_first_byte": None if self.t_first_byte is None else unix(self.t_first_byte),
                "t_done": None if self.t_done is None else unix(self.t_done),
                **({"reason": self.reason} if self.reason else {})}
