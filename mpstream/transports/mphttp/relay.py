"""Requests that go to the origin as they are, on one path (a Range request, a POST, a HEAD):
their answers are relayed to the browser as they arrive."""

from __future__ import annotations

import asyncio

from mpstream.transports.mphttp.browser import Browser
from mpstream.transports.mphttp.clock import now, unix
from mpstream.transports.mphttp.connection import Conn
from mpstream.transports.mphttp.errors import PartFailed, ProxyError
from mpstream.transports.mphttp.messages import HOP_BY_HOP, Head, Origin, request_bytes
from mpstream.transports.mphttp.proxy import PROBE_INTERVAL_S, Proxy

# A pass-through request (a beacon, an API call) may wait this long for its answer.
PASS_TIMEOUT_S = 30.0


class PassRequest:
    """A request that goes to the origin as it is, on one path: its answer is relayed to the
    browser by the connection's reader task as it arrives."""

    def __init__(self, method: str, browser: Browser) -> None:
        self.method, self.browser = method, browser
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.received = 0
        self.last_activity = now()
        self.sent_idle = False
        self.head_seen = False
        self.timeout_s = PASS_TIMEOUT_S
        self.status: int | None = None
        self.t_first_byte: float | None = None

    async def read_response(self, conn: Conn) -> None:
        head = await conn.head(self.method)
        self.head_seen, self.status, self.t_first_byte = True, head.status, now()
        self.last_activity = self.t_first_byte
        self.browser.respond(head.status, head.reason,
                             head.without({"connection", "keep-alive", "proxy-connection"}))
        async for data in conn.body():
            self.received += len(data)
            conn.path.rx_bytes += len(data)
            self.browser.send(data)
            await self.to_browser()
            self.last_activity = now()
        self.browser.end()
        await self.to_browser()
        if conn.must_close():
            conn.closed = True
        if not self.done.done():
            self.done.set_result(None)

    async def to_browser(self) -> None:
        """Waits for the browser to take what was written; a browser that went away is no
        fault of the path (the connection closes, as its answer cannot be finished)."""
        try:
            await self.browser.drain()
        except (ConnectionError, OSError) as exc:
            raise PartFailed(f"the browser went away: {exc}", path_fault=False) from exc

    def failed(self, exc: PartFailed) -> None:
        if not self.done.done():
            self.done.set_exception(exc)


async def passthrough(proxy: Proxy, head: Head, body: bytes, target: str, origin: Origin,
                      browser: Browser) -> None:
    """The request as it is, on the path that would answer first (a Range request, a POST,
    a HEAD). A connection that fails
    before any answer is tried again on another (a kept-alive one the server had closed
    meanwhile, or a path that failed)."""
    method = head.method
    t_request = now()
    headers = [("Host", origin.authority),
               *head.without(HOP_BY_HOP | {"host", "content-length"})]
    if body or method in ("POST", "PUT", "PATCH"):
        headers.append(("Content-Length", str(len(body))))
    raw = request_bytes(method, target, headers, body)
    last_error = "no path is up"
    attempts = 0
    while attempts < 3:
        est = proxy.estimates()
        if not est:
            if now() - t_request > proxy.no_path_timeout_s:
                break
            await asyncio.sleep(PROBE_INTERVAL_S)
            continue
        attempts += 1
        path = proxy.path(min(est, key=lambda e: (e.start_s, -e.rate, e.index)).index)
        exchange = PassRequest(method, browser)
        try:
            conn = await proxy.checkout(path, origin)
            conn.send(exchange, raw)
            await exchange.done
        except PartFailed as exc:
            if exchange.head_seen:
                raise ProxyError(str(exc), half_sent=True) from exc
            last_error = str(exc)
            if exc.path_fault:
                proxy.path_down(path, str(exc))
            continue
        proxy.give_back(conn)
        proxy.record({"event": "request", "t": unix(now()), "url": target,
                      "origin": str(origin), "method": method, "mode": "pass",
                      "range": head.get("range"), "status": exchange.status,
                      "t_request": unix(t_request),
                      "t_first_byte": unix(exchange.t_first_byte or now()),
                      "t_done": unix(now()), "path": path.index,
                      "received_bytes": exchange.received})
        return
    raise ProxyError(f"{method} {target} on {origin}: {last_error}")
