"""One GET of a whole object, as ranges over the paths, streamed to the browser in order."""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

from mpstream.transports.mphttp.answer import Answer, Relay
from mpstream.transports.mphttp.browser import Browser
from mpstream.transports.mphttp.clock import now, unix
from mpstream.transports.mphttp.connection import PRIOR_LATENCY_S, Conn, PathState
from mpstream.transports.mphttp.errors import PartFailed, ProxyError
from mpstream.transports.mphttp.messages import (
    CONDITIONAL,
    HOP_BY_HOP,
    Head,
    Origin,
    parse_content_range,
    request_bytes,
)
from mpstream.transports.mphttp.part import RATE_SAMPLE_MIN_BYTES, Part
from mpstream.transports.mphttp.proxy import Proxy
from mpstream.transports.mphttp.rangeplan import (
    MIN_FIRST_CHUNK,
    IntervalSet,
    PathEstimate,
    first_chunk,
    lagging_eta,
    worth_draining,
)
from mpstream.transports.mphttp.relay import passthrough
from mpstream.transports.mphttp.schedulers import Scheduler

TICK_S = 0.02  # how often a download re-checks its paths when nothing else happens
MAX_PART_FAILURES = 12  # one download gives up after this many failed parts
TAIL_SHARE = 0.1  # the tail of a download: its last 10% of bytes, by arrival


