"""The QoE collector's API (/api/v1, docs/qoe-events.md) as its clients use it: the player's
driver, the video workload, the path-policy controller, the server stack's health check and the
tests.

    client = CollectorClient.at("http://10.2.0.2:8080/api/v1")     # a collector elsewhere
    client = CollectorClient.over_socket(stack.collector_socket)  # straight to gunicorn
    client.summary(session_id); client.events_since(session_id, after=41)

Over the socket the client reaches the collector whatever the emulated paths do (down, or out
of reach from outside the namespaces). Every request goes through `requests` (a unix socket
through an adapter of its own); a collector that does not answer raises ConnectionError (an
OSError), one that answers anything but 200 raises CollectorRefused. A fresh
connection each request: a client is shared by threads (the controller polls while the driver
reads), which one requests.Session may not be.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool

from mpstream.qoe.events import BaseEvent
from mpstream.qoe.metrics import parse_events

API_PREFIX = "/api/v1"
# The host a request over the socket names: gunicorn does not look at it.
SOCKET_HOST = "localhost"
TIMEOUT_S = 10.0
# The most sessions one page of GET /sessions holds (the collector's PAGE_MAX).
SESSIONS_PAGE = 1000


class CollectorRefused(Exception):
    """The collector answered, but not 200 (a session it does not have is a 404)."""

    def __init__(self, method: str, path: str, status: int, body: bytes):
        super().__init__(f"{method} {path}: HTTP {status} {body[:200].decode(errors='replace')}")
        self.status = status


@dataclass(frozen=True)
class CollectorClient:
    api_url: str  # the API's base, e.g. http://host:8080/api/v1 (over the socket: its path)
    socket: Path | None = None  # the collector's unix socket; None: api_url's host
    timeout_s: float = TIMEOUT_S

    @classmethod
    def at(cls, api_url: str, timeout_s: float = TIMEOUT_S) -> CollectorClient:
        return cls(api_url.rstrip("/"), timeout_s=timeout_s)

    @classmethod
    def over_socket(cls, socket_path: Path | str, timeout_s: float = TIMEOUT_S
                    ) -> CollectorClient:
        return cls(f"http://{SOCKET_HOST}{API_PREFIX}", Path(socket_path), timeout_s)

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """The JSON answer to GET `path` (under the API's base)."""
        return self._send("GET", path, params=params)

    def health(self) -> dict[str, Any]:
        return self.get("/health")

    def sessions(self, **filters: str | int) -> Iterator[dict[str, Any]]:
        """Every session the filters (scenario, trial, player, transport, protocol) match,
        oldest first, read a page at a time."""
        cursor = None
        while True:
            params = {**filters, "limit": SESSIONS_PAGE, **({"cursor": cursor} if cursor else {})}
            page = self.get("/sessions", params)
            yield from page["sessions"]
            cursor = page["next_cursor"]
            if cursor is None:
                return

    def session(self, session_id: str) -> dict[str, Any]:
        """The session's fields and its events in seq order, as the collector stores them."""
        return self.get(f"/sessions/{session_id}")

    def summary(self, session_id: str) -> dict[str, Any]:
        return self.get(f"/sessions/{session_id}/summary")

    def events_since(self, session_id: str, after: int = -1) -> list[BaseEvent]:
        """The session's events whose seq is above `after` (-1: all), in seq order."""
        params = {"after": after} if after >= 0 else None
        found = self.get(f"/sessions/{session_id}/events", params)
        return parse_events(found["events"])

    def post_events(self, session_id: str, events: Sequence[BaseEvent]) -> dict[str, int]:
        """Stores the events ({stored, duplicates}: a seq stored already is skipped)."""
        batch = {"events": [e.model_dump(mode="json") for e in events]}
        return self._send("POST", f"/sessions/{session_id}/events", body=batch)

    def _send(self, method: str, path: str, *, params: dict[str, Any] | None = None,
              body: Any = None) -> Any:
        with requests.Session() as http:
            if self.socket is not None:
                # Nothing of the environment (a proxy) stands between us and the socket.
                http.trust_env = False
                http.mount(f"http://{SOCKET_HOST}/", UnixSocketAdapter(self.socket))
            try:
                answer = http.request(method, self.api_url + path, params=params, json=body,
                                      timeout=self.timeout_s)
            except requests.RequestException as exc:
                # Said as the socket said it, not as the layers of urllib3 wrapped it.
                where = self.socket or self.api_url
                raise ConnectionError(f"{where}: {_innermost(exc)}") from exc
        if answer.status_code != 200:
            raise CollectorRefused(method, path, answer.status_code, answer.content)
        return json.loads(answer.content)


def _innermost(exc: BaseException) -> BaseException:
    while (inner := exc.__cause__ or exc.__context__) is not None:
        exc = inner
    return exc


class _UnixSocketConnection(HTTPConnection):
    def __init__(self, *args: Any, socket_path: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.socket_path = socket_path

    def _new_conn(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if isinstance(self.timeout, int | float):  # else urllib3's "the default" sentinel
            sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        return sock


class _UnixSocketPool(HTTPConnectionPool):
    ConnectionCls = _UnixSocketConnection


class UnixSocketAdapter(HTTPAdapter):
    """requests' transport to an HTTP server on a unix socket: every request mounted on it goes
    to `socket_path`, whatever host its URL names."""

    def __init__(self, socket_path: Path | str):
        super().__init__(max_retries=0)
        self._pool = _UnixSocketPool(SOCKET_HOST, socket_path=str(socket_path))

    def get_connection_with_tls_context(self, request: Any, verify: Any, proxies: Any = None,
                                        cert: Any = None) -> HTTPConnectionPool:
        return self._pool

    def close(self) -> None:
        super().close()
        self._pool.close()
