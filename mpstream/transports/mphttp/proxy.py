"""The client-only multipath HTTP proxy (`mphttp`): what the browser speaks plain HTTP/1.1 to on
the client host, which fetches each whole object as byte ranges over one TCP connection per
client path, each bound to that path's address (and interface), so that the paths' routing
carries each part on its own path. The server needs nothing: any HTTP server that serves byte
ranges (nginx does for static files) is enough, so it works on real networks too.

    python -m mpstream.transports.mphttp --upstream http://10.2.0.2:8080 \
        --path 0,10.1.0.2,p0 --path 1,10.1.1.2,p1 --stats mphttp.jsonl

How one GET of a whole object goes (rangeplan.py beside this module sizes the parts):

1. The first request asks for the object's head (`Range: bytes=0-N`) on the path that would
   deliver it first; when objects like it were fetched before (segment 17 after segment 16), the
   path that would end a split last asks for the tail at once as a suffix (`bytes=-M`).
2. The first response's Content-Range tells the size; what no request covers yet is split over
   the live paths so that their parts end together (measured rate, round trip and backlog of
   each), pipelined behind what each path's connection already carries. A path not measured
   yet gets a probe-sized part instead; an object that would take longer than a horizon goes
   out in chunks to the paths about to run dry, and is split to end together once what is left
   fits the horizon.
3. Bytes go to the browser in order as they arrive: status 200, the full Content-Length, the
   origin's headers without Content-Range.
4. A path that has delivered its parts while another lags asks for the lagging part's remainder
   too, when it would deliver it sooner; whichever copy arrives first is used, the later one is
   counted as redundant (and its connection closed, unless little of it is left).
5. A path that fails under a part (reset, refused, silent for `--stall-timeout`, or silent
   while a copy of its part came in whole over another path) is marked down and probed until
   it connects again; what its parts had not delivered is asked of the other paths. With no
   path left, the browser's request fails after `--no-path-timeout` instead of hanging.

A request with a Range header of its own, or any method but GET, passes through unchanged on
one path. The proxy appends JSON lines to `--stats`: per path every `--stats-interval-ms`
(cumulative bytes, rate and round-trip estimates, state), per request on completion (the parts
each path carried, first-byte and done times, bytes per path, the paths of the last 10% of the
bytes, redundant bytes) and path events. It prints one ready line on stdout,
`{"ready": {"listen": ..., "paths": [...], ...}}`, and stops cleanly on SIGTERM or SIGINT (and
when its parent process dies, so that a killed `mpstream play` leaves no proxy behind).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import math
import os
import signal
import socket
import ssl
import struct
import sys
import termios
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO
from urllib.parse import urlsplit

from mpstream.transports.mphttp.rangeplan import (
    MIN_FIRST_CHUNK,
    MIN_PART,
    Ewma,
    IntervalSet,
    PathEstimate,
    WindowedMin,
    even_split,
    first_chunk,
    guessed_split,
    lagging_eta,
    path_estimate,
    plan_round,
    should_rerequest,
    size_key,
    stalled,
    worth_draining,
)

IMPLEMENTATION = "mphttp (HTTP/1.1 byte ranges, one TCP connection per path)"
SCHEDULERS = {
    "finish-together": "ranges sized from each path's measured rate and round trip so that the "
                       "parts end together (a large object in chunks to the paths about to run "
                       "dry); a path that is done re-requests a lagging part's remainder when "
                       "it would deliver it sooner",
    "even": "equal ranges on every path whatever they measured, no re-request of a lagging part "
            "(a failed one is still asked again): the baseline that shows what the sizing is "
            "worth",
}
DEFAULT_SCHEDULER = "finish-together"

HEAD_LIMIT = 256 * 1024  # the longest response or request head accepted
READ_CHUNK = 64 * 1024
# A part's bytes wake the proxy in batches of this much (or what is left of the response): at
# 25 Mbit/s a wake-up every 5 ms instead of one per couple of TCP segments.
LOW_WATER_BYTES = 16 * 1024
CONNECT_TIMEOUT_S = 1.0
PROBE_INTERVAL_S = 0.5
# What a path is assumed to do before it has been measured: the mean of the measured paths, or
# these when none is.
PRIOR_RATE = 1_000_000.0  # bytes/s
PRIOR_LATENCY_S = 0.05
# A part's rate is a sample of its path's only when it carried enough to say more than slow
# start's first window.
RATE_SAMPLE_MIN_BYTES = 24 * 1024
LATENCY_WINDOW_S = 10.0  # how far back a path's least round trip is taken from
TICK_S = 0.02  # how often a download re-checks its paths when nothing else happens
LAG_PROBE_S = 0.02  # how often the event loop's lateness is sampled
WATCHDOG_S = 0.1  # how often silent connections are looked for
# A pass-through request (a beacon, an API call) may wait this long for its answer.
PASS_TIMEOUT_S = 30.0
# Objects fetched before, by size_key, for guessing a new one's size (a few, the least counts:
# a guess too large asks for bytes twice).
SIZE_MEMORY = 3
GUESS_SHARE = 0.8
# The proxy is in the data path of every download, as the kernel's TCP is, whose work runs ahead
# of any process. At the browser's priority (and at nice -10: Chromium raises its own busy
# threads to -8) it waited on the run queue 50-90 ms of every 100 ms while the player started on
# a two-core client, and every byte waited with it. A low real-time priority (below the link
# emulator's 10) puts it first at little cost to the rest: it sleeps whenever nothing arrives
# and takes about 4% of one CPU while a video plays; the kernel's RT throttling keeps a share of
# each CPU for everything else.
DEFAULT_RT_PRIORITY = 5
MAX_BODY = 64 * 1024 * 1024  # the largest request body taken (the collector's beacons are KBs)
MAX_PART_FAILURES = 12  # one download gives up after this many failed parts
TAIL_SHARE = 0.1  # the tail of a download: its last 10% of bytes, by arrival

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
              "transfer-encoding", "upgrade", "proxy-authorization", "proxy-authenticate"}
CONDITIONAL = {"if-none-match", "if-modified-since", "if-match", "if-unmodified-since",
               "if-range"}


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


def now() -> float:
    return time.monotonic()


def unix(t_monotonic: float) -> float:
    """A monotonic time as Unix time (the trial clock's statistics are in Unix time)."""
    return round(time.time() - (time.monotonic() - t_monotonic), 6)


# --- HTTP/1.1 messages --------------------------------------------------------------------------


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


# --- paths and connections ----------------------------------------------------------------------


@dataclass(eq=False)
class PathState:
    """One client path: where its connections are bound, what it has measured, its idle
    connections and its counts."""

    index: int
    local: str
    ifname: str | None = None
    backup: bool = False
    rate: Ewma = field(default_factory=lambda: Ewma(0.3))  # bytes/s a part got
    # Request to first byte on an idle connection: its least recent value, the idle round trip.
    latency: WindowedMin = field(default_factory=lambda: WindowedMin(LATENCY_WINDOW_S))
    up: bool = True
    idle: dict[Origin, list[Conn]] = field(default_factory=dict)
    parts: set[Part] = field(default_factory=set)  # queued or running, of any download
    rx_bytes: int = 0  # body bytes received (what the statistics and the proof count)
    tx_bytes: int = 0  # request bytes sent
    requests: int = 0
    probing: asyncio.Task[None] | None = None

    def backlog(self) -> int:
        return sum(p.remaining() for p in self.parts)

    def stalled(self, t: float) -> bool:
        """A part whose turn it is on its connection has received nothing for long (it may be
        dead): nothing more is planned on the path while another is usable."""
        latency = self.latency.value or PRIOR_LATENCY_S
        return any(p.stalled(t, latency) for p in self.parts)

    def describe(self) -> dict[str, Any]:
        return {"path": self.index, "local": self.local, "ifname": self.ifname,
                "backup": self.backup}


class Exchange(Protocol):
    """A request written on a connection whose response its reader task reads: a part of a
    download, or a pass-through request."""

    received: int
    last_activity: float
    sent_idle: bool  # written on a connection with nothing else in flight
    head_seen: bool
    timeout_s: float  # the silence after which its connection is taken for dead

    async def read_response(self, conn: Conn) -> None: ...

    def failed(self, exc: PartFailed) -> None: ...


class Conn:
    """One keep-alive connection of a path to an origin. Requests are written as they are given
    (pipelined: the next is on its way while a response still arrives) and their responses are
    read in order by the connection's reader task."""

    def __init__(self, proxy: Proxy, path: PathState, origin: Origin,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.proxy, self.path, self.origin = proxy, path, origin
        self.reader, self.writer = reader, writer
        self.queue: deque[Exchange] = deque()
        self.wake = asyncio.Event()
        self.closed = False
        self.aborted = False  # closed by the proxy (a cancelled copy, a stop)
        self.answered = 0  # responses read whole
        self.pool_when_idle = False  # back to the pool once what is queued has been read
        self.timed_out: float | None = None  # the silence the watchdog closed it after
        self.sock = writer.get_extra_info("socket")  # None through TLS: no low-water mark
        if writer.get_extra_info("sslcontext") is not None:
            self.sock = None
        self.lowat = 1
        self.waiting, self.waiting_since = 0, 0.0  # what unread() last said, and since when
        self.task = asyncio.create_task(self._read_loop())

    def usable(self) -> bool:
        return not self.closed and not self.reader.at_eof()

    def unread(self) -> int:
        """Bytes that arrived and wait in the kernel (below the low-water mark) to be read."""
        if self.sock is None or self.closed:
            return 0
        try:
            return struct.unpack("i", fcntl.ioctl(self.sock.fileno(), termios.FIONREAD,
                                                  b"\0\0\0\0"))[0]
        except OSError:
            return 0

    def seen(self, read_at: float) -> float:
        """When bytes last arrived for what is its turn: `read_at`, when they were last read,
        or later, when more wait in the kernel than when it last looked."""
        waiting = self.unread()
        if waiting != self.waiting:
            self.waiting, self.waiting_since = waiting, now()
        return max(read_at, self.waiting_since if waiting else read_at)

    def low_water(self, nbytes: int) -> None:
        """Wake the reader only once `nbytes` have arrived (SO_RCVLOWAT). A fast path delivers
        a few TCP segments per wake-up otherwise, and each costs the proxy more than the bytes
        do; set to what is left of the response at most, it never holds back its end."""
        if nbytes != self.lowat and self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, nbytes)
                self.lowat = nbytes

    def send(self, item: Exchange, raw: bytes) -> None:
        item.sent_idle = not self.queue
        item.last_activity = now()
        self.queue.append(item)
        self.writer.write(raw)
        self.path.tx_bytes += len(raw)
        self.path.requests += 1
        self.wake.set()

    def time_out(self) -> None:
        """The watchdog's verdict: what is its turn has heard nothing for its timeout. What
        is queued fails through the path's fault."""
        if self.queue and not self.closed:
            self.timed_out = self.queue[0].timeout_s
            self.close()

    def close(self) -> None:
        """Closes at once; what is still queued on it fails (not through the path's fault)."""
        if not self.closed:
            self.aborted = True
        self.closed = True
        with contextlib.suppress(Exception):
            self.writer.transport.abort()
        self.wake.set()
        self.proxy.forget(self)

    async def _read_loop(self) -> None:
        try:
            while True:
                while not self.queue:
                    if self.closed:
                        return
                    if self.pool_when_idle:
                        self.pool_when_idle = False
                        self.proxy.give_back(self)
                    self.wake.clear()
                    await self.wake.wait()
                item = self.queue[0]
                item.last_activity = max(item.last_activity, now())  # its turn starts
                await item.read_response(self)
                self.answered += 1
                self.queue.popleft()
        except asyncio.CancelledError:
            self._fail_all(PartFailed("the proxy stopped", path_fault=False))
            raise
        except PartFailed as exc:
            self._fail_all(exc)
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError,
                TimeoutError, ssl.SSLError) as exc:
            # A kept-alive connection that the server closed before answering is stale, not
            # a path that failed; neither is one the proxy closed itself.
            stale = self.answered > 0 and bool(self.queue) and not self.queue[0].head_seen
            if self.timed_out is not None:
                self._fail_all(PartFailed(f"no bytes for {self.timed_out:g} s"))
            else:
                self._fail_all(PartFailed(describe_error(exc),
                                          path_fault=not (stale or self.aborted)))
        finally:
            self.close()

    def _fail_all(self, exc: PartFailed) -> None:
        self.closed = True
        while self.queue:
            self.queue.popleft().failed(exc)


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, asyncio.IncompleteReadError):
        return "the server closed the connection mid-response"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


