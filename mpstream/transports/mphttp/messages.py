"""HTTP/1.1 as the proxy speaks it to the browser and the origin, through h11 (which parses and
frames the messages; the proxy's connections feed it what they read): heads, requests as they go
on the wire, byte ranges, origins."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

HEAD_LIMIT = 256 * 1024  # the longest response or request head accepted
READ_CHUNK = 64 * 1024
MAX_BODY = 64 * 1024 * 1024  # the largest request body taken (the collector's beacons are KBs)

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
              "transfer-encoding", "upgrade", "proxy-authorization", "proxy-authenticate"}
CONDITIONAL = {"if-none-match", "if-modified-since", "if-match", "if-unmodified-since",
               "if-range"}


@dataclass
class Head:
    """A request's or a response's head as h11 read it: the request's method, target and
    version, or the response's status and reason, and the headers in order, their names as
    sent."""

    headers: list[tuple[str, str]]
    method: str = ""
    target: str = ""
    version: str = "1.1"
    status: int = 0
    reason: str = ""

    @classmethod
    def of(cls, event: h11.Request | h11.Response) -> Head:
        headers = [(k.decode("latin-1"), v.decode("latin-1"))
                   for k, v in event.headers.raw_items()]
        version = event.http_version.decode()
        if isinstance(event, h11.Request):
            return cls(headers, event.method.decode(), event.target.decode("latin-1"), version)
        return cls(headers, version=version, status=event.status_code,
                   reason=event.reason.decode("latin-1"))

    def get(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def without(self, names: Iterable[str]) -> list[tuple[str, str]]:
        drop = {n.lower() for n in names}
        return [(k, v) for k, v in self.headers if k.lower() not in drop]

    def tokens(self, name: str) -> set[str]:
        """The comma-separated tokens of every `name` header, lower-cased."""
        name = name.lower()
        return {t.strip().lower() for k, v in self.headers if k.lower() == name
                for t in v.split(",") if t.strip()}

    def framed(self, method: str) -> bool:
        """Whether the end of this response's body is known without the connection closing."""
        return method == "HEAD" or 100 <= self.status < 200 or self.status in (204, 304) \
            or self.get("content-length") is not None \
            or "chunked" in self.tokens("transfer-encoding")


def request_bytes(method: str, target: str, headers: list[tuple[str, str]],
                  body: bytes = b"") -> bytes:
    """A request as it goes on the wire. Each is written by an h11 connection of its own: the
    proxy pipelines requests on one connection, which h11's own state for it does not allow
    (connection.py tells that state of each request when its answer's turn comes)."""
    writer = h11.Connection(h11.CLIENT)
    out = writer.send(h11.Request(method=method, target=target, headers=headers)) or b""
    if body:
        out += writer.send(h11.Data(data=body)) or b""
    return out + (writer.send(h11.EndOfMessage()) or b"")


def parse_content_range(value: str | None) -> tuple[int, int, int]:
    """`bytes 0-99/1000` -> (0, 100, 1000): the first byte, one past the last, the size."""
    if not value or not value.startswith("bytes "):
        raise ValueError(f"Content-Range {value!r}")
    span, _, total = value[6:].partition("/")
    first, _, last = span.partition("-")
    if total.strip() == "*" or not first.strip().isdigit() or not last.strip().isdigit():
        raise ValueError(f"Content-Range {value!r}")
    return int(first), int(last) + 1, int(total)


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    @property
    def authority(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}"


def parse_origin(text: str) -> Origin:
    """`http://host[:port]` (an https origin is reached over TLS)."""
    parts = urlsplit(text if "://" in text else f"http://{text}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r} is not an http(s) origin such as http://10.2.0.2:8080")
    return Origin(parts.scheme, parts.hostname,
                  parts.port or (443 if parts.scheme == "https" else 80))
