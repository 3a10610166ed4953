"""Runs that stop when the answer is sure: `mpstream run SCENARIO --until METRIC:WIDTH`.

A condition stops taking trials once the anytime-valid interval of its mean of METRIC
(mpstream.qoe.stats.anytime_summary) is at most WIDTH either side, after at least `floor`
trials, or once it has `max_trials` (its stop reason: `sure` or `cap`). With a trailing `x`
(`startup_delay_ms:0.05x`) WIDTH is of the ratio of the condition's mean to the scenario's
baseline condition's: the ratio's interval is one confidence sequence over the two conditions'
trials paired in the order they ran (mpstream.qoe.stats.anytime_ratio), and the baseline takes
trials as long as a condition compared with it does.

The rule reads only the finished trials, so a run resumed after kill -9 is in the state it
was in; the conditions stay interleaved round by round (runner/run.py)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

from mpstream.qoe.stats import Summary, anytime_ratio, anytime_summary

FLOOR = 3  # trials a condition takes before it may stop: fewer say little about the spread
CONFIDENCE = 0.95
StopReason = Literal["sure", "cap"]


@dataclass(frozen=True)
class Until:
    metric: str
    width: float
    ratio: bool = False
    max_trials: int = 10
    floor: int = FLOOR

    @classmethod
    def parse(cls, text: str, max_trials: int) -> Until:
        """METRIC:WIDTH or METRIC:WIDTHx; a ValueError that says what is wrong."""
        found = re.fullmatch(r"([A-Za-z0-9_]+):([0-9]*\.?[0-9]+)(x?)", text.strip())
        if found is None:
            raise ValueError(f"--until {text!r}: give METRIC:WIDTH (e.g. download_share:0.05, "
                             "half the interval's width in the metric's unit) or METRIC:WIDTHx "
                             "(of the ratio to the scenario's baseline, e.g. "
                             "startup_delay_ms:0.05x)")
        width = float(found.group(2))
        if width <= 0:
            raise ValueError(f"--until {text!r}: the width must be above 0")
        if max_trials < FLOOR:
            raise ValueError(f"--max-trials {max_trials}: a condition takes at least {FLOOR} "
                             "trials before it may stop; give 3 or more")
        return cls(found.group(1), width, found.group(3) == "x", max_trials)

    def text(self) -> str:
        return f"{self.metric}:{self.width:g}{'x' if self.ratio else ''}"

    def as_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Until:
        return cls(**data)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ConditionState:
    """Where a condition stands: its trials so far, the interval the rule reads (of the
    metric, or of the ratio), and why it stopped (None: it takes more trials)."""

    label: str
    trials: int
    low: float
    high: float
    stop_reason: StopReason | None

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def interval(values: list[float]) -> Summary:
    return anytime_summary(values, CONFIDENCE)


def ratio_interval(values: list[float], baseline: list[float]) -> tuple[float, float]:
    """The anytime interval of mean(values) / mean(baseline), each condition's trials in the
    order they ran paired with the other's (mpstream.qoe.stats.anytime_ratio); infinite while
    the baseline's mean cannot be told from 0."""
    return anytime_ratio(values, baseline, CONFIDENCE)


def states_of(until: Until, trials: Iterable[tuple[str, float | None]], baseline: str | None,
              labels: Iterable[str] = ()) -> dict[str, ConditionState]:
    """Each condition's state from its finished trials, given as (condition, the trial's
    figure, or None when it gave none or failed); `labels`: conditions that have none yet."""
    taken = dict.fromkeys(labels, 0)
    values: dict[str, list[float]] = {label: [] for label in taken}
    for label, value in trials:
        taken[label] = taken.get(label, 0) + 1
        values.setdefault(label, [])
        if value is not None and not math.isnan(value):
            values[label].append(float(value))
    return states(until, values, taken, baseline)


def states(until: Until, values: dict[str, list[float]], trials: dict[str, int],
           baseline: str | None) -> dict[str, ConditionState]:
    """Each condition's state from its finished trials: `values` the metric of each trial that
    gave it, `trials` every finished trial (failed ones count toward the cap)."""
    out: dict[str, ConditionState] = {}
    for label, taken in trials.items():
        if until.ratio and label == baseline:
            continue
        got = values.get(label, [])
        if until.ratio:
            low, high = ratio_interval(got, values.get(baseline or "", []))
        else:
            s = interval(got)
            low, high = s.ci_low, s.ci_high
        reason: StopReason | None = None
        if taken >= until.floor and (high - low) / 2 <= until.width:
            reason = "sure"
        elif taken >= until.max_trials:
            reason = "cap"
        out[label] = ConditionState(label, taken, low, high, reason)
    if until.ratio and baseline in trials:
        taken = trials[baseline]
        open_ = [s for s in out.values() if s.stop_reason is None]
        reason = None if open_ and taken < until.max_trials else (
            "cap" if taken >= until.max_trials else "sure")
        s = interval(values.get(baseline, []))
        out[baseline] = ConditionState(baseline, taken, s.ci_low, s.ci_high, reason)
    return out
