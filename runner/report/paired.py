"""Paired statistics of a run over trace pairs (a scenario with `pairs`, docs/mobile.md): the
pairs, not repeated rounds, carry them.

Each group (a condition, and the factors that vary in the run) has one figure a pair: its
trial's, or the mean of its trials of that pair over rounds. Over the pairs it gives the tails a
user feels (`FIGURES`: the stall ratio at the median, 95th and 99th percentile, the 5th
percentile of bitrate, the 95th of startup, the cellular bytes, Yin's QoE), each beside the
scenario's baseline condition's over the same pairs (those both played to the end), and in a run
of several adaptation rules with a `baseline_abr` each rule beside that one under the same
condition too, and beside the baseline condition under that rule (what a user has): the
difference, and its
95% interval from a percentile bootstrap over pairs (scipy.stats.bootstrap, `paired=True`: a
resample draws whole pairs, the condition's and the baseline's figure of each together),
seeded, so that the report of the same trials is the same file. A percentile is numpy's (linear
between the two closest ranks). The report writes them as paired.csv and the summary's `paired`
section.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

# (metric, statistic over pairs): `mean`, or `pNN`, the NNth percentile.
FIGURES: tuple[tuple[str, str], ...] = (
    ("rebuffer_ratio", "mean"), ("rebuffer_ratio", "p50"), ("rebuffer_ratio", "p95"),
    ("rebuffer_ratio", "p99"), ("mean_bitrate_mbps", "mean"), ("mean_bitrate_mbps", "p5"),
    ("startup_delay_ms", "mean"), ("startup_delay_ms", "p95"), ("metered_bytes", "mean"),
    ("qoe_yin", "mean"),
)
RESAMPLES = 9999
CONFIDENCE = 0.95
SEED = 66  # of every bootstrap: the same trials give the same intervals

# A group's figure of each pair: metric -> pair -> value.
PairFigures = dict[str, dict[str, float]]


@dataclass(frozen=True)
class PairedFigure:
    """One figure of a group over pairs, beside its baseline's over the same pairs (none for
    the baseline itself, or a run without one): the difference, condition less baseline, and
    its bootstrap interval (None with fewer than two pairs)."""

    condition: str
    baseline: str | None
    metric: str
    statistic: str
    pairs: int
    value: float | None
    baseline_value: float | None = None
    difference: float | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def reducer(statistic: str) -> Callable[..., np.ndarray]:
    """The statistic over pairs as a function of an array (along `axis`): mean, or pNN."""
    if statistic == "mean":
        return np.mean
    if statistic.startswith("p") and statistic[1:].isdigit():
        q = float(statistic[1:])
        return lambda values, axis=-1: np.percentile(values, q, axis=axis)
    raise ValueError(f"no statistic {statistic!r}: mean or pNN (a percentile)")


def per_pair(rows: Iterable[tuple[str, dict[str, object]]],
             metrics: Iterable[str]) -> PairFigures:
    """Each metric's figure per pair from (pair, trial figures) rows: the mean over a pair's
    trials (rounds) that gave it."""
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    wanted = list(metrics)
    for pair, row in rows:
        for metric in wanted:
            value = row.get(metric)
            if isinstance(value, int | float) and not math.isnan(value):
                found[metric][pair].append(float(value))
    return {m: {p: float(np.mean(v)) for p, v in by_pair.items()} for m, by_pair in found.items()}


def difference_interval(mine: np.ndarray, base: np.ndarray, statistic: str,
                        seed: int = SEED) -> tuple[float | None, float | None]:
    """The percentile bootstrap's 95% interval of statistic(mine) - statistic(base), resampling
    pairs (the two arrays are one pair an index)."""
    if len(mine) < 2:
        return None, None
    f = reducer(statistic)

    def diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return f(x, axis=axis) - f(y, axis=axis)

    res = stats.bootstrap((mine, base), diff, paired=True, vectorized=True,
                          n_resamples=RESAMPLES, confidence_level=CONFIDENCE,
                          method="percentile", rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def figure(condition: str, baseline: str | None, mine: dict[str, float],
           base: dict[str, float] | None, metric: str, statistic: str) -> PairedFigure | None:
    """One figure of `condition` over its pairs (those the baseline has too, when it has one)."""
    f = reducer(statistic)
    if base is None:
        values = np.array([mine[p] for p in sorted(mine)])
        if not len(values):
            return None
        return PairedFigure(condition, None, metric, statistic, len(values), float(f(values)))
    common = sorted(set(mine) & set(base))
    if not common:
        return None
    x = np.array([mine[p] for p in common])
    y = np.array([base[p] for p in common])
    value, base_value = float(f(x)), float(f(y))
    low, high = difference_interval(x, y, statistic)
    return PairedFigure(condition, baseline, metric, statistic, len(common), value, base_value,
                        value - base_value, low, high)


def paired_figures(groups: dict[str, PairFigures], baseline_of: Mapping[str, str | None],
                   figures: Iterable[tuple[str, str]] = FIGURES,
                   alone: bool = True) -> list[PairedFigure]:
    """Each group's figures over pairs, in the groups' order and FIGURES' order; a group is set
    beside `baseline_of[group]` (itself and None: alone, unless `alone` is False: then it has
    none)."""
    out = []
    for group, mine in groups.items():
        baseline = baseline_of.get(group)
        base = groups.get(baseline) if baseline is not None and baseline != group else None
        if base is None and not alone:
            continue
        for metric, statistic in figures:
            if metric not in mine:
                continue
            found = figure(group, baseline if base is not None else None, mine[metric],
                           base.get(metric) if base is not None else None, metric, statistic)
            if found is not None:
                out.append(found)
    return out
