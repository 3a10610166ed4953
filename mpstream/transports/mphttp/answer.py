"""What the browser is sent for one download (fetch.py): the head once the object's size is
known (200, the whole length, the origin's headers but Content-Range) and its bytes in order as
they arrive; or, when the origin answers the first request itself (it serves no ranges there,
or says 304 or 404), that answer as it is (`Relay`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from mpstream.transports.mphttp.browser import Browser
from mpstream.transports.mphttp.messages import HOP_BY_HOP, Head
from mpstream.transports.mphttp.part import Part


@dataclass(eq=False)
class Relay:
    """The origin's own answer to a download's first request, read by `part` and going to the
    browser as it is: its bytes wait in `chunks` until they are sent."""

    part: Part
    chunks: deque[bytes] = field(default_factory=deque)
    done: bool = False  # its last byte has arrived


class Answer:
    """The browser's answer to one download, on the browser's connection."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.head: Head | None = None  # the origin's answer it is made from
        self.head_sent = False
        self.pos = 0  # the bytes the browser has been sent
        self.ended = False
        self.relay: Relay | None = None

    def gone(self) -> bool:
        return self.browser.gone()

    def send_head(self, size: int | None) -> None:
        """The head, once the size is known: 200, the whole length, the origin's headers but
        Content-Range."""
        if self.head_sent or size is None:
            return
        assert self.head is not None
        headers = [*self.head.without(HOP_BY_HOP | {"content-range", "content-length"}),
                   ("Content-Length", str(size))]
        self.browser.respond(200, "OK", headers)
        self.head_sent = True

    def write_through(self, at: int, data: bytes) -> bool:
        """Bytes [at, at + len(data)) of the object straight to the browser when they are the
        next it waits for (without waking the download); whether they were."""
        end = at + len(data)
        if not (self.head_sent and at <= self.pos < end):
            return False
        self.browser.send(data[self.pos - at:] if self.pos > at else data)
        self.pos = end
        return True

    async def deliver(self, parts: Sequence[Part], size: int) -> None:
        """Sends what the parts hold in order from where the browser is, and lets go of what
        the browser has."""
        self.send_head(size)
        progressed = True
        while progressed and self.pos < size:
            progressed = False
            for p in parts:
                if p.buf and p.buf_start <= self.pos < p.buf_start + len(p.buf):
                    chunk = bytes(p.buf[self.pos - p.buf_start:])
                    self.browser.send(chunk)
                    self.pos += len(chunk)
                    progressed = True
        for p in parts:
            if p.buf and p.buf_start < self.pos:
                cut = min(self.pos - p.buf_start, len(p.buf))
                del p.buf[:cut]
                p.buf_start += cut
        if self.pos >= size and not self.ended:
            self.browser.end()
            self.ended = True
        await self.browser.drain()

    async def deliver_relay(self) -> None:
        """Sends what arrived of the relayed answer since the last call (its framing is h11's:
        the origin's length, else chunks)."""
        relay, head = self.relay, self.head
        assert relay is not None and head is not None
        if not self.head_sent:
            self.browser.respond(head.status, head.reason, head.without(HOP_BY_HOP))
            self.head_sent = True
        while relay.chunks:
            data = relay.chunks.popleft()
            self.pos += len(data)
            if data:
                self.browser.send(data)
        if relay.done and not self.ended:
            self.browser.end()
            self.ended = True
        await self.browser.drain()

    def complete(self) -> bool:
        return self.ended