# --- one download -------------------------------------------------------------------------------


@dataclass(eq=False)
class Part:
    """A range of one download asked of one path. `start`/`end` are absolute offsets (end
    exclusive); a suffix request (`suffix` bytes from the end) learns them from its response.
    Received bytes wait in `buf` (holding offsets from `buf_start`) until the browser has
    them."""

    fetch: Fetch
    path: PathState
    start: int | None
    end: int | None
    suffix: int | None = None
    copy_of: Part | None = None
    conditional: bool = False  # carries the browser's If-None-Match and the like
    state: str = "new"  # new, sent; then done, failed or cancelled
    conn: Conn | None = None
    # What its response is: range (a 206 of its bytes), relay (the origin's own answer, which
    # goes to the browser as it is), discard (read and dropped), reject (not what was asked).
    mode: str = ""
    buf: bytearray = field(default_factory=bytearray)
    buf_start: int = 0
    received: int = 0
    useful: int = 0  # bytes that no other part had brought first
    draining: bool = False  # cancelled, but read to its end to keep the connection
    t_request: float = 0.0
    t_first_byte: float | None = None
    t_done: float | None = None
    last_activity: float = 0.0
    sent_idle: bool = False
    head_seen: bool = False
    reason: str | None = None
    timeout_s: float = 2.0  # the proxy's --stall-timeout, set when it is made
    copied: bool = False  # another part asks for its remainder too
    sending: asyncio.Task[None] | None = None

    @property
    def reached(self) -> int:
        """One past the last byte this part has received."""
        return (self.start or 0) + self.received

    def remaining(self) -> int:
        if not self.live():
            return 0
        if self.start is None or self.end is None:
            return self.suffix or 0
        return max(0, self.end - self.reached)

    def live(self) -> bool:
        return self.state in ("new", "sent")

    def stalled(self, t: float, latency_s: float) -> bool:
        """Its turn on its connection has come, and nothing has arrived for long."""
        return (self.state == "sent" and self.conn is not None and bool(self.conn.queue)
                and self.conn.queue[0] is self
                and stalled(t - self.conn.seen(self.last_activity), latency_s))

    async def read_response(self, conn: Conn) -> None:
        await self.fetch.read_response(conn, self)

    def failed(self, exc: PartFailed) -> None:
        self.fetch.part_failed(self, exc)

    def record(self) -> dict[str, Any]:
        return {"path": self.path.index, "start": self.start,
                "end": None if self.end is None else self.end - 1, "suffix": self.suffix,
                "copy_of": None if self.copy_of is None else
                self.fetch.parts.index(self.copy_of),
                "outcome": self.state, "received": self.received, "useful": self.useful,
                "t_request": unix(self.t_request),
                "t_first_byte": None if self.t_first_byte is None else unix(self.t_first_byte),
                "t_done": None if self.t_done is None else unix(self.t_done),
                **({"reason": self.reason} if self.reason else {})}


