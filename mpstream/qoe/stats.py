"""Statistics across sessions or trials: mean, sample standard deviation and the Student-t
confidence interval of the mean. The collector's grouped summaries, its dashboard and the
runner's report all use these, so their intervals agree."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    sd: float  # sample standard deviation (n - 1)
    ci_low: float
    ci_high: float

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2


def summarize(values: Iterable[float | None], confidence: float = 0.95) -> Summary:
    """None and NaN values (a figure a trial could not give) are left out; n counts the rest.

    With one value the spread is unknown: sd and the interval are NaN rather than zero.
    """
    # Imported here: numpy and scipy cost every collector worker a second at start.
    import numpy as np
    from scipy import stats as st

    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    n = int(x.size)
    if n == 0:
        return Summary(0, math.nan, math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if n == 1:
        return Summary(1, mean, math.nan, math.nan, math.nan)
    sd = float(x.std(ddof=1))
    half = float(st.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return Summary(n, mean, sd, mean - half, mean + half)


def describe(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """`summarize` as JSON: n, mean, sd, ci95_low, ci95_high; NaN becomes null."""
    s = summarize(values)

    def finite(x: float) -> float | None:
        return None if math.isnan(x) else x

    return {"n": s.n, "mean": finite(s.mean), "sd": finite(s.sd),
            "ci95_low": finite(s.ci_low), "ci95_high": finite(s.ci_high)}
