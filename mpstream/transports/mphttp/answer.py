"""What the browser is sent for one download (fetch.py): the head once the object's size is
known (200, the whole length, the origin's headers but Content-Range) and its bytes in order as
they arrive; or, when the origin answers the first request itself (it serves no ranges there,
or says 304 or 404), that answer as it is (`Relay`)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from mpstream.transports.mphttp.messages import (
    HOP_BY_HOP,
    Head,
    body_is_framed,
    render_head,
    status_of,
)
from mpstream.transports.mphttp.part import Part


@dataclass(eq=False)
class Relay:
    """The origin's own answer to a download's first request, read by `part` and going to the
    browser as it is: its bytes wait in `chunks` until they are sent."""

    part: Part
    chunks: deque[bytes] = field(default_factory=deque)
    done: bool = False  # its last byte has arrived
    ended: bool = False  # and has been sent
    close: bool = False  # the browser's connection cannot carry another request after it


class Answer:
    """The browser's answer to one download, on the browser's connection (`writer`);
    `client_keep`: the browser asked to keep that connection."""

    def __init__(self, writer: asyncio.StreamWriter, client_keep: bool) -> None:
        self.writer, self.client_keep = writer, client_keep
        self.head: Head | None = None  # the origin's answer it is made from
        self.head_sent = False
        self.pos = 0  # the bytes the browser has been sent
        self.relay: Relay | None = None

    def gone(self) -> bool:
        """The browser went away (dash.js aborts a request it gave up)."""
        return self.writer.transport.is_closing()

    def send_head(self, size: int | None) -> None:
        """The head, once the size is known: 200, the whole length, the origin's headers but
        Content-Range."""
        if self.head_sent or size is None:
            return
        assert self.head is not None
        headers = [*self.head.without(HOP_BY_HOP | {"content-range", "content-length"}),
                   ("Content-Length", str(size))]
        if not self.client_keep:
            headers.append(("Connection", "close"))
        self.writer.write(render_head("HTTP/1.1 200 OK", headers))
        self.head_sent = True

    def write_through(self, at: int, data: bytes) -> bool:
        """Bytes [at, at + len(data)) of the object straight to the browser when they are the
        next it waits for (without waking the download); whether they were."""
        end = at + len(data)
        if not (self.head_sent and at <= self.pos < end):
            return False
        self.writer.write(data[self.pos - at:] if self.pos > at else data)
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
                    self.writer.write(chunk)
                    self.pos += len(chunk)
                    progressed = True
        for p in parts:
            if p.buf and p.buf_start < self.pos:
                cut = min(self.pos - p.buf_start, len(p.buf))
                del p.buf[:cut]
                p.buf_start += cut
        await self.writer.drain()

    async def deliver_relay(self) -> None:
        """Sends what arrived of the relayed answer since the last call."""
        relay, head = self.relay, self.head
        assert relay is not None and head is not None
        chunked = "chunked" in head.tokens("transfer-encoding")
        if not self.head_sent:
            headers = head.without(HOP_BY_HOP)
            if chunked:
                headers.append(("Transfer-Encoding", "chunked"))
            if not body_is_framed(head, status_of(head), "GET") or not self.client_keep:
                headers.append(("Connection", "close"))
            self.writer.write(render_head(f"HTTP/1.1 {head.first.split(' ', 1)[1]}", headers))
            self.head_sent = True
        while relay.chunks:
            data = relay.chunks.popleft()
            self.pos += len(data)
            if data:
                self.writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n"
                                  if chunked else data)
        if relay.done and chunked and not relay.ended:
            self.writer.write(b"0\r\n\r\n")
        relay.ended = relay.done
        await self.writer.drain()

    def complete(self, size: int | None) -> bool:
        if self.relay is not None:
            return self.relay.ended and not self.relay.chunks
        return size is not None and self.pos >= size and self.head_sent

    def keeps_connection(self) -> bool:
        """Whether the browser's connection can carry another request after this answer."""
        return self.client_keep and not (self.relay is not None and self.relay.close)