class Fetch:
    """One GET of a whole object, as ranges over the paths, streamed to the browser in order."""

    def __init__(self, proxy: Proxy, request: Head, target: str, origin: Origin,
                 writer: asyncio.StreamWriter, client_keep: bool) -> None:
        self.proxy, self.request, self.target, self.origin = proxy, request, target, origin
        self.writer, self.client_keep = writer, client_keep
        self.size: int | None = None
        self.validator: tuple[str | None, str | None] | None = None
        self.response_head: Head | None = None  # what the browser's answer is made from
        self.pos = 0  # the bytes the browser has been sent
        self.parts: list[Part] = []
        self.have = IntervalSet()  # the bytes that have arrived
        self.conns: dict[int, Conn | asyncio.Task[Conn]] = {}  # one per path
        self.progress = asyncio.Event()
        self.headers_sent = False
        self.relay: Part | None = None  # the part whose answer goes to the browser as it is
        self.relay_chunks: deque[bytes] = deque()
        self.relay_done = False
        self.relay_ended = False
        self.relay_close = False
        self.fallback = False  # serve it as a pass-through after all (416 on an empty object)
        self.failures = 0
        self.arrivals: list[tuple[float, int, int]] = []  # (time, path, useful bytes)
        self.t_request = now()
        self.t_first_byte: float | None = None
        self.waiting_since: float | None = None  # with no live path since
        self.error: str | None = None
        self.changed = False  # a part began, ended or failed since the last decisions
        self.steered = 0.0
        self.finished = False  # its parts are cancelled and its record written

    # -- the plan ---------------------------------------------------------------------------

    def request_headers(self, conditional: bool) -> list[tuple[str, str]]:
        drop = HOP_BY_HOP | {"host", "range", "content-length"} | (
            set() if conditional else CONDITIONAL)
        return [("Host", self.origin.authority), *self.request.without(drop)]

    def estimates(self) -> list[PathEstimate]:
        return self.proxy.estimates(self)

    def start(self) -> None:
        """The first request (and, for an object like ones fetched before, the second)."""
        est = self.estimates()
        if not est:
            return
        conditional = any(k.lower() in CONDITIONAL for k, _ in self.request.headers)
        guess = None if conditional else self.proxy.size_guess(self.target)
        if guess is not None and self.proxy.scheduler == DEFAULT_SCHEDULER:
            head, tail = guessed_split(guess, est)
            self.add_part(self.proxy.path(head.path), 0, head.end)
            if tail is not None:
                self.add_part(self.proxy.path(tail[0]), None, None, suffix=tail[1])
            return
        # The path that would deliver a first chunk soonest (a fast path with a backlog may
        # still beat an idle slow one).
        best = min(est, key=lambda e: (e.finish_s(MIN_FIRST_CHUNK), e.index))
        path = self.proxy.path(best.index)
        chunk = first_chunk(best, path.latency.value or PRIOR_LATENCY_S)
        self.add_part(path, 0, chunk, conditional=conditional)

    def add_part(self, path: PathState, start: int | None, end: int | None, *,
                 suffix: int | None = None, copy_of: Part | None = None,
                 conditional: bool = False) -> Part:
        part = Part(self, path, start, end, suffix=suffix, copy_of=copy_of,
                    conditional=conditional, t_request=now(), buf_start=start or 0,
                    timeout_s=self.proxy.stall_timeout_s)
        part.last_activity = part.t_request
        self.parts.append(part)
        path.parts.add(part)
        if copy_of is not None:
            copy_of.copied = True
        # Held by the part: the event loop keeps only a weak reference to a task.
        part.sending = asyncio.create_task(self._send(part))
        return part

    async def _send(self, part: Part) -> None:
        try:
            conn = await self.conn_for(part.path)
        except PartFailed as exc:
            self.part_failed(part, exc)
            return
        if not part.live():
            return
        if part.start is None:
            spec = f"bytes=-{part.suffix}"
        else:
            assert part.end is not None
            spec = f"bytes={part.start}-{part.end - 1}"
        headers = [*self.request_headers(part.conditional), ("Range", spec)]
        part.conn, part.state, part.t_request = conn, "sent", now()
        conn.send(part, render_head(f"GET {self.target} HTTP/1.1", headers))

    async def conn_for(self, path: PathState) -> Conn:
        """This download's connection on `path`: one per path, its parts pipelined on it."""
        held = self.conns.get(path.index)
        if isinstance(held, asyncio.Task):
            with contextlib.suppress(PartFailed):
                held = await asyncio.shield(held)
        if isinstance(held, Conn) and held.usable():
            return held
        task = asyncio.create_task(self.proxy.checkout(path, self.origin))
        self.conns[path.index] = task
        try:
            conn = await task
        except BaseException:
            if self.conns.get(path.index) is task:
                del self.conns[path.index]
            raise
        self.conns[path.index] = conn
        return conn

    def live_parts(self) -> list[Part]:
        return [p for p in self.parts if p.live()]

    def gaps(self) -> list[tuple[int, int]]:
        """What of the object has not arrived and no live part is asking for."""
        assert self.size is not None
        covered = IntervalSet()
        for a, b in self.have.spans:
            covered.add(a, b)
        for p in self.live_parts():
            if p.start is not None and p.end is not None:
                covered.add(p.reached, p.end)
        return covered.missing(self.pos, self.size)

    def plan_gaps(self, gaps: list[tuple[int, int]]) -> None:
        est = self.estimates()
        if self.proxy.scheduler == "even":
            pieces = [piece for a, b in gaps for piece in even_split(a, b, est)]
        else:
            measured = {p.index for p in self.proxy.paths if p.rate.value}
            busy = {p.path.index for p in self.live_parts()}
            pieces = plan_round(gaps, est, measured, busy)
        for piece in pieces:
            self.add_part(self.proxy.path(piece.path), piece.start, piece.end)

    def rerequest(self) -> None:
        """A path with nothing left to do for this download also asks for the remainder of the
        part that would end last, when it would deliver it sooner
        (rangeplan.should_rerequest)."""
        if self.proxy.scheduler != DEFAULT_SCHEDULER:
            return
        busy = {p.path.index for p in self.live_parts()}
        free = [e for e in self.estimates() if e.index not in busy]
        t = now()
        lagging = [p for p in self.live_parts() if p.state == "sent" and not p.copied
                   and p.start is not None and p.end is not None and p.remaining() > 0]
        if not free or not lagging:
            return
        etas = {id(p): self.eta(p, t) for p in lagging}
        lag = max(lagging, key=lambda p: etas[id(p)])
        best = min(free, key=lambda e: e.finish_s(lag.remaining()))
        if should_rerequest(lag.remaining(), etas[id(lag)], best):
            assert lag.end is not None
            self.add_part(self.proxy.path(best.index), lag.reached, lag.end, copy_of=lag)

    def eta(self, p: Part, t: float) -> float:
        """When a running part is expected to end (rangeplan.lagging_eta): at the rate it has
        shown (its path's until it has shown enough), after what is ahead of it on its
        connection, or, before its first byte, the rest of its path's round trip."""
        latency = p.path.latency.value or PRIOR_LATENCY_S
        queue = list(p.conn.queue) if p.conn is not None else []
        ahead = queue[:queue.index(p)] if p in queue else []
        # Bytes in the kernel below the low-water mark have arrived, if not yet been read.
        waiting = p.conn.unread() if p.conn is not None and queue and not ahead else 0
        received = p.received + waiting
        if p.t_first_byte is not None and received >= RATE_SAMPLE_MIN_BYTES:
            rate = received / max(t - p.t_first_byte, 1e-3)
        else:
            rate = self.proxy.rate_of(p.path)
        wait = sum(q.remaining() for q in ahead if isinstance(q, Part)) / max(rate, 1.0)
        if not ahead and p.t_first_byte is None:
            wait = max(0.0, latency - (t - p.last_activity))
        silent = t - p.conn.seen(p.last_activity) if p.conn is not None and not ahead else 0.0
        return lagging_eta(max(0, p.remaining() - waiting), rate, silent, latency, wait)

    def cancel_covered(self) -> None:
        """A part whose remaining bytes have all arrived (by its copy) is cancelled: read to
        its end when little is left (the connection is worth more than the bytes), else its
        connection is closed."""
        t = now()
        for p in self.live_parts():
            if p.start is None or p.end is None or self.have.missing(p.reached, p.end):
                continue
            conn = p.conn
            silent = p.stalled(t, p.path.latency.value or PRIOR_LATENCY_S)
            drain = (conn is not None and not silent and bool(conn.queue)
                     and conn.queue[-1] is p
                     and worth_draining(p.remaining(), self.proxy.rate_of(p.path),
                                        p.path.latency.value or PRIOR_LATENCY_S))
            p.draining = drain
            self.finish_part(p, "cancelled")
            if conn is not None and not drain:
                if self.conns.get(p.path.index) is conn:
                    del self.conns[p.path.index]
                conn.close()
            if silent:
                # Its copy came in full over another path while it said nothing: a dead path
                # would stall every download that uses it until the stall timeout, a live one
                # is back as soon as a probe connects.
                self.proxy.path_down(p.path, f"silent for {t - p.last_activity:.2f} s while "
                                             "another path delivered its bytes")

    # -- what the connections report ---------------------------------------------------------

    async def read_response(self, conn: Conn, part: Part) -> None:
        """Reads the response to `part` from `conn` (its reader task calls this)."""
        head, status = await final_head(conn.reader)
        part.head_seen = True
        self.on_head(part, status, head)
        length = head.get("content-length")
        if part.mode != "relay" and length is not None and length.isdigit():
            left = int(length)
            try:
                while left > 0:
                    conn.low_water(min(left, LOW_WATER_BYTES))
                    data = await conn.reader.read(min(left, READ_CHUNK))
                    if not data:
                        raise ConnectionError(f"the connection ended with {left} bytes of the "
                                              "body still to come")
                    left -= len(data)
                    conn.path.rx_bytes += len(data)
                    self.on_data(part, data)
            finally:
                conn.low_water(1)  # the next head is read as soon as its first byte is in
        else:
            async for data, _raw in body_chunks(conn.reader, head,
                                                framed_only=part.mode != "relay"):
                conn.path.rx_bytes += len(data)
                self.on_data(part, data)
        if part.mode == "relay":
            self.relay_done = True
            self.relay_close = "close" in head.tokens("connection") or \
                not body_is_framed(head, status, "GET")
        if part.mode == "reject":
            raise PartFailed(f"path {part.path.index}: {part.reason}", path_fault=False)
        if "close" in head.tokens("connection"):
            conn.closed = True
        if part.live():
            self.finish_part(part, "done")
        elif part.draining:
            conn.pool_when_idle = True
        self.progress.set()

    def on_head(self, part: Part, status: int, head: Head) -> None:
        t = now()
        self.changed = True
        self.progress.set()  # a size to plan with, or an answer to relay: decide now
        part.last_activity = t
        part.t_first_byte = t
        if part.sent_idle:
            # Only a request that did not queue behind another measures the round trip.
            part.path.latency.update(t - part.t_request, t)
        if self.t_first_byte is None:
            self.t_first_byte = t
        if not part.live():
            part.mode = "discard"
            return
        if status == 206:
            self.on_range(part, head)
            return
        first_answer = self.size is None and not self.headers_sent and self.relay is None
        if status == 416 and first_answer and part.suffix is None:
            # An empty object has no range to give: ask for it as the browser did.
            self.fallback = True
            part.mode = "discard"
            return
        if first_answer:
            # The origin does not serve ranges here (200), or answers the request itself
            # (304, 404, ...): that answer goes to the browser as it is.
            part.mode = "relay"
            self.relay, self.response_head = part, head
            for other in self.live_parts():
                if other is not part:
                    conn = other.conn
                    self.finish_part(other, "cancelled")
                    if conn is not None:
                        conn.close()
            return
        part.mode = "reject"
        part.reason = f"the server answered {status} to a range request"

    def on_range(self, part: Part, head: Head) -> None:
        try:
            first, end, total = parse_content_range(head.get("content-range"))
        except ValueError as exc:
            part.mode, part.reason = "reject", f"an unreadable {exc}"
            return
        validator = (head.get("etag"), head.get("last-modified"))
        if self.size is None:
            self.size, self.validator, self.response_head = total, validator, head
            for p in self.parts:  # where the suffix requests start is known now
                if p.start is None and p.suffix is not None:
                    n = min(p.suffix, total)
                    p.start, p.end, p.buf_start = total - n, total, total - n
            self.send_head()
        elif total != self.size or validator != self.validator:
            # The object changed between two parts: they do not fit together.
            self.error = (f"{self.target} changed on the server while it was fetched (size "
                          f"{self.size} then {total}, validator {self.validator} then "
                          f"{validator})")
            part.mode, part.reason = "reject", "the object changed"
            return
        if part.start is None or first != part.start or end > (part.end or end):
            part.mode = "reject"
            part.reason = (f"asked for {part.start}-{(part.end or 0) - 1}, the server gave "
                           f"{first}-{end - 1}")
            return
        part.end = end  # a range past the end of the object ends with it
        part.mode = "range"

    def on_data(self, part: Part, data: bytes) -> None:
        t = now()
        part.last_activity = t
        if part.mode == "relay":
            part.received += len(data)
            part.useful += len(data)
            self.relay_chunks.append(data)
            self.arrivals.append((t, part.path.index, len(data)))
            self.progress.set()
            return
        if part.mode != "range":
            part.received += len(data)
            return
        at = part.reached
        part.received += len(data)
        new = self.have.add(at, at + len(data))
        part.useful += new
        if new:
            self.arrivals.append((t, part.path.index, new))
        end = at + len(data)
        if self.writer.transport.is_closing():
            self.progress.set()  # the browser went away (dash.js aborts a request it gave up)
            return
        if self.headers_sent and at <= self.pos < end:
            # The next bytes the browser waits for: straight to it, without waking the
            # download (which happens for each few segments that arrive).
            self.writer.write(data[self.pos - at:] if self.pos > at else data)
            self.pos = end
            if (self.size is not None and self.pos >= self.size) or \
                    any(p.buf for p in self.parts):
                self.progress.set()  # complete, or buffered bytes may follow on now
            return
        if part.live() and not part.draining and end > self.pos:
            # A part's buffer holds its own bytes up to where it has reached, whoever brought
            # them first: one that is not contiguous with this chunk (its bytes were all sent
            # to the browser, or skipped as duplicates) starts again here.
            if part.buf_start + len(part.buf) != at:
                part.buf, part.buf_start = bytearray(), at
            part.buf += data
            self.progress.set()

    def finish_part(self, part: Part, outcome: str, reason: str | None = None) -> None:
        if not part.live():
            return
        part.state, part.t_done = outcome, now()
        self.changed = True
        part.reason = part.reason or reason
        part.path.parts.discard(part)
        # A cancelled or failed part's bytes until then measure its path as well: without them
        # a path whose parts its copies keep overtaking would never be measured.
        if part.t_first_byte is not None and part.received >= RATE_SAMPLE_MIN_BYTES \
                and part.t_done > part.t_first_byte:
            part.path.rate.update(part.received / (part.t_done - part.t_first_byte))
        self.progress.set()

    def part_failed(self, part: Part, exc: PartFailed) -> None:
        """A part whose connection broke: what it brought stays; the rest is a gap that the
        next tick asks of the other paths."""
        if not part.live():
            return
        self.failures += 1
        if self.conns.get(part.path.index) is part.conn:
            self.conns.pop(part.path.index, None)
        self.finish_part(part, "failed", str(exc))
        if exc.path_fault:
            self.proxy.path_down(part.path, str(exc))
        if self.relay is part:
            self.error = f"the answer broke off on path {part.path.index}: {exc}"

    # -- to the browser ----------------------------------------------------------------------

    async def deliver(self) -> None:
        """Sends the browser what has arrived in order since the last call."""
        if self.relay is not None:
            await self.deliver_relay()
            return
        if self.size is None:
            return
        self.send_head()
        progressed = True
        while progressed and self.pos < self.size:
            progressed = False
            for p in self.parts:
                if p.buf and p.buf_start <= self.pos < p.buf_start + len(p.buf):
                    chunk = bytes(p.buf[self.pos - p.buf_start:])
                    self.writer.write(chunk)
                    self.pos += len(chunk)
                    progressed = True
        for p in self.parts:  # what the browser has need not be held
            if p.buf and p.buf_start < self.pos:
                cut = min(self.pos - p.buf_start, len(p.buf))
                del p.buf[:cut]
                p.buf_start += cut
        await self.writer.drain()

    def send_head(self) -> None:
        """The browser's answer's head, once the size is known: 200, the whole length, the
        origin's headers but Content-Range."""
        if self.headers_sent or self.size is None:
            return
        assert self.response_head is not None
        headers = [*self.response_head.without(HOP_BY_HOP | {"content-range", "content-length"}),
                   ("Content-Length", str(self.size))]
        if not self.client_keep:
            headers.append(("Connection", "close"))
        self.writer.write(render_head("HTTP/1.1 200 OK", headers))
        self.headers_sent = True

    async def deliver_relay(self) -> None:
        part, head = self.relay, self.response_head
        assert part is not None and head is not None
        status = status_of(head)
        chunked = "chunked" in head.tokens("transfer-encoding")
        if not self.headers_sent:
            headers = head.without(HOP_BY_HOP)
            if chunked:
                headers.append(("Transfer-Encoding", "chunked"))
            if not body_is_framed(head, status, "GET") or not self.client_keep:
                headers.append(("Connection", "close"))
            self.writer.write(render_head(f"HTTP/1.1 {head.first.split(' ', 1)[1]}", headers))
            self.headers_sent = True
        while self.relay_chunks:
            data = self.relay_chunks.popleft()
            self.pos += len(data)
            if data:
                self.writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n"
                                  if chunked else data)
        if self.relay_done and chunked and not self.relay_ended:
            self.writer.write(b"0\r\n\r\n")
        self.relay_ended = self.relay_done
        await self.writer.drain()

    def complete(self) -> bool:
        if self.relay is not None:
            return self.relay_ended and not self.relay_chunks
        return self.size is not None and self.pos >= self.size and self.headers_sent

    # -- the whole download ------------------------------------------------------------------

    async def run(self) -> bool:
        """Serves the download; whether the browser's connection can carry another request."""
        self.start()
        try:
            while True:
                # A timer rather than wait_for: that makes a task per wake-up, and a download
                # wakes for every few segments that arrive.
                tick = asyncio.get_running_loop().call_later(TICK_S, self.progress.set)
                await self.progress.wait()
                tick.cancel()
                self.progress.clear()
                if self.fallback and not self.headers_sent:
                    self.finish()
                    return await self.proxy.passthrough(self.request, b"", self.target,
                                                        self.origin, self.writer,
                                                        self.client_keep)
                if self.error is not None:
                    raise ProxyError(self.error)
                await self.deliver()
                if self.complete():
                    break
                # Decisions follow a part's head, end or failure at once, and otherwise a tick:
                # not every chunk that arrives (a few KB each) needs the whole plan revisited.
                t = now()
                if self.relay is None and (self.changed or t - self.steered >= TICK_S):
                    self.changed, self.steered = False, t
                    self.steer()
            return self.client_keep and not (self.relay is not None and self.relay_close)
        finally:
            self.finish()

    def steer(self) -> None:
        """Each tick's decisions: cancelled copies, what no part asks for yet, and copies of a
        lagging part."""
        t = now()
        if self.failures > MAX_PART_FAILURES:
            last = next((p.reason for p in reversed(self.parts) if p.reason), "")
            raise ProxyError(f"{self.failures} requests for {self.target} failed (the last: "
                             f"{last})")
        if self.size is None:
            # No answer with the size yet: a first request that failed is made again.
            if not self.live_parts():
                if self.estimates():
                    self.waiting_since = None
                    self.start()
                else:
                    self.wait_for_path(t)
            return
        self.cancel_covered()
        gaps = self.gaps()
        if gaps:
            if self.estimates():
                self.waiting_since = None
                self.plan_gaps(gaps)
            else:
                self.wait_for_path(t)
        self.rerequest()

    def wait_for_path(self, t: float) -> None:
        if self.waiting_since is None:
            self.waiting_since = t
        elif t - self.waiting_since > self.proxy.no_path_timeout_s:
            raise ProxyError(f"no path reached {self.origin} for "
                             f"{self.proxy.no_path_timeout_s:g} s (every path is down)")

    def finish(self) -> None:
        """Cancels what still runs, gives the connections back, writes the download's record
        (once)."""
        if self.finished:
            return
        self.finished = True
        for p in self.live_parts():
            conn = p.conn
            self.finish_part(p, "cancelled")
            if conn is not None:
                conn.close()
        for held in self.conns.values():
            if isinstance(held, asyncio.Task):
                held.add_done_callback(self.proxy.give_back_when_made)
            elif held.usable():
                if held.queue:
                    held.pool_when_idle = True
                else:
                    self.proxy.give_back(held)
        self.conns.clear()
        if self.fallback and not self.headers_sent:
            return  # the pass-through that serves it instead writes its record
        if self.size is not None and self.relay is None and self.pos >= self.size:
            self.proxy.remember_size(self.target, self.size)
        self.proxy.record(self.summary())

    def summary(self) -> dict[str, Any]:
        n = 1 + max(p.index for p in self.proxy.paths)
        per_path, received = [0] * n, [0] * n
        for _t, path, useful in self.arrivals:
            per_path[path] += useful
        for p in self.parts:
            received[p.path.index] += p.received
        total = sum(per_path)
        # The tail: which paths brought the last 10% of the bytes to arrive.
        tail, want = [0] * n, math.ceil(TAIL_SHARE * total)
        for _t, path, useful in sorted(self.arrivals, reverse=True):
            if want <= 0:
                break
            tail[path] += min(useful, want)
            want -= min(useful, want)
        status = 200 if self.relay is None or self.response_head is None \
            else status_of(self.response_head)
        t = now()
        return {"event": "request", "t": unix(t), "url": self.target, "origin": str(self.origin),
                "method": "GET", "mode": "split" if self.relay is None else "relay",
                "status": status, "size": self.size, "delivered": self.pos,
                "complete": self.complete(), "t_request": unix(self.t_request),
                "t_first_byte": None if self.t_first_byte is None else unix(self.t_first_byte),
                "t_done": unix(t), "path_bytes": per_path, "received_bytes": received,
                "redundant_bytes": max(0, sum(received) - total), "tail_path_bytes": tail,
                "parts": [p.record() for p in self.parts],
                **({"error": self.error} if self.error else {})}


