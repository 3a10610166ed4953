"""How the multipath HTTP proxy (mpstream/transports/mphttp/) splits one object over its paths,
as pure functions of what it has measured, so that each decision can be tested on hand-worked
figures.

A path is described by what a new byte range asked of it would cost (`PathEstimate`): when its
first byte would arrive (`start_s`: the request's round trip on an idle connection, or the time
to drain what the path already carries when the request queues behind it) and then how fast it
arrives (`rate`). Ranges are sized so that every path's part ends at the same moment (MP-H2,
MSPlayer): the object is complete when its last part is, so a part that ends later than the
others is time the fast paths stand idle.

A part already running can lag (its path slowed or failed); a path that has finished its own
share then asks for the lagging part's remainder too, when it would deliver it sooner
(`should_rerequest`): whichever copy arrives first is used, the other is redundant traffic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

# A part smaller than this is not worth a request of its own: its head costs a few hundred bytes
# each way, and a smaller part's share is within the noise of the rates it was sized from. (The
# round trip a request waits is in each path's estimate already.)
MIN_PART = 8 * 1024
# What the first request of an object of unknown size asks for: its head. An object no larger
# arrives in one request on one path; a larger one is split once its size is known.
MIN_FIRST_CHUNK = 64 * 1024
# What a path that has not been measured yet is given of an object: enough for a rate sample,
# little enough that a slow path does not hold the object up (a share sized from the others'
# rate could be several times what it carries in the time).
PROBE_PART = 64 * 1024
# An object whose outstanding bytes would all arrive within this time is split in one go, so that
# its parts end together; a larger one is handed out in chunks of CHUNK_S of each path's rate to
# the paths that are about to run dry, and split in one go once what is left fits the horizon.
# Chunks keep a wrong estimate (a path that slowed, an unmeasured one) from holding the object up
# for long: what was not asked for yet goes to whichever path is free.
HORIZON_S = 0.3
CHUNK_S = 0.2
# A path runs dry when what it has left to deliver lasts no longer than this many of its round
# trips (its next request, pipelined, reaches the server half a round trip after it is sent).
REFILL_RTTS = 1.5
REFILL_MIN_S = 0.02  # and than the proxy's tick, at which it looks
# A lagging part's remainder is asked of another path only when that saves at least this
# much time (a copy costs bytes on the free path and, when it wins, a connection).
MIN_GAIN_S = 0.005
MIN_GAIN_SHARE = 0.1
# A part that has delivered nothing for this many of its path's round trips (at least
# SUSPECT_MIN_S) is treated as stalled: any free path is faster.
SUSPECT_RTTS = 4.0
SUSPECT_MIN_S = 0.25


@dataclass(frozen=True)
class PathEstimate:
    """What a new range on path `index` would cost: first byte after `start_s` seconds (its
    round trip, or the backlog already queued on it if that is longer), then `rate` bytes/s."""

    index: int
    rate: float
    start_s: float
    # Its round trip alone (start_s less what it waits for its backlog); start_s when not given.
    latency_s: float | None = None

    @property
    def backlog_s(self) -> float:
        """How long what the path already has to deliver keeps it busy."""
        return max(0.0, self.start_s - (self.start_s if self.latency_s is None
                                        else self.latency_s))

    def finish_s(self, nbytes: float) -> float:
        """When `nbytes` asked of this path now would all have arrived."""
        return self.start_s + nbytes / max(self.rate, 1.0)


@dataclass(frozen=True)
class RangePart:
    """Bytes [start, end) of the object, asked of path `path`."""

    path: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def path_estimate(index: int, rate: float, latency_s: float, backlog_bytes: int = 0
                  ) -> PathEstimate:
    """A path's estimate from its measured rate (bytes/s), its request round trip and the bytes
    it already has to deliver: a request queued behind a backlog (pipelined on a busy
    connection, or sharing the path with other downloads) waits for that to drain, an idle
    path's waits for the round trip."""
    rate = max(rate, 1.0)
    return PathEstimate(index, rate, max(latency_s, backlog_bytes / rate), latency_s)


