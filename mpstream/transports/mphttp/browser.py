"""The browser's connection to the proxy, spoken through h11 in the server's role: its requests
one at a time, each answered in full before the next is read; h11 frames the answers (a length,
chunks, or the connection's end for an HTTP/1.0 browser) and says whether the connection can
carry another request."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import h11

from mpstream.transports.mphttp.messages import HEAD_LIMIT, MAX_BODY, READ_CHUNK, Head


class BadRequest(Exception):
    """A request that could not be read: answered 400 with this text, and the connection
    ends."""


class Browser:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)

    async def request(self) -> tuple[Head, bytes] | None:
        """The next request and its body, whole (beacons and API calls are small, and a body in
        hand can be sent again on another connection); None once the browser has closed the
        connection, or the last answer ended it."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        if self.h11.our_state is not h11.IDLE:
            return None
        try:
            event = await self._next()
        except h11.RemoteProtocolError as exc:
            raise BadRequest(f"a malformed request: {exc}") from exc
        if not isinstance(event, h11.Request):
            return None  # the browser closed it
        try:
            return Head.of(event), await self._body()
        except (h11.RemoteProtocolError, ValueError) as exc:
            raise BadRequest(f"the request body could not be read: {exc}") from exc

    async def _body(self) -> bytes:
        body = bytearray()
        while True:
            event = await self._next()
            if isinstance(event, h11.EndOfMessage):
                return bytes(body)
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    raise ValueError(f"a request body of more than {MAX_BODY} bytes")
            elif isinstance(event, h11.ConnectionClosed):
                raise ValueError("the connection ended in the middle of the body")

    async def _next(self) -> object:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.h11.receive_data(await self.reader.read(READ_CHUNK))

    def respond(self, status: int, reason: str, headers: Sequence[tuple[str, str]]) -> None:
        """The answer's head (its framing is h11's: a Content-Length among `headers`, else
        chunks)."""
        self.writer.write(self.h11.send(h11.Response(status_code=status, reason=reason,
                                                     headers=list(headers))) or b"")

    def send(self, data: bytes) -> None:
        for piece in self.h11.send_with_data_passthrough(h11.Data(data=data)) or ():
            self.writer.write(piece)

    def end(self) -> None:
        self.writer.write(self.h11.send(h11.EndOfMessage()) or b"")

    def answering(self) -> bool:
        """An answer's head has gone to the browser and its body has not ended."""
        return self.h11.our_state is h11.SEND_BODY

    async def drain(self) -> None:
        await self.writer.drain()

    def gone(self) -> bool:
        """The browser went away (dash.js aborts a request it gave up)."""
        return self.writer.transport.is_closing()

    def abort(self) -> None:
        """Ends the connection at once (an answer half sent cannot be finished otherwise)."""
        self.writer.transport.abort()