class PassRequest:
    """A request that goes to the origin as it is, on one path: its answer is relayed to the
    browser by the connection's reader task as it arrives."""

    def __init__(self, proxy: Proxy, method: str, writer: asyncio.StreamWriter,
                 client_keep: bool) -> None:
        self.proxy, self.method, self.writer, self.client_keep = proxy, method, writer, client_keep
        self.done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.received = 0
        self.last_activity = now()
        self.sent_idle = False
        self.head_seen = False
        self.timeout_s = PASS_TIMEOUT_S
        self.status: int | None = None
        self.t_first_byte: float | None = None

    async def read_response(self, conn: Conn) -> None:
        head, status = await final_head(conn.reader)
        self.head_seen, self.status, self.t_first_byte = True, status, now()
        self.last_activity = self.t_first_byte
        framed = body_is_framed(head, status, self.method)
        headers = head.without({"connection", "keep-alive", "proxy-connection"})
        if not framed or not self.client_keep:
            headers.append(("Connection", "close"))
        self.writer.write(render_head(f"HTTP/1.1 {head.first.split(' ', 1)[1]}", headers))
        if has_body(status, self.method):
            async for data, raw in body_chunks(conn.reader, head):
                self.received += len(data)
                conn.path.rx_bytes += len(data)
                self.writer.write(raw)
                await self.to_browser()
                self.last_activity = now()
        await self.to_browser()
        if not framed or "close" in head.tokens("connection"):
            conn.closed = True
        if not self.done.done():
            self.done.set_result(self.client_keep and framed)

    async def to_browser(self) -> None:
        """Waits for the browser to take what was written; a browser that went away is no
        fault of the path (the connection closes, as its answer cannot be finished)."""
        try:
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise PartFailed(f"the browser went away: {exc}", path_fault=False) from exc

    def failed(self, exc: PartFailed) -> None:
        if not self.done.done():
            self.done.set_exception(exc)


