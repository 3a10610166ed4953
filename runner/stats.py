"""Mean, standard deviation and 95% confidence interval over trials (Student's t)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st


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


def summarize(values, confidence: float = 0.95) -> Summary:
    """NaNs (a figure a trial could not give) are left out; n counts the rest.

    With one value the spread is unknown: sd and the interval are NaN rather than zero.
    """
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
