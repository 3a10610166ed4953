"""How a request of the proxy fails: as a whole (`ProxyError`, said to the browser), or one
part of it on one path (`PartFailed`, asked again of the others)."""

from __future__ import annotations

import asyncio


class ProxyError(Exception):
    """A request that cannot be served: said to the browser as 502 with this text, or, when
    part of an answer went to the browser already (`half_sent`), by ending its connection."""

    def __init__(self, message: str, half_sent: bool = False) -> None:
        super().__init__(message)
        self.half_sent = half_sent


class PartFailed(Exception):
    """A part's connection broke or went silent; `path_fault` says whether the path is to blame
    (a reset or a silence) rather than the server's answer."""

    def __init__(self, message: str, path_fault: bool = True) -> None:
        super().__init__(message)
        self.path_fault = path_fault


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, asyncio.IncompleteReadError):
        return "the server closed the connection mid-response"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