def body_is_framed(head: Head, status: int, method: str) -> bool:
    """Whether the end of the body is known without the connection closing."""
    return not has_body(status, method) or head.get("content-length") is not None \
        or "chunked" in head.tokens("transfer-encoding")


# --- the proxy ----------------------------------------------------------------------------------


class Proxy:
    def __init__(self, paths: list[PathState], upstream: Origin | None,
                 stats: TextIO | None = None, scheduler: str = DEFAULT_SCHEDULER,
                 stall_timeout_s: float = 2.0, no_path_timeout_s: float = 20.0,
                 stats_interval_s: float = 0.1) -> None:
        self.paths = paths
        self.upstream = upstream
        self.stats = stats
        self.scheduler = scheduler
        self.stall_timeout_s = stall_timeout_s
        self.no_path_timeout_s = no_path_timeout_s
        self.stats_interval_s = stats_interval_s
        self.sizes: dict[str, deque[int]] = {}
        self.conns: set[Conn] = set()
        self.addresses: dict[tuple[Origin, int], Any] = {}
        self.origins_seen: list[Origin] = []
        self.spares: dict[tuple[int, Origin], asyncio.Task[None]] = {}
        self.loop_lag_s = 0.0
        self.requests = 0
        self.redundant_bytes = 0
        self.stopping = asyncio.Event()

    # -- paths -------------------------------------------------------------------------------

    def path(self, index: int) -> PathState:
        return next(p for p in self.paths if p.index == index)

    def estimates(self, fetch: Fetch | None = None) -> list[PathEstimate]:
        """The live paths as the planner sees them: a suspect path only when no other is up, a
        backup path only when no other path is."""
        up = [p for p in self.paths if p.up]
        t = now()
        for keep in (lambda p: not p.backup and not p.stalled(t),
                     lambda p: not p.stalled(t), lambda p: True):
            chosen = [p for p in up if keep(p)]
            if chosen:
                break
        else:
            return []
        lats = [p.latency.value for p in self.paths if p.latency.value]
        prior_lat = sum(lats) / len(lats) if lats else PRIOR_LATENCY_S
        origin = fetch.origin if fetch is not None else self.upstream
        out = []
        for p in chosen:
            latency = p.latency.value or prior_lat
            held = fetch.conns.get(p.index) if fetch is not None else None
            if held is None and not self.has_idle(p, origin):
                latency *= 2  # a connection to open first: one more round trip
            out.append(path_estimate(p.index, self.rate_of(p), latency, p.backlog()))
        return out

    def rate_of(self, path: PathState) -> float:
        """A path's measured rate (bytes/s); before it has one, the mean of the paths that
        have, or PRIOR_RATE."""
        if path.rate.value:
            return path.rate.value
        rates = [p.rate.value for p in self.paths if p.rate.value]
        return sum(rates) / len(rates) if rates else PRIOR_RATE

    def has_idle(self, path: PathState, origin: Origin | None) -> bool:
        return origin is not None and any(c.usable() for c in path.idle.get(origin, []))

    def path_down(self, path: PathState, reason: str) -> None:
        """The path failed under a part: nothing more is planned on it, its idle connections
        go, and it is probed until it connects again."""
        if not path.up or self.stopping.is_set():
            return
        path.up = False
        self.log({"event": "path_down", "t": unix(now()), "path": path.index,
                  "local": path.local, "reason": reason})
        for conns in path.idle.values():
            for conn in list(conns):
                conn.close()
        path.idle.clear()
        if path.probing is None or path.probing.done():
            path.probing = asyncio.create_task(self.probe(path))

    async def probe(self, path: PathState) -> None:
        origin = self.upstream or (self.origins_seen[-1] if self.origins_seen else None)
        while origin is not None and not self.stopping.is_set():
            started = now()
            try:
                conn = await self.connect(path, origin)
            except (OSError, TimeoutError, ssl.SSLError):
                await asyncio.sleep(max(0.0, PROBE_INTERVAL_S - (now() - started)))
                continue
            path.up = True
            self.log({"event": "path_up", "t": unix(now()), "path": path.index,
                      "local": path.local})
            self.give_back(conn)
            return

    async def connect(self, path: PathState, origin: Origin) -> Conn:
        """A new connection to `origin` from the path's address (and interface)."""
        loop = asyncio.get_running_loop()
        family = socket.AF_INET6 if ":" in path.local else socket.AF_INET
        if (origin, family) not in self.addresses:
            infos = await loop.getaddrinfo(origin.host, origin.port, family=family,
                                           type=socket.SOCK_STREAM)
            self.addresses[(origin, family)] = infos[0][4]
            self.origins_seen.append(origin)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            if path.ifname:
                # Bound to the interface too: on a real host the main routing table may send
                # any source address out by the default route; this keeps the path its own.
                with contextlib.suppress(PermissionError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE,
                                    path.ifname.encode())
            sock.bind((path.local, 0))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t0 = now()
            await asyncio.wait_for(loop.sock_connect(sock, self.addresses[(origin, family)]),
                                   CONNECT_TIMEOUT_S)
            if path.latency.value is None:
                path.latency.update(now() - t0, now())  # the handshake's round trip
            tls = ssl.create_default_context() if origin.scheme == "https" else None
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                sock=sock, ssl=tls, server_hostname=origin.host if tls else None,
                limit=HEAD_LIMIT), CONNECT_TIMEOUT_S * 3)
        except BaseException:
            sock.close()
            raise
        conn = Conn(self, path, origin, reader, writer)
        self.conns.add(conn)
        return conn

    async def checkout(self, path: PathState, origin: Origin) -> Conn:
        """An idle connection of the path to `origin`, or a new one; a path that cannot connect
        fails the part that asked (and is taken down by it)."""
        idle = path.idle.get(origin, [])
        while idle:
            conn = idle.pop()
            if conn.usable():
                self.keep_spare(path, origin)
                return conn
            conn.close()
        if not path.up:
            raise PartFailed(f"path {path.index} is down", path_fault=False)
        try:
            conn = await self.connect(path, origin)
            self.keep_spare(path, origin)
            return conn
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise PartFailed(f"no connection from {path.local} within {CONNECT_TIMEOUT_S:g} s"
                             if isinstance(exc, TimeoutError) else
                             f"cannot connect from {path.local}: {describe_error(exc)}"
                             ) from exc

    def keep_spare(self, path: PathState, origin: Origin) -> None:
        """Opens a connection in the background when the path has no idle one to `origin`, so
        that the next part on it does not wait for a handshake."""
        if self.stopping.is_set() or not path.up or self.has_idle(path, origin):
            return
        if (path.index, origin) in self.spares:
            return

        async def spare() -> None:
            try:
                self.give_back(await self.connect(path, origin))
            except (OSError, TimeoutError, ssl.SSLError):
                pass  # a path that cannot connect shows it under the next part
            finally:
                self.spares.pop((path.index, origin), None)

        self.spares[(path.index, origin)] = asyncio.create_task(spare())

    def give_back(self, conn: Conn) -> None:
        if conn.usable() and not conn.queue and conn.path.up and not self.stopping.is_set():
            pool = conn.path.idle.setdefault(conn.origin, [])
            if conn not in pool:
                pool.append(conn)
        elif not conn.queue:
            conn.close()

    def give_back_when_made(self, task: asyncio.Task[Conn]) -> None:
        if not task.cancelled() and task.exception() is None:
            self.give_back(task.result())

    def forget(self, conn: Conn) -> None:
        self.conns.discard(conn)
        pool = conn.path.idle.get(conn.origin)
        if pool and conn in pool:
            pool.remove(conn)

    # -- sizes -------------------------------------------------------------------------------

    def size_guess(self, target: str) -> int | None:
        seen = self.sizes.get(size_key(urlsplit(target).path))
        if not seen:
            return None
        guess = int(GUESS_SHARE * min(seen))
        return guess if guess >= 2 * MIN_PART else None

    def remember_size(self, target: str, size: int) -> None:
        self.sizes.setdefault(size_key(urlsplit(target).path),
                              deque(maxlen=SIZE_MEMORY)).append(size)

    # -- statistics --------------------------------------------------------------------------

    def log(self, line: dict[str, Any]) -> None:
        if self.stats is not None:
            self.stats.write(json.dumps(line, separators=(",", ":")) + "\n")
            self.stats.flush()

    def record(self, line: dict[str, Any]) -> None:
        self.requests += 1
        self.redundant_bytes += int(line.get("redundant_bytes", 0))
        self.log(line)

    def path_lines(self) -> list[dict[str, Any]]:
        t = unix(now())
        return [{"t": t, "path": p.index, "local": p.local, "rx_bytes": p.rx_bytes,
                 "tx_bytes": p.tx_bytes, "requests": p.requests,
                 "rate_bps": None if p.rate.value is None else round(8 * p.rate.value),
                 "latency_ms": None if p.latency.value is None
                 else round(1000 * p.latency.value, 2),
                 "state": "down" if not p.up else "stalled" if p.stalled(now()) else "up",
                 "connections": sum(1 for c in self.conns if c.path is p)}
                for p in self.paths]

    async def watchdog(self) -> None:
        """Closes a connection whose response (or the wait for it) has been silent for its
        timeout: a dead path's parts then fail and are asked of the others."""
        while not self.stopping.is_set():
            await asyncio.sleep(WATCHDOG_S)
            t = now()
            for conn in list(self.conns):
                if conn.queue and t - conn.queue[0].last_activity > conn.queue[0].timeout_s:
                    conn.time_out()

    async def lag_loop(self) -> None:
        """How late the event loop wakes (the proxy shares the client's CPU with the browser:
        a late loop is time every download waits), as the most per statistics interval."""
        while not self.stopping.is_set():
            t = now()
            await asyncio.sleep(LAG_PROBE_S)
            self.loop_lag_s = max(self.loop_lag_s, now() - t - LAG_PROBE_S)

    async def stats_loop(self) -> None:
        """Each path's figures every interval in which any of them changed."""
        last: list[tuple[Any, ...]] = []
        while not self.stopping.is_set():
            lines = self.path_lines()
            for line in lines:
                line["loop_lag_ms"] = round(1000 * self.loop_lag_s, 1)
            self.loop_lag_s = 0.0
            key = [(x["rx_bytes"], x["tx_bytes"], x["state"]) for x in lines]
            if key != last:
                for line in lines:
                    self.log(line)
                last = key
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), self.stats_interval_s)

    # -- the browser's side ------------------------------------------------------------------

    async def serve_client(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    head = await read_head(reader)
                except (ConnectionError, ValueError) as exc:
                    await self.answer(writer, 400, f"a malformed request: {exc}", False)
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
            await self.answer(writer, 400, f"not an HTTP/1.x request line: {head.first[:80]!r}",
                              False)
            return False
        method, target, version = parts
        keep = ("close" not in head.tokens("connection") if version == "HTTP/1.1"
                else "keep-alive" in head.tokens("connection"))
        try:
            body = await read_request_body(reader, head)
        except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            await self.answer(writer, 400, f"the request body could not be read: {exc}", False)
            return False
        origin = self.upstream
        if target.startswith(("http://", "https://")):
            # A browser that uses the proxy as its HTTP proxy names the origin in the target.
            try:
                origin = parse_origin(target)
            except ValueError as exc:
                await self.answer(writer, 400, str(exc), keep)
                return keep
            rest = urlsplit(target)
            target = (rest.path or "/") + (f"?{rest.query}" if rest.query else "")
        if origin is None:
            await self.answer(writer, 400, "no origin: start the proxy with --upstream, or ask "
                                           "with an absolute URL (as of an HTTP proxy)", keep)
            return keep
        fetch = None
        try:
            if method == "GET" and head.get("range") is None and not body:
                fetch = Fetch(self, head, target, origin, writer, keep)
                return await fetch.run()
            return await self.passthrough(head, body, target, origin, writer, keep)
        except ProxyError as exc:
            if exc.half_sent or (fetch is not None and fetch.headers_sent):
                writer.transport.abort()  # an answer is half sent: only ending it is left
                return False
            await self.answer(writer, 502, str(exc), keep)
            return keep

    async def answer(self, writer: asyncio.StreamWriter, status: int, text: str,
                     keep: bool) -> None:
        body = (text + "\n").encode()
        reason = {400: "Bad Request", 502: "Bad Gateway"}.get(status, "Error")
        headers = [("Content-Type", "text/plain; charset=utf-8"),
                   ("Content-Length", str(len(body)))]
        if not keep:
            headers.append(("Connection", "close"))
        writer.write(render_head(f"HTTP/1.1 {status} {reason}", headers) + body)
        with contextlib.suppress(ConnectionError, OSError):
            await writer.drain()

    async def passthrough(self, head: Head, body: bytes, target: str, origin: Origin,
                          writer: asyncio.StreamWriter, keep: bool) -> bool:
        """The request as it is, on the path that would answer first (a Range request, a POST,
        a HEAD). A connection that fails before any answer is tried again on another (a
        kept-alive one the server had closed meanwhile, or a path that failed)."""
        method = head.first.split(" ", 1)[0]
        t_request = now()
        headers = [("Host", origin.authority),
                   *head.without(HOP_BY_HOP | {"host", "content-length"})]
        if body or method in ("POST", "PUT", "PATCH"):
            headers.append(("Content-Length", str(len(body))))
        raw = render_head(f"{method} {target} HTTP/1.1", headers) + body
        last_error = "no path is up"
        attempts = 0
        while attempts < 3:
            est = self.estimates()
            if not est:
                if now() - t_request > self.no_path_timeout_s:
                    break
                await asyncio.sleep(PROBE_INTERVAL_S)
                continue
            attempts += 1
            path = self.path(min(est, key=lambda e: (e.start_s, -e.rate, e.index)).index)
            exchange = PassRequest(self, method, writer, keep)
            try:
                conn = await self.checkout(path, origin)
                conn.send(exchange, raw)
                client_keep = await exchange.done
            except PartFailed as exc:
                if exchange.head_seen:
                    raise ProxyError(str(exc), half_sent=True) from exc
                last_error = str(exc)
                if exc.path_fault:
                    self.path_down(path, str(exc))
                continue
            self.give_back(conn)
            self.record({"event": "request", "t": unix(now()), "url": target,
                         "origin": str(origin), "method": method, "mode": "pass",
                         "range": head.get("range"), "status": exchange.status,
                         "t_request": unix(t_request),
                         "t_first_byte": unix(exchange.t_first_byte or now()),
                         "t_done": unix(now()), "path": path.index,
                         "received_bytes": exchange.received})
            return client_keep
        raise ProxyError(f"{method} {target} on {origin}: {last_error}")

    # -- life --------------------------------------------------------------------------------

    async def warm_up(self) -> None:
        """One connection per path to the upstream, so that the first download does not wait
        for handshakes and each path's round trip is known; a path that cannot connect starts
        down (and is probed)."""
        if self.upstream is None:
            return
        upstream = self.upstream

        async def one(path: PathState) -> None:
            try:
                self.give_back(await self.connect(path, upstream))
            except (OSError, TimeoutError, ssl.SSLError) as exc:
                self.path_down(path, f"no connection at start: {describe_error(exc)}")

        await asyncio.gather(*(one(p) for p in self.paths))

    async def stop(self) -> None:
        self.stopping.set()
        for path in self.paths:
            if path.probing is not None:
                path.probing.cancel()
        for task in list(self.spares.values()):
            task.cancel()
        for conn in list(self.conns):
            conn.close()
        for line in self.path_lines():
            self.log(line)
        self.log({"event": "stopped", "t": unix(now()), "cpu_s": round(time.process_time(), 3),
                  "requests": self.requests,
                  "redundant_bytes": self.redundant_bytes,
                  "rx_bytes": [p.rx_bytes for p in self.paths]})


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


# --- the program --------------------------------------------------------------------------------


def parse_path(text: str) -> PathState:
    """`INDEX,ADDRESS[,IFNAME][,backup]` (a comma: IPv6 addresses have colons)."""
    fields = [f.strip() for f in text.split(",")]
    backup = fields[-1] == "backup"
    if backup:
        fields = fields[:-1]
    if len(fields) not in (2, 3) or not fields[0].isdigit():
        raise argparse.ArgumentTypeError(
            f"--path {text!r}: give INDEX,ADDRESS[,IFNAME][,backup], e.g. 0,10.1.0.2,p0")
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in fields[1] else socket.AF_INET, fields[1])
    except OSError:
        raise argparse.ArgumentTypeError(f"--path {text!r}: {fields[1]!r} is not an IP "
                                         "address of this host") from None
    return PathState(int(fields[0]), fields[1], fields[2] if len(fields) == 3 else None, backup)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m mpstream.transports.mphttp", description=(
        "Client-only multipath HTTP: a proxy that fetches each whole object as byte ranges "
        "over one TCP connection per client path."))
    ap.add_argument("--listen", default="127.0.0.1:0",
                    help="where the browser connects (port 0: any free one; the ready line "
                         "says which) [%(default)s]")
    ap.add_argument("--upstream", type=parse_origin, default=None,
                    help="the origin a request without one goes to, e.g. http://10.2.0.2:8080")
    ap.add_argument("--path", dest="paths", type=parse_path, action="append", required=True,
                    help="a client path: INDEX,ADDRESS[,IFNAME][,backup] (repeat per path)")
    ap.add_argument("--scheduler", choices=list(SCHEDULERS), default=DEFAULT_SCHEDULER)
    ap.add_argument("--stats", default=None, help="append JSON-lines statistics to this file")
    ap.add_argument("--stats-interval-ms", type=int, default=100)
    ap.add_argument("--stall-timeout", type=float, default=2.0,
                    help="seconds without a byte before a path is taken for dead [%(default)s]")
    ap.add_argument("--no-path-timeout", type=float, default=20.0,
                    help="seconds a request waits for a path when all are down [%(default)s]")
    ap.add_argument("--rt-priority", type=int, default=DEFAULT_RT_PRIORITY,
                    help="SCHED_FIFO priority (0: an ordinary process; without the privilege it "
                         "stays one) [%(default)s]")
    ap.add_argument("--exit-with-parent", action="store_true",
                    help="stop when the process that started this one ends")
    args = ap.parse_args(argv)
    indexes = [p.index for p in args.paths]
    if len(set(indexes)) != len(indexes):
        ap.error(f"--path: an index is given twice ({indexes})")
    return args


