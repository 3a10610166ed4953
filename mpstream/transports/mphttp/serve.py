"""The browser's side of the proxy: each connection's requests in turn, a GET of a whole object
split over the paths (fetch.py), anything else passed through on one path (relay.py), and the
proxy's own per-path figures at PATHS_TARGET (for the page's multipath-aware rule)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlsplit

from mpstream.transports.base import PATHS_TARGET
from mpstream.transports.mphttp.browser import BadRequest, Browser
from mpstream.transports.mphttp.errors import ProxyError
from mpstream.transports.mphttp.fetch import Fetch
from mpstream.transports.mphttp.messages import Head, parse_origin
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
        browser = Browser(reader, writer)
        try:
            while not self.proxy.stopping.is_set():
                try:
                    request = await browser.request()
                except BadRequest as exc:
                    await answer(browser, 400, str(exc), keep=False)
                    return
                if request is None:
                    return
                await self.serve_request(browser, *request)
        except (ConnectionError, OSError):
            return  # the browser went away
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def serve_request(self, browser: Browser, head: Head, body: bytes) -> None:
        """One request of the browser."""
        if not head.version.startswith("1."):
            await answer(browser, 400, f"not an HTTP/1.x request: HTTP/{head.version}", False)
            return
        target, origin = head.target, self.proxy.upstream
        if head.method == "GET" and urlsplit(target).path == PATHS_TARGET:
            await answer_json(browser, self.proxy.paths_answer())
            return
        if target.startswith(("http://", "https://")):
            # A browser that uses the proxy as its HTTP proxy names the origin in the target.
            try:
                origin = parse_origin(target)
            except ValueError as exc:
                await answer(browser, 400, str(exc))
                return
            rest = urlsplit(target)
            target = (rest.path or "/") + (f"?{rest.query}" if rest.query else "")
        if origin is None:
            await answer(browser, 400, "no origin: start the proxy with --upstream, or ask "
                                       "with an absolute URL (as of an HTTP proxy)")
            return
        try:
            if head.method == "GET" and head.get("range") is None and not body:
                await Fetch(self.proxy, self.scheduler, head, target, origin, browser).run()
            else:
                await passthrough(self.proxy, head, body, target, origin, browser)
        except ProxyError as exc:
            if exc.half_sent or browser.answering():
                browser.abort()  # an answer is half sent: only ending it is left
                return
            await answer(browser, 502, str(exc))


async def answer_json(browser: Browser, found: dict[str, Any]) -> None:
    """The proxy's own figures as JSON, to a page of any origin (with `play --url` the page is
    on this host's loopback, the proxy another origin)."""
    body = json.dumps(found, separators=(",", ":")).encode()
    browser.respond(200, "OK", [("Content-Type", "application/json"),
                                ("Content-Length", str(len(body))),
                                ("Cache-Control", "no-store"),
                                ("Access-Control-Allow-Origin", "*")])
    browser.send(body)
    browser.end()
    with contextlib.suppress(ConnectionError, OSError):
        await browser.drain()


async def answer(browser: Browser, status: int, text: str, keep: bool = True) -> None:
    """The proxy's own answer, a line of text (a request it cannot serve); `keep`: the
    connection may carry another request after it (as far as the browser's request allows)."""
    body = (text + "\n").encode()
    reason = {400: "Bad Request", 502: "Bad Gateway"}.get(status, "Error")
    headers = [("Content-Type", "text/plain; charset=utf-8"),
               ("Content-Length", str(len(body)))]
    if not keep:
        headers.append(("Connection", "close"))
    browser.respond(status, reason, headers)
    browser.send(body)
    browser.end()
    with contextlib.suppress(ConnectionError, OSError):
        await browser.drain()
