"""The browser's side of the proxy: each connection's requests in turn, a GET of a whole object
split over the paths (fetch.py), anything else passed through on one path (relay.py)."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

from mpstream.transports.mphttp.errors import ProxyError
from mpstream.transports.mphttp.fetch import Fetch
from mpstream.transports.mphttp.messages import (
    Head,
    parse_origin,
    read_head,
    read_request_body,
    render_head,
)
from mpstream.transports.mphttp.proxy import Proxy
from mpstream.transports.mphttp.relay import passthrough
from mpstream.transports.mphttp.schedulers import Scheduler


class Server:
    """What serves the browser's connections: the proxy's paths, with `scheduler` splitting the
    downloads over them."""

    def __init__(self, proxy: Proxy, scheduler: Scheduler) -> None:
        self.proxy, self.scheduler = proxy, scheduler

    async def serve_client(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        try:
            while not self.proxy.stopping.is_set():
                try:
                    head = await read_head(reader)
                except (ConnectionError, ValueError) as exc:
                    await answer(writer, 400, f"a malformed request: {exc}", False)
                    return
                if head is None or not await self.serve_request(head, reader, writer):
                    return
        except (ConnectionError, OSError):
            return  # the browser went away
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def serve_request(self, head: Head, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> bool:
        """One request of the browser; whether its connection may carry another."""
        parts = head.first.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await answer(writer, 400, f"not an HTTP/1.x request line: {head.first[:80]!r}",
                         False)
            return False
        method, target, version = parts
        keep = ("close" not in head.tokens("connection") if version == "HTTP/1.1"
                else "keep-alive" in head.tokens("connection"))
        try:
            body = await read_request_body(reader, head)
        except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            await answer(writer, 400, f"the request body could not be read: {exc}", False)
            return False
        origin = self.proxy.upstream
        if target.startswith(("http://", "https://")):
            # A browser that uses the proxy as its HTTP proxy names the origin in the target.
            try:
                origin = parse_origin(target)
            except ValueError as exc:
                await answer(writer, 400, str(exc), keep)
                return keep
            rest = urlsplit(target)
            target = (rest.path or "/") + (f"?{rest.query}" if rest.query else "")
        if origin is None:
            await answer(writer, 400, "no origin: start the proxy with --upstream, or ask "
                                      "with an absolute URL (as of an HTTP proxy)", keep)
            return keep
        fetch = None
        try:
            if method == "GET" and head.get("range") is None and not body:
                fetch = Fetch(self.proxy, self.scheduler, head, target, origin, writer, keep)
                return await fetch.run()
            return await passthrough(self.proxy, head, body, target, origin, writer, keep)
        except ProxyError as exc:
            if exc.half_sent or (fetch is not None and fetch.answer.head_sent):
                writer.transport.abort()  # an answer is half sent: only ending it is left
                return False
            await answer(writer, 502, str(exc), keep)
            return keep


async def answer(writer: asyncio.StreamWriter, status: int, text: str, keep: bool) -> None:
    """The proxy's own answer, a line of text (a request it cannot serve)."""
    body = (text + "\n").encode()
    reason = {400: "Bad Request", 502: "Bad Gateway"}.get(status, "Error")
    headers = [("Content-Type", "text/plain; charset=utf-8"),
               ("Content-Length", str(len(body)))]
    if not keep:
        headers.append(("Connection", "close"))
    writer.write(render_head(f"HTTP/1.1 {status} {reason}", headers) + body)
    with contextlib.suppress(ConnectionError, OSError):
        await writer.drain()
