"""Does a figure measured again agree with the published one? Decided as the trials come in.

Each figure has a band, the published value and a tolerance either side (written in the
headline set, docs/data/headline.toml, with the reason for its width). After every round the
figure's anytime-valid 95% interval is read (mpstream.qoe.stats.anytime_summary: it holds its
coverage at every number of trials at once, so looking after each round costs nothing):

- *agrees* once the interval lies inside the band: the new value is within the tolerance of
  the published one, whatever more trials would show;
- *disagrees* once it lies wholly outside the band;
- *undecided* while neither holds; at the cap it stays so.

A ratio of two conditions (MPTCP's startup over TCP's) is decided within the new run: its
interval is one confidence sequence over the two conditions' trials paired in the order they ran
(runner/until.py's `ratio_interval`), never from another day's absolute figure. A condition
stops taking trials once every figure it carries (as the condition, or as a ratio's base) is
decided, or at the cap."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from mpstream.runner.until import FLOOR, ConditionState, StopReason, interval, ratio_interval

Decision = Literal["agrees", "disagrees", "undecided"]


@dataclass(frozen=True)
class Band:
    """Where a new value agrees with the published one."""

    low: float
    high: float

    @classmethod
    def around(cls, published: float, tolerance: float, absolute: bool) -> Band:
        """`tolerance` of the published value either side (or, `absolute`, in its unit)."""
        half = tolerance if absolute else tolerance * abs(published)
        return cls(published - half, published + half)


def decide(low: float, high: float, band: Band) -> Decision:
    """The interval [low, high] against the band (an infinite interval decides nothing)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "undecided"
    if band.low <= low and high <= band.high:
        return "agrees"
    if high < band.low or low > band.high:
        return "disagrees"
    return "undecided"


@dataclass(frozen=True)
class FigureCheck:
    """One published figure: the condition's metric (its mean, or `ratio:BASE` its mean over
    BASE's, both of the new run) and the band it must fall in."""

    condition: str
    metric: str
    what: str
    band: Band

    @property
    def base(self) -> str | None:
        return self.what.split(":", 1)[1] if self.what.startswith("ratio:") else None

    @property
    def carriers(self) -> tuple[str, ...]:
        """The conditions whose trials decide it."""
        return (self.condition,) + ((self.base,) if self.base else ())

    def interval(self, values: dict[str, dict[str, list[float]]]) -> tuple[float, float, float]:
        """(mean, low, high) of the new run's figure; NaN mean while it has no trial."""
        got = values.get(self.condition, {}).get(self.metric, [])
        if self.base is None:
            s = interval(got)
            return s.mean, s.ci_low, s.ci_high
        base = values.get(self.base, {}).get(self.metric, [])
        mean = (sum(got) / len(got)) / (sum(base) / len(base)) if got and base and sum(base) \
            else math.nan
        low, high = ratio_interval(got, base)
        return mean, low, high


@dataclass(frozen=True)
class Verdict:
    """A figure's state after the trials so far."""

    check: FigureCheck
    mean: float
    low: float
    high: float
    decision: Decision
    trials: int  # of the figure's condition


@dataclass(frozen=True)
class Agreement:
    """The stopping rule of a reproduction: each condition takes trials until every figure it
    carries is decided, at least `floor` and at most `max_trials`."""

    checks: tuple[FigureCheck, ...]
    max_trials: int
    floor: int = FLOOR

    @property
    def metrics(self) -> set[str]:
        return {c.metric for c in self.checks}

    def verdicts(self, values: dict[str, dict[str, list[float]]], taken: dict[str, int]
                 ) -> list[Verdict]:
        out = []
        for check in self.checks:
            mean, low, high = check.interval(values)
            n = min(taken.get(c, 0) for c in check.carriers)
            decision = decide(low, high, check.band) if n >= self.floor else "undecided"
            out.append(Verdict(check, mean, low, high, decision, taken.get(check.condition, 0)))
        return out

    def states(self, rows: Iterable[tuple[str, str, dict[str, float] | None]],
               labels: Iterable[str]) -> dict[str, ConditionState]:
        """Each condition's state from its finished trials, given as (condition, its group as
        a summary names it, the trial's figures or None when it failed): it stops once each
        figure its groups carry is decided."""
        rows = list(rows)
        values, taken = collect((group, row) for _, group, row in rows)
        open_: set[str] = set()
        for v in self.verdicts(values, taken):
            if v.decision == "undecided":
                open_.update(carrier.split("/")[0] for carrier in v.check.carriers)
        # A condition played by each player is a group a player: its trials are rounds.
        per_label = dict.fromkeys(labels, 0)
        for group, n in taken.items():
            label = group.split("/")[0]
            per_label[label] = max(per_label.get(label, 0), n)
        out = {}
        for label, n in per_label.items():
            reason: StopReason | None = None
            if n >= self.max_trials:
                reason = "cap"
            elif label not in open_ and n >= self.floor:
                reason = "sure"
            out[label] = ConditionState(label, n, math.nan, math.nan, reason)
        return out

    def text(self) -> str:
        return f"agreement with {len(self.checks)} published figure(s)"

    def as_json(self) -> dict[str, Any]:
        return {"max_trials": self.max_trials, "floor": self.floor,
                "checks": [{"condition": c.condition, "metric": c.metric, "what": c.what,
                            "band": [c.band.low, c.band.high]} for c in self.checks]}


def collect(rows: Iterable[tuple[str, dict[str, float] | None]], labels: Iterable[str] = ()
            ) -> tuple[dict[str, dict[str, list[float]]], dict[str, int]]:
    """Per condition, each metric's values over the trials that gave it, and how many trials
    finished (a failed one counts toward the cap)."""
    taken = dict.fromkeys(labels, 0)
    values: dict[str, dict[str, list[float]]] = {}
    for label, row in rows:
        taken[label] = taken.get(label, 0) + 1
        for metric, value in (row or {}).items():
            if value is not None and not math.isnan(value):
                values.setdefault(label, {}).setdefault(metric, []).append(float(value))
    return values, taken
