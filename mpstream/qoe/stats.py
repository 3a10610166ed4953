"""Statistics across sessions or trials: mean, sample standard deviation and the Student-t
confidence interval of the mean, and the anytime-valid interval that a run which stops when it
is sure uses instead. The collector's grouped summaries, its dashboard and the runner's report
all use these, so their intervals agree."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


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
    # Imported here: scipy costs every collector worker a second at start.
    from scipy import stats as st

    x, early = _given(values, math.nan)
    if early is not None:
        return early
    n, mean = int(x.size), float(x.mean())
    sd = float(x.std(ddof=1))
    half = float(st.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return Summary(n, mean, sd, mean - half, mean + half)


def _given(values: Iterable[float | None], unknown_half: float) -> tuple[Any, Summary | None]:
    """The finite values as an array, and the summary itself when they are too few for a
    spread (none, or one: its interval's half-width is `unknown_half`)."""
    import numpy as np

    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if x.size == 0:
        return x, Summary(0, math.nan, math.nan, math.nan, math.nan)
    if x.size == 1:
        mean = float(x[0])
        return x, Summary(1, mean, math.nan, mean - unknown_half, mean + unknown_half)
    return x, None


# The mixing precision of the anytime-valid interval: the prior's spread of the effect in units
# of the standard deviation is 1/sqrt(this). 0.1 gives the narrowest interval at 4 trials, the
# first count after the floor where a run that stops when sure can stop; larger values narrow it
# a little from 6 trials on (tests/unit/test_anytime_interval.py).
ANYTIME_MIXING = 0.1


def anytime_summary(values: Iterable[float | None], confidence: float = 0.95,
                    mixing: float = ANYTIME_MIXING) -> Summary:
    """Like `summarize`, with an interval that holds its coverage at every number of trials
    at once (a confidence sequence), so that a run may look after every trial and stop once it
    is narrow enough without the optimism that looking at a plain interval brings.

    For normally distributed trials with unknown spread: the scale-invariant likelihood ratio of
    a mean mu against a normal mixture (precision `mixing`) over the standardized effect is

        L_n(mu) = sqrt(c / (n + c)) * ((S + n d^2) / (S + n d^2 c / (n + c)))^(n / 2),

    with S the sum of squared deviations from the mean, d = mean - mu and c = `mixing`. Under mu
    it is a nonnegative martingale that starts at 1, so by Ville's inequality it ever exceeds
    1 / alpha with probability at most alpha; the interval is the mu whose L_n stays below. It is
    infinite while the data cannot yet rule out any mean (n < 2, or too few trials for alpha),
    and about twice the width of the Student-t interval at the same n."""
    x, early = _given(values, math.inf)
    if early is not None:
        return early
    n, mean = int(x.size), float(x.mean())
    ss = float(((x - mean) ** 2).sum())
    alpha = 1 - confidence
    k = mixing / (n + mixing)
    r = (math.sqrt((n + mixing) / mixing) / alpha) ** (2 / n)
    half = math.inf if r * k >= 1 else math.sqrt(ss / n * (r - 1) / (1 - r * k))
    return Summary(n, mean, math.sqrt(ss / (n - 1)), mean - half, mean + half)


def describe(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """`summarize` as JSON: n, mean, sd, ci95_low, ci95_high; NaN becomes null."""
    s = summarize(values)

    def finite(x: float) -> float | None:
        return None if math.isnan(x) else x

    return {"n": s.n, "mean": finite(s.mean), "sd": finite(s.sd),
            "ci95_low": finite(s.ci_low), "ci95_high": finite(s.ci_high)}
