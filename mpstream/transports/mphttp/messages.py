"""HTTP/1.1 as the proxy speaks it to the browser and the origin: heads, bodies, byte ranges,
origins."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

HEAD_LIMIT = 256 * 1024  # the longest response or request head accepted
READ_CHUNK = 64 * 1024
MAX_BODY = 64 * 1024 * 1024  # the largest request body taken (the collector's beacons are KBs)
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
              "transfer-encoding", "upgrade", "proxy-authorization", "proxy-authenticate"}
CONDITIONAL = {"if-none-match", "if-modified-since", "if-match", "if-unmodified-since",
               "if-range"}


@dataclass
class Head:
    """A request or response head: its first line and its headers in order, as sent."""

    first: str
    headers: list[tuple[str, str]]

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


def parse_head(raw: bytes) -> Head:
    lines = raw.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or name != name.strip():
            raise ValueError(f"a malformed header line: {line[:80]!r}")
        headers.append((name, value.strip()))
    return Head(lines[0], headers)


def render_head(first: str, headers: Iterable[tuple[str, str]]) -> bytes:
    return (first + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
            ).encode("latin-1")


async def read_head(reader: asyncio.StreamReader) -> Head | None:
    """The next head on `reader`; None at a clean end of the stream before it."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise ConnectionError("the connection ended in the middle of a head") from exc
    except asyncio.LimitOverrunError as exc:
        raise ConnectionError(f"a head longer than {HEAD_LIMIT} bytes") from exc
    return parse_head(raw[:-4])


async def final_head(reader: asyncio.StreamReader) -> tuple[Head, int]:
    """The head of a response and its status, past any 1xx interim heads."""
    while True:
        head = await read_head(reader)
        if head is None:
            raise ConnectionError("the server closed the connection before answering")
        status = status_of(head)
        if not 100 <= status < 200:
            return head, status


def status_of(head: Head) -> int:
    parts = head.first.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP response: {head.first[:80]!r}")
    return int(parts[1])


def has_body(status: int, method: str) -> bool:
    return method != "HEAD" and not (100 <= status < 200 or status in (204, 304))


def body_is_framed(head: Head, status: int, method: str) -> bool:
    """Whether the end of the body is known without the connection closing."""
    return not has_body(status, method) or head.get("content-length") is not None \
        or "chunked" in head.tokens("transfer-encoding")


async def body_chunks(reader: asyncio.StreamReader, head: Head, framed_only: bool = False):
    """The body after `head` as it arrives (Content-Length, chunked, or up to the end of the
    stream). Yields (data, raw) pairs: the decoded bytes and the bytes as they were on the wire.
    Silence is the proxy's watchdog's business (a timer per read would cost more than the
    read: a path delivers a few segments per wake-up)."""
    if "chunked" in head.tokens("transfer-encoding"):
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                trailer = line
                while True:
                    more = await reader.readuntil(b"\r\n")
                    trailer += more
                    if more == b"\r\n":
                        break
                yield b"", trailer
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2], line + data
        return
    length = head.get("content-length")
    if length is not None:
        left = int(length)
        while left > 0:
            data = await reader.read(min(left, READ_CHUNK))
            if not data:
                raise ConnectionError(f"the connection ended with {left} bytes of the body "
                                      "still to come")
            left -= len(data)
            yield data, data
        return
    if framed_only:
        raise ConnectionError("a body without Content-Length or chunked framing")
    while True:
        data = await reader.read(READ_CHUNK)
        if not data:
            return
        yield data, data


async def read_request_body(reader: asyncio.StreamReader, head: Head) -> bytes:
    """A request's body, whole (beacons and API calls are small, and a body in hand can be sent
    again on another connection)."""
    if "chunked" in head.tokens("transfer-encoding"):
        out = bytearray()
        async for data, _raw in body_chunks(reader, head):
            out += data
        return bytes(out)
    length = head.get("content-length")
    if length is None or int(length) == 0:
        return b""
    if int(length) > MAX_BODY:
        raise ValueError(f"a request body of {length} bytes (at most {MAX_BODY})")
    return await reader.readexactly(int(length))


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
