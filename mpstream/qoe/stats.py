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
    half = math.sqrt(ss * _anytime_scale(n, 1 - confidence, mixing))
    return Summary(n, mean, math.sqrt(ss / (n - 1)), mean - half, mean + half)


def _anytime_scale(n: int, alpha: float, mixing: float) -> float:
    """K such that the anytime interval's half-width is sqrt(K * S) (S: the sum of squared
    deviations) after n trials: L_n(mu) < 1/alpha solved for d^2 = (mean - mu)^2. Infinite
    while too few trials can rule out any mean."""
    k = mixing / (n + mixing)
    r = (math.sqrt((n + mixing) / mixing) / alpha) ** (2 / n)
    return math.inf if r * k >= 1 else (r - 1) / (n * (1 - r * k))


def anytime_ratio(values: Iterable[float], baseline: Iterable[float], confidence: float = 0.95,
                  mixing: float = ANYTIME_MIXING) -> tuple[float, float]:
    """An anytime-valid interval of mean(values) / mean(baseline), for trials taken side by
    side: the i-th of each form a pair (runs interleave their conditions round by round), and a
    condition's extra trials wait for their pair. For a ratio rho, d_i = x_i - rho * y_i has
    mean 0; the interval is every rho at which 0 lies in d's anytime interval (Fieller's way
    with a confidence sequence in place of Student's t), which solves a quadratic in rho:

        (mx - rho my)^2 <= K (Sxx - 2 rho Sxy + rho^2 Syy),  K from `_anytime_scale`.

    One sequence at the whole confidence, and the two spreads add in quadrature (less still
    when the pairs move together), where two means' intervals at half the error rate each add
    their widths: about a third narrower at the same trials (tests/unit/test_anytime_ratio.py).
    Infinite while the baseline's mean cannot be told from 0."""
    import numpy as np

    x, y = np.asarray(list(values), float), np.asarray(list(baseline), float)
    n = min(x.size, y.size)
    if n < 2:
        return -math.inf, math.inf
    x, y = x[:n], y[:n]
    scale = _anytime_scale(n, 1 - confidence, mixing)
    if not math.isfinite(scale):
        return -math.inf, math.inf
    mx, my = float(x.mean()), float(y.mean())
    sxx, syy = float(((x - mx) ** 2).sum()), float(((y - my) ** 2).sum())
    sxy = float(((x - mx) * (y - my)).sum())
    a, b, c = my * my - scale * syy, mx * my - scale * sxy, mx * mx - scale * sxx
    if a <= 0:
        return -math.inf, math.inf
    # mx/my itself always satisfies the inequality, so the roots are real
    root = math.sqrt(max(b * b - a * c, 0.0))
    return (b - root) / a, (b + root) / a


def describe(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """`summarize` as JSON: n, mean, sd, ci95_low, ci95_high; NaN becomes null."""
    s = summarize(values)

    def finite(x: float) -> float | None:
        return None if math.isnan(x) else x

    return {"n": s.n, "mean": finite(s.mean), "sd": finite(s.sd),
            "ci95_low": finite(s.ci_low), "ci95_high": finite(s.ci_high)}