def finish_time(size: int, paths: Sequence[PathEstimate]) -> float:
    """When `size` bytes split over `paths` by `finish_together` would all have arrived."""
    shares = finish_together(size, paths)
    return max((p.finish_s(shares[p.index]) for p in paths if p.index in shares),
               default=math.inf)


def finish_together(size: int, paths: Sequence[PathEstimate]) -> dict[int, float]:
    """Bytes per path (by index) so that all parts of `size` bytes end at the same time T.

    Path i delivers rate_i * (T - start_i) bytes by T, so T = (size + sum rate_i start_i) /
    sum rate_i over the paths that start before T; a path that would only start after T gets
    nothing (water-filling: paths are added in order of their start while they start before the
    T of those already chosen)."""
    chosen: list[PathEstimate] = []
    finish = math.inf
    for p in sorted(paths, key=lambda p: (p.start_s, -p.rate, p.index)):
        if chosen and p.start_s >= finish:
            break
        chosen.append(p)
        total_rate = sum(max(q.rate, 1.0) for q in chosen)
        finish = (size + sum(max(q.rate, 1.0) * q.start_s for q in chosen)) / total_rate
    return {p.index: max(p.rate, 1.0) * (finish - p.start_s) for p in chosen}


def split_range(start: int, end: int, paths: Sequence[PathEstimate],
                min_part: int = MIN_PART) -> list[RangePart]:
    """Bytes [start, end) as consecutive parts, one per useful path, sized to finish together;
    the path whose bytes would arrive first carries the head (the proxy streams the object in
    order). A path whose part would be smaller than `min_part` is left out (its part would
    cost a request for little), unless it is the only one."""
    size = end - start
    if size <= 0 or not paths:
        return []
    chosen = list(paths)
    while True:
        shares = finish_together(size, chosen)
        small = [p for p in chosen if shares.get(p.index, 0.0) < min_part]
        if not small or len(chosen) == 1:
            break
        # Leave out the path with the least to carry, and size the rest again without it.
        chosen.remove(min(chosen, key=lambda p: (shares.get(p.index, 0.0), -p.rate)))
    order = sorted((p for p in chosen if shares.get(p.index, 0.0) > 0),
                   key=lambda p: (p.start_s, -p.rate, p.index))
    sizes = [round(shares[p.index]) for p in order]
    sizes[0] += size - sum(sizes)  # what rounding left over (or took) is the head's
    parts, at = [], start
    for p, n in zip(order, sizes, strict=True):
        if n > 0:
            parts.append(RangePart(p.index, at, at + n))
            at += n
    return parts