class Fetch:
    """One GET of a whole object, as ranges over the paths that `scheduler` spreads it on,
    streamed to the browser in order (`answer`)."""

    def __init__(self, proxy: Proxy, scheduler: Scheduler, request: Head, target: str,
                 origin: Origin, browser: Browser) -> None:
        self.proxy, self.scheduler = proxy, scheduler
        self.request, self.target, self.origin = request, target, origin
        self.answer = Answer(browser)
        self.size: int | None = None
        self.validator: tuple[str | None, str | None] | None = None
        self.parts: list[Part] = []
        self.have = IntervalSet()  # the bytes that have arrived
        self.conns: dict[int, Conn | asyncio.Task[Conn]] = {}  # one per path
        self.progress = asyncio.Event()
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
        return self.proxy.estimates(self.origin, self.conns.keys())

    def start(self) -> None:
        """The first request (and, for an object like ones fetched before, the second)."""
        est = self.estimates()
        if not est:
            return
        conditional = any(k.lower() in CONDITIONAL for k, _ in self.request.headers)
        guess = None if conditional else self.proxy.size_guess(self.target)
        opening = self.scheduler.opening(guess, est)
        if opening is not None:
            head, tail = opening
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
        conn.send(part, request_bytes("GET", self.target, headers))

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
        return covered.missing(self.answer.pos, self.size)

    def plan_gaps(self, gaps: list[tuple[int, int]]) -> None:
        measured = {p.index for p in self.proxy.paths if p.rate.value}
        busy = {p.path.index for p in self.live_parts()}
        for piece in self.scheduler.split(gaps, self.estimates(), measured, busy):
            self.add_part(self.proxy.path(piece.path), piece.start, piece.end)

    def rerequest(self) -> None:
        """A path with nothing left to do for this download also asks for the remainder of a
        lagging part, when the scheduler says so."""
        busy = {p.path.index for p in self.live_parts()}
        free = [e for e in self.estimates() if e.index not in busy]
        lagging = [p for p in self.live_parts() if p.state == "sent" and not p.copied
                   and p.start is not None and p.end is not None and p.remaining() > 0]
        t = now()
        copy = self.scheduler.copy_lagging(lagging, free, lambda p: self.eta(p, t))
        if copy is not None:
            lag, best = copy
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
        head = await conn.head("GET")
        part.head_seen = True
        self.on_head(part, head.status, head)
        relayed = part.mode == "relay"
        if not relayed and not head.framed("GET"):
            raise ConnectionError("a body without Content-Length or chunked framing")
        length = head.get("content-length")
        async for data in conn.body(int(length) if not relayed and length and length.isdigit()
                                    else None):
            conn.path.rx_bytes += len(data)
            self.on_data(part, data)
        if relayed:
            assert self.answer.relay is not None
            self.answer.relay.done = True
        if part.mode == "reject":
            raise PartFailed(f"path {part.path.index}: {part.reason}", path_fault=False)
        if conn.must_close():
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
        first_answer = (self.size is None and not self.answer.head_sent
                        and self.answer.relay is None)
        if status == 416 and first_answer and part.suffix is None:
            # An empty object has no range to give: ask for it as the browser did.
            self.fallback = True
            part.mode = "discard"
            return
        if first_answer:
            # The origin does not serve ranges here (200), or answers the request itself
            # (304, 404, ...): that answer goes to the browser as it is.
            part.mode = "relay"
            self.answer.relay, self.answer.head = Relay(part), head
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
            self.size, self.validator, self.answer.head = total, validator, head
            for p in self.parts:  # where the suffix requests start is known now
                if p.start is None and p.suffix is not None:
                    n = min(p.suffix, total)
                    p.start, p.end, p.buf_start = total - n, total, total - n
            self.answer.send_head(self.size)
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
            assert self.answer.relay is not None
            part.received += len(data)
            part.useful += len(data)
            self.answer.relay.chunks.append(data)
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
        if self.answer.gone():
            self.progress.set()
            return
        if self.answer.write_through(at, data):
            # Not waking the download, which happens for each few segments that arrive.
            if (self.size is not None and self.answer.pos >= self.size) or \
                    any(p.buf for p in self.parts):
                self.progress.set()  # complete, or buffered bytes may follow on now
            return
        if part.live() and not part.draining and end > self.answer.pos:
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
        if self.answer.relay is not None and self.answer.relay.part is part:
            self.error = f"the answer broke off on path {part.path.index}: {exc}"

    async def deliver(self) -> None:
        """Sends the browser what has arrived in order since the last call."""
        if self.answer.relay is not None:
            await self.answer.deliver_relay()
        elif self.size is not None:
            await self.answer.deliver(self.parts, self.size)

    # -- the whole download ------------------------------------------------------------------

    async def run(self) -> None:
        """Serves the download."""
        self.start()
        try:
            while True:
                # A timer rather than wait_for: that makes a task per wake-up, and a download
                # wakes for every few segments that arrive.
                tick = asyncio.get_running_loop().call_later(TICK_S, self.progress.set)
                await self.progress.wait()
                tick.cancel()
                self.progress.clear()
                if self.fallback and not self.answer.head_sent:
                    self.finish()
                    await passthrough(self.proxy, self.request, b"", self.target, self.origin,
                                      self.answer.browser)
                    return
                if self.error is not None:
                    raise ProxyError(self.error)
                await self.deliver()
                if self.answer.complete():
                    break
                # Decisions follow a part's head, end or failure at once, and otherwise a tick:
                # not every chunk that arrives (a few KB each) needs the whole plan revisited.
                t = now()
                if self.answer.relay is None and (self.changed or t - self.steered >= TICK_S):
                    self.changed, self.steered = False, t
                    self.steer()
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
        if self.fallback and not self.answer.head_sent:
            return  # the pass-through that serves it instead writes its record
        if self.size is not None and self.answer.relay is None and self.answer.pos >= self.size:
            self.proxy.remember_size(self.target, self.size)
        self.proxy.record(self.summary())

    def summary(self) -> dict[str, Any]:
        n = 1 + max(p.index for p in self.proxy.paths)
        received = [0] * n
        for p in self.parts:
            received[p.path.index] += p.received
        per_path, tail = path_shares(self.arrivals, n)
        head, relayed = self.answer.head, self.answer.relay is not None
        t = now()
        return {"event": "request", "t": unix(t), "url": self.target, "origin": str(self.origin),
                "method": "GET", "mode": "relay" if relayed else "split",
                "status": head.status if relayed and head is not None else 200,
                "size": self.size, "delivered": self.answer.pos,
                "complete": self.answer.complete(), "t_request": unix(self.t_request),
                "t_first_byte": None if self.t_first_byte is None else unix(self.t_first_byte),
                "t_done": unix(t), "path_bytes": per_path, "received_bytes": received,
                "redundant_bytes": max(0, sum(received) - sum(per_path)),
                "tail_path_bytes": tail, "parts": [p.record() for p in self.parts],
                **({"error": self.error} if self.error else {})}


def path_shares(arrivals: list[tuple[float, int, int]], n: int) -> tuple[list[int], list[int]]:
    """The useful bytes each of `n` paths brought, in all and in the tail (the last 10% of the
    bytes to arrive), from a download's arrivals (time, path, useful bytes)."""
    per_path = [0] * n
    for _t, path, useful in arrivals:
        per_path[path] += useful
    tail, want = [0] * n, math.ceil(TAIL_SHARE * sum(per_path))
    for _t, path, useful in sorted(arrivals, reverse=True):
        if want <= 0:
            break
        tail[path] += min(useful, want)
        want -= min(useful, want)
    return per_path, tail
