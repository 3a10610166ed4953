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

import asyncio
import contextlib
import json
import socket
import ssl
import time
from collections import deque
from collections.abc import Collection
from typing import Any, TextIO
from urllib.parse import urlsplit

from mpstream.transports.mphttp.clock import now, unix
from mpstream.transports.mphttp.connection import PRIOR_LATENCY_S, Conn, PathState
from mpstream.transports.mphttp.errors import PartFailed, describe_error
from mpstream.transports.mphttp.messages import HEAD_LIMIT, Origin
from mpstream.transports.mphttp.rangeplan import MIN_PART, PathEstimate, path_estimate, size_key

CONNECT_TIMEOUT_S = 1.0
PROBE_INTERVAL_S = 0.5
# What a path is assumed to do before it has been measured: the mean of the measured paths, or
# these when none is.
PRIOR_RATE = 1_000_000.0  # bytes/s
# Objects fetched before, by size_key, for guessing a new one's size (a few, the least counts:
# a guess too large asks for bytes twice).
SIZE_MEMORY = 3
GUESS_SHARE = 0.8
WATCHDOG_S = 0.1  # how often silent connections are looked for
LAG_PROBE_S = 0.02  # how often the event loop's lateness is sampled


class Proxy:
    """The client paths and their connections to the origins, shared by every download: the
    live paths as the planner sees them, idle and spare connections, the sizes of objects
    fetched before, and the statistics (`stats`, JSON lines)."""

    def __init__(self, paths: list[PathState], upstream: Origin | None,
                 stats: TextIO | None = None, stall_timeout_s: float = 2.0,
                 no_path_timeout_s: float = 20.0, stats_interval_s: float = 0.1) -> None:
        self.paths, self.upstream, self.stats = paths, upstream, stats
        self.stall_timeout_s, self.no_path_timeout_s = stall_timeout_s, no_path_timeout_s
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

    def estimates(self, origin: Origin | None = None, held: Collection[int] = ()
                  ) -> list[PathEstimate]:
        """The live paths as the planner sees them (for a download from `origin`, by default
        the upstream, that holds a connection on the paths `held`): a suspect path only when no
        other is up, a backup path only when no other path is."""
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
        origin = origin or self.upstream
        out = []
        for p in chosen:
            latency = p.latency.value or prior_lat
            if p.index not in held and not self.has_idle(p, origin):
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

    def paths_answer(self) -> dict[str, Any]:
        """Each path as the proxy sees it now, in the shape of the collector's per-path figures
        (GET /api/v1/sessions/ID/paths, server/seen.py), for the page's multipath-aware rule:
        with this transport the server sees the proxy's connections, one a path, but only the
        proxy knows they are one session's paths. `delivery_bps` is the rate its parts got
        lately, `bytes_acked` its body bytes received, `backup` whether it is held back now (a
        backup path while another is up), `waiting_ms` how long its part whose turn it is has
        waited for bytes. A path that is down is left out, as the server leaves out a path
        with no subflow."""
        t = now()
        other_up = any(p.up and not p.backup for p in self.paths)
        return {"measured": True, "label": "mphttp", "paths": [
            {"address": p.local, "subflows": sum(1 for c in self.conns if c.path is p),
             "delivery_bps": None if p.rate.value is None else round(8 * p.rate.value),
             "app_limited": False,
             "rtt_ms": None if p.latency.value is None else round(1000 * p.latency.value, 2),
             "bytes_acked": p.rx_bytes, "backup": p.backup and other_up,
             "waiting_ms": round(1000 * p.waiting(t))}
            for p in self.paths if p.up]}

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