def even_split(start: int, end: int, paths: Sequence[PathEstimate],
               min_part: int = MIN_PART) -> list[RangePart]:
    """Bytes [start, end) in equal parts over the paths, ignoring what they measured (the
    `even` scheduler: the baseline that shows what sizing by rate is worth); no part smaller
    than `min_part`."""
    size = end - start
    if size <= 0 or not paths:
        return []
    order = sorted(paths, key=lambda p: (p.start_s, -p.rate, p.index))
    count = max(1, min(len(order), size // max(min_part, 1)))
    order = order[:count]
    base, extra = divmod(size, count)
    parts, at = [], start
    for i, p in enumerate(order):
        n = base + (1 if i < extra else 0)
        parts.append(RangePart(p.index, at, at + n))
        at += n
    return parts


def split_with_probes(start: int, end: int, paths: Sequence[PathEstimate],
                      measured: Collection[int], busy: Collection[int] = (),
                      probe: int = PROBE_PART, min_part: int = MIN_PART) -> list[RangePart]:
    """Bytes [start, end) over paths of which only those in `measured` have a rate: each
    unmeasured path that is not `busy` (its probe under way) gets a probe of `probe` bytes
    from the end of the range, and the measured paths split the rest so that their parts end
    together (`split_range`). Without a measured path the probes are all that is planned: the
    rest waits for the first of them to measure its path."""
    unmeasured = sorted((p for p in paths if p.index not in measured),
                        key=lambda p: (p.start_s, p.index))
    known = [p for p in paths if p.index in measured]
    probes, at = [], end
    for p in unmeasured:
        n = min(probe, at - start)
        if p.index in busy or n <= 0:
            continue
        probes.append(RangePart(p.index, at - n, at))
        at -= n
    rest = split_range(start, at, known, min_part) if known else []
    return rest + probes[::-1]


def _take(gaps: list[tuple[int, int]], nbytes: int) -> tuple[list[tuple[int, int]],
                                                            list[tuple[int, int]]]:
    """The first `nbytes` of `gaps` (in order, across gaps), and what is left of them."""
    taken, left, want = [], [], nbytes
    for a, b in gaps:
        n = min(want, b - a)
        if n > 0:
            taken.append((a, a + n))
            want -= n
        if a + n < b:
            left.append((a + n, b))
    return taken, left


def plan_round(gaps: Sequence[tuple[int, int]], paths: Sequence[PathEstimate],
               measured: Collection[int], busy: Collection[int] = (),
               horizon_s: float = HORIZON_S, chunk_s: float = CHUNK_S,
               probe: int = PROBE_PART, min_part: int = MIN_PART) -> list[RangePart]:
    """Which of the bytes in `gaps` (what no part asks for yet, in order) to ask of which path
    now. When the measured paths would deliver all of them within `horizon_s`, all: the gaps,
    taken as one run of bytes, are split by `split_with_probes` so that the parts end
    together. Otherwise each path about to run dry (REFILL_RTTS) gets the next `chunk_s` of
    its rate from the front, and one not measured yet and not `busy` a probe; the rest waits
    for the next round."""
    gaps = [(a, b) for a, b in gaps if b > a]
    total = sum(b - a for a, b in gaps)
    if total <= 0 or not paths:
        return []
    known = [p for p in paths if p.index in measured]
    if known and finish_time(total, known) <= horizon_s:
        virtual = split_with_probes(0, total, paths, measured, busy, probe, min_part)
        out = []
        left = list(gaps)
        for part in virtual:  # each virtual part, laid over the gaps in order
            taken, left = _take(left, part.size)
            out += [RangePart(part.path, a, b) for a, b in taken]
        return out
    out, left = [], list(gaps)
    for p in sorted(paths, key=lambda p: (p.start_s, -p.rate, p.index)):
        if p.index not in measured:
            if p.index in busy:
                continue
            nbytes = probe
        else:
            latency = p.start_s if p.latency_s is None else p.latency_s
            if p.backlog_s > max(REFILL_RTTS * latency, REFILL_MIN_S):
                continue  # it has enough to do until the next round
            nbytes = max(min_part, int(p.rate * chunk_s))
        taken, left = _take(left, nbytes)
        out += [RangePart(p.index, a, b) for a, b in taken]
        if not left:
            break
    return out


def first_chunk(best: PathEstimate, latency_s: float) -> int:
    """How many bytes the first request of an object of unknown size asks of the best path:
    enough to keep that path busy for two of its round trips (its response reveals the size
    after one, and the request for the rest, pipelined behind it, reaches the server half a
    round trip later), and at least MIN_FIRST_CHUNK."""
    return max(MIN_FIRST_CHUNK, int(best.rate * 2 * latency_s))


def stalled(silent_s: float, latency_s: float) -> bool:
    """A part that has received nothing for `silent_s` is stalled: longer than SUSPECT_RTTS
    round trips of its path, and than SUSPECT_MIN_S (a queue of a slow path, or slow start's
    rounds, keep a healthy part silent for a few round trips)."""
    return silent_s > max(SUSPECT_MIN_S, SUSPECT_RTTS * latency_s)


def lagging_eta(remaining: int, rate: float, silent_s: float, latency_s: float,
                wait_s: float = 0.0) -> float:
    """When a running part would end: its `remaining` bytes at `rate` bytes/s after `wait_s`
    (what it still waits for its first byte, or for the parts ahead of it on its connection);
    never, when it has been silent too long (`stalled`)."""
    if stalled(silent_s, latency_s):
        return math.inf
    return wait_s + remaining / max(rate, 1.0)


def should_rerequest(remaining: int, lag_eta_s: float, free: PathEstimate) -> bool:
    """Whether the free path should also ask for a lagging part's `remaining` bytes: it would
    deliver them sooner than the part is expected to (`lag_eta_s`, see `lagging_eta`), by at
    least MIN_GAIN_S and MIN_GAIN_SHARE of the time. The copy costs the free path's bytes, so a
    gain within the noise of the estimates is not worth it."""
    if remaining <= 0:
        return False
    free_s = free.finish_s(remaining)
    return free_s + max(MIN_GAIN_S, MIN_GAIN_SHARE * min(lag_eta_s, free_s)) < lag_eta_s


def worth_draining(remaining: int, rate: float, latency_s: float) -> bool:
    """Whether a cancelled part's connection is better read to the end of its response than
    closed: its `remaining` bytes take the path no longer than two round trips, about what a new
    connection costs (its handshake, then slow start's first windows)."""
    return remaining / max(rate, 1.0) <= 2 * latency_s


_LAST_NUMBER = re.compile(r"\d+(?=\D*$)")


def size_key(path: str) -> str:
    """What objects of about the same size share: the URL path with the last number of its
    file name (not of its extension, as in .m4s) made a wildcard: seg_00017.m4s and
    seg_00018.m4s of one representation, chunk-1-17.m4s and chunk-1-18.m4s."""
    folder, slash, name = path.rpartition("/")
    stem, dot, ext = name.rpartition(".") if "." in name else (name, "", "")
    return folder + slash + _LAST_NUMBER.sub("#", stem, count=1) + dot + ext


def guessed_split(guess: int, paths: Sequence[PathEstimate], min_part: int = MIN_PART
                  ) -> tuple[RangePart, tuple[int, int] | None]:
    """The first two requests of an object whose size is only guessed (from objects like it):
    its head on the path that starts first, and its tail as a suffix (`bytes=-N`, which needs
    no size) on the path that would end the split, so that two paths start at once instead of
    the second waiting a round trip for the size. Sized as `split_range` sizes `guess` bytes;
    the middle (the parts of further paths, and what the guess fell short of) is asked once a
    response tells the size. Returns the head and (path, suffix length), or None for the tail
    when one path is enough."""
    parts = split_range(0, guess, paths, min_part)
    head = parts[0]
    if len(parts) < 2:
        return head, None
    return head, (parts[-1].path, parts[-1].size)


@dataclass
class Ewma:
    """An exponentially weighted moving average; None until the first sample."""

    alpha: float
    value: float | None = None

    def update(self, sample: float) -> float:
        self.value = sample if self.value is None else (
            self.alpha * sample + (1 - self.alpha) * self.value)
        return self.value


class WindowedMin:
    """The least sample of the last `window_s` seconds (None before the first): a path's round
    trip when it is idle. An average would count the queue the proxy's own parts build on the
    path, which the planner already counts as their backlog."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.samples: list[tuple[float, float]] = []  # (time, sample), oldest first

    def update(self, sample: float, t: float) -> float:
        self.samples = [(ts, v) for ts, v in self.samples if ts > t - self.window_s]
        # A sample no smaller than a later one can never be the least again: drop it.
        while self.samples and self.samples[-1][1] >= sample:
            self.samples.pop()
        self.samples.append((t, sample))
        return self.samples[0][1]

    @property
    def value(self) -> float | None:
        return self.samples[0][1] if self.samples else None


class IntervalSet:
    """Disjoint half-open byte intervals: which bytes of an object have arrived (a byte that
    arrives twice, from a part and its re-requested copy, counts once)."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []

    def add(self, start: int, end: int) -> int:
        """Adds [start, end); how many of its bytes were not in the set."""
        if end <= start:
            return 0
        new = end - start
        merged: list[tuple[int, int]] = []
        lo, hi = start, end
        for a, b in self.spans:
            if b < lo or a > hi:
                merged.append((a, b))
                continue
            new -= max(0, min(b, end) - max(a, start))
            lo, hi = min(lo, a), max(hi, b)
        merged.append((lo, hi))
        self.spans = sorted(merged)
        return new

    def missing(self, start: int, end: int) -> list[tuple[int, int]]:
        """The gaps of [start, end) that the set does not cover."""
        gaps, at = [], start
        for a, b in self.spans:
            if b <= at:
                continue
            if a >= end:
                break
            if a > at:
                gaps.append((at, min(a, end)))
            at = max(at, b)
        if at < end:
            gaps.append((at, end))
        return gaps

    def covered(self) -> int:
        return sum(b - a for a, b in self.spans)
