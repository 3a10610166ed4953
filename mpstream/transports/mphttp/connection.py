"""The proxy's client paths and their connections to an origin: one keep-alive connection of a
path carries the requests it is given, pipelined, and its reader task reads their answers in
order, through h11 in the client's role."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import ssl
import struct
import termios
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import h11

from mpstream.transports.mphttp.clock import now
from mpstream.transports.mphttp.errors import PartFailed, describe_error
from mpstream.transports.mphttp.messages import HEAD_LIMIT, READ_CHUNK, Head, Origin
from mpstream.transports.mphttp.rangeplan import Ewma, WindowedMin

# A part's bytes wake the proxy in batches of this much (or what is left of the response): at
# 25 Mbit/s a wake-up every 5 ms instead of one per couple of TCP segments.
LOW_WATER_BYTES = 16 * 1024
PRIOR_LATENCY_S = 0.05
LATENCY_WINDOW_S = 10.0  # how far back a path's least round trip is taken from


class Planned(Protocol):
    """A part of a download queued or running on a path (part.py's Part)."""

    def remaining(self) -> int: ...

    def waiting(self, t: float) -> float: ...

    def stalled(self, t: float, latency_s: float) -> bool: ...


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
    parts: set[Planned] = field(default_factory=set)  # queued or running, of any download
    rx_bytes: int = 0  # body bytes received (what the statistics and the proof count)
    tx_bytes: int = 0  # request bytes sent
    requests: int = 0
    probing: asyncio.Task[None] | None = None

    def backlog(self) -> int:
        return sum(p.remaining() for p in self.parts)

    def waiting(self, t: float) -> float:
        """How long the part whose turn it is has waited for its next bytes (s), the least
        over the path's connections that wait (0 when none does): as the server's figure
        of a subflow, a path that failed shows it growing."""
        waits = [w for w in (p.waiting(t) for p in self.parts) if w > 0]
        return min(waits, default=0.0)

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


class Pool(Protocol):
    """Where a connection goes back when idle, and what forgets it once closed (the proxy)."""

    def give_back(self, conn: Conn) -> None: ...

    def forget(self, conn: Conn) -> None: ...


class Conn:
    """One keep-alive connection of a path to an origin. Requests are written as they are given
    (pipelined: the next is on its way while a response still arrives) and their responses are
    read in order by the connection's reader task."""

    def __init__(self, pool: Pool, path: PathState, origin: Origin,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.pool, self.path, self.origin = pool, path, origin
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
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=HEAD_LIMIT)
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

    async def head(self, method: str) -> Head:
        """The final head (past any 1xx) of the answer whose turn it is, to a `method` request.
        h11 reads one answer at a time, and the proxy pipelines: the request is told to h11's
        state only now, at its turn (its bytes went out when it was sent); h11 holds the bytes
        of the answers after it until then."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        if self.h11.our_state is not h11.IDLE:  # the last answer ended the connection
            raise ConnectionError("the server closed the connection before answering")
        self.h11.send(h11.Request(method=method, target="/",
                                  headers=[("Host", self.origin.authority)]))
        self.h11.send(h11.EndOfMessage())
        while True:
            event = await self._next()
            if isinstance(event, h11.Response):
                return Head.of(event)

    async def body(self, length: int | None = None) -> AsyncIterator[bytes]:
        """The body of the answer whose head was read last, as it arrives. With its `length`,
        the reader wakes only once LOW_WATER_BYTES (or what is left of it) have arrived."""
        left = length
        try:
            while True:
                if left is not None:
                    self.low_water(max(1, min(left, LOW_WATER_BYTES)))
                event = await self._next(min(left, READ_CHUNK) if left else READ_CHUNK)
                if isinstance(event, h11.EndOfMessage):
                    return
                if isinstance(event, h11.Data):
                    if left is not None:
                        left -= len(event.data)
                    yield bytes(event.data)
        finally:
            if length is not None:
                self.low_water(1)  # the next head is read as soon as its first byte is in

    def must_close(self) -> bool:
        """The last answer ends the connection (it said so, or only its end ends its body)."""
        return self.h11.their_state is not h11.DONE

    async def _next(self, size: int = READ_CHUNK) -> object:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.reader.read(size))
                continue
            if isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the server closed the connection before answering")
            return event

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
        self.pool.forget(self)

    async def _read_loop(self) -> None:
        try:
            while True:
                while not self.queue:
                    if self.closed:
                        return
                    if self.pool_when_idle:
                        self.pool_when_idle = False
                        self.pool.give_back(self)
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
                TimeoutError, ssl.SSLError, h11.ProtocolError) as exc:
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
