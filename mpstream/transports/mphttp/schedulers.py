"""mphttp's schedulers: how a download's bytes are spread over the paths, one small object each,
registered by name (the proxy's `--scheduler`, `mpstream play --scheduler`). A scheduler
decides; the download (fetch.py) asks it and carries its decisions out. Adding one is a subclass
here and a `register` call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from mpstream.registry import Registry
from mpstream.transports.mphttp.part import Part
from mpstream.transports.mphttp.rangeplan import (
    PathEstimate,
    RangePart,
    even_split,
    guessed_split,
    plan_round,
    should_rerequest,
)


class Scheduler:
    """One way of spreading a download over the paths: `name` and `summary` (what
    `mpstream list schedulers` says)."""

    name: ClassVar[str]
    summary: ClassVar[str]

    def opening(self, size_guess: int | None, paths: Sequence[PathEstimate]
                ) -> tuple[RangePart, tuple[int, int] | None] | None:
        """The first requests of an object whose size is guessed to be `size_guess` (None: not
        guessed): a range of its head and, maybe, its tail asked as a suffix (path, bytes);
        None: the download's own first request, a first chunk on the path that would deliver
        it soonest."""
        return None

    def split(self, gaps: Sequence[tuple[int, int]], paths: Sequence[PathEstimate],
              measured: set[int], busy: set[int]) -> list[RangePart]:
        """Parts for what of the object no part asks for yet (`gaps`), on the live `paths`, of
        which `measured` have shown a rate and `busy` carry a live part of this download."""
        raise NotImplementedError

    def copy_lagging(self, lagging: Sequence[Part], free: Sequence[PathEstimate],
                     eta: Callable[[Part], float]) -> tuple[Part, PathEstimate] | None:
        """A lagging part whose remainder a path with nothing left to do (`free`) asks for
        too, and that path; None: no copy (`eta`: when a running part is expected to end)."""
        return None


class FinishTogether(Scheduler):
    name = "finish-together"
    summary = ("ranges sized from each path's measured rate and round trip so that the parts "
               "end together (a large object in chunks to the paths about to run dry); a path "
               "that is done re-requests a lagging part's remainder when it would deliver it "
               "sooner")

    def opening(self, size_guess: int | None, paths: Sequence[PathEstimate]
                ) -> tuple[RangePart, tuple[int, int] | None] | None:
        # An object like ones fetched before (segment 17 after 16): its head, and its tail at
        # once on the path that would end a split last.
        return None if size_guess is None else guessed_split(size_guess, paths)

    def split(self, gaps: Sequence[tuple[int, int]], paths: Sequence[PathEstimate],
              measured: set[int], busy: set[int]) -> list[RangePart]:
        return plan_round(gaps, paths, measured, busy)

    def copy_lagging(self, lagging: Sequence[Part], free: Sequence[PathEstimate],
                     eta: Callable[[Part], float]) -> tuple[Part, PathEstimate] | None:
        """The part that would end last, when the free path that would deliver its remainder
        soonest beats it (rangeplan.should_rerequest)."""
        if not free or not lagging:
            return None
        etas = {id(p): eta(p) for p in lagging}
        lag = max(lagging, key=lambda p: etas[id(p)])
        best = min(free, key=lambda e: e.finish_s(lag.remaining()))
        return (lag, best) if should_rerequest(lag.remaining(), etas[id(lag)], best) else None


class Even(Scheduler):
    name = "even"
    summary = ("equal ranges on every path whatever they measured, no re-request of a lagging "
               "part (a failed one is still asked again): the baseline that shows what the "
               "sizing is worth")

    def split(self, gaps: Sequence[tuple[int, int]], paths: Sequence[PathEstimate],
              measured: set[int], busy: set[int]) -> list[RangePart]:
        return [piece for a, b in gaps for piece in even_split(a, b, paths)]


SCHEDULERS: Registry[Scheduler] = Registry.of_module("scheduler", lambda s: s.name)
register = SCHEDULERS.register


register(FinishTogether())
register(Even())
DEFAULT_SCHEDULER = FinishTogether.name


def summaries() -> dict[str, str]:
    """What each scheduler does, by name, the default first."""
    return {s.name: s.summary for s in SCHEDULERS.values()}