def raise_priority(rt_priority: int) -> str:
    """Runs the process at real-time priority `rt_priority` (its children, if any, start as
    ordinary processes) where allowed; what it runs as."""
    if rt_priority > 0:
        with contextlib.suppress(PermissionError, OSError):
            os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK,
                                  os.sched_param(rt_priority))
    policy = os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK
    return f"fifo:{os.sched_getparam(0).sched_priority}" if policy == os.SCHED_FIFO \
        else f"nice:{os.getpriority(os.PRIO_PROCESS, 0)}"


async def main_async(args: argparse.Namespace) -> int:
    host, _, port = args.listen.rpartition(":")
    priority = raise_priority(args.rt_priority)
    stats = open(args.stats, "a", buffering=1) if args.stats else None  # noqa: SIM115
    proxy = Proxy(args.paths, args.upstream, stats, args.scheduler, args.stall_timeout,
                  args.no_path_timeout, args.stats_interval_ms / 1000)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, proxy.stopping.set)
    parent = os.getppid()
    server = await asyncio.start_server(proxy.serve_client, host.strip("[]") or "127.0.0.1",
                                        int(port or 0), limit=HEAD_LIMIT)
    try:
        await proxy.warm_up()
        listen = server.sockets[0].getsockname()
        proxy.log({"event": "ready", "t": unix(now()), "listen": f"{listen[0]}:{listen[1]}",
                   "upstream": str(args.upstream) if args.upstream else None,
                   "scheduler": args.scheduler, "priority": priority,
                   "paths": [p.describe() for p in args.paths]})
        print(json.dumps({"ready": {
            "listen": f"{listen[0]}:{listen[1]}", "paths": [p.index for p in args.paths if p.up],
            "implementation": IMPLEMENTATION, "scheduler": args.scheduler}}), flush=True)
        stats_task = asyncio.create_task(proxy.stats_loop())
        lag_task = asyncio.create_task(proxy.lag_loop())
        watchdog = asyncio.create_task(proxy.watchdog())
        while not proxy.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proxy.stopping.wait(), 0.5)
            if args.exit_with_parent and os.getppid() != parent:
                proxy.stopping.set()  # orphaned: whoever started it is gone
        await stats_task
        lag_task.cancel()
        watchdog.cancel()
    finally:
        server.close()
        await proxy.stop()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()
        if stats is not None:
            stats.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return asyncio.run(main_async(args))
    except OSError as exc:
        print(f"mphttp: {exc} (is --listen {args.listen} free, and is each --path address one "
              f"of this host's?)", file=sys.stderr)
        return 1
