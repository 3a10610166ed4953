"""The anytime-valid interval of mpstream.qoe.stats: it holds its coverage when looked at after
every trial, where the plain Student-t interval does not."""

import math

import numpy as np
import pytest

from mpstream.qoe.stats import anytime_summary, summarize

LOOKS = range(2, 31)  # a run that looks after every trial from the second to the 30th


def _ever_misses(x: np.ndarray, interval) -> bool:
    for n in LOOKS:
        s = interval(x[:n])
        if not s.ci_low <= 0.0 <= s.ci_high:
            return True
    return False


def test_coverage_holds_at_every_look_where_the_plain_interval_does_not():
    rng = np.random.default_rng(7)
    streams = [rng.normal(0.0, 1.0, max(LOOKS)) for _ in range(600)]
    anytime = sum(_ever_misses(x, anytime_summary) for x in streams) / len(streams)
    plain = sum(_ever_misses(x, summarize) for x in streams[:200]) / 200
    assert anytime <= 0.05, f"the anytime interval missed the mean in {anytime:.1%} of streams"
    # Peeking at the plain interval 29 times misses far more often than its 5%.
    assert plain > 0.2, plain


def test_scale_invariant():
    x = [0.91, 0.88, 0.90, 0.87, 0.89]
    a, b = anytime_summary(x), anytime_summary([v * 1000 for v in x])
    assert b.half_width == pytest.approx(a.half_width * 1000)


def test_wider_than_the_plain_interval_and_narrowing():
    x = list(np.random.default_rng(1).normal(10.0, 2.0, 20))
    widths = [anytime_summary(x[:n]).half_width for n in (4, 8, 20)]
    assert widths[0] > widths[1] > widths[2]
    for n in (4, 8, 20):
        assert anytime_summary(x[:n]).half_width > summarize(x[:n]).half_width


def test_too_few_trials_rule_out_nothing():
    assert math.isinf(anytime_summary([1.0]).half_width)
    assert math.isinf(anytime_summary([1.0, 2.0]).half_width)
    assert anytime_summary([]).n == 0
    assert math.isfinite(anytime_summary([1.0, 1.1, 0.9, 1.05]).half_width)


def test_the_mixing_chosen_is_narrowest_at_four_trials():
    x = list(np.random.default_rng(2).normal(0.0, 1.0, 10))
    width = {c: anytime_summary(x[:4], mixing=c).half_width for c in (0.05, 0.1, 0.3, 1.0)}
    assert min(width, key=width.get) == 0.1, width
    # From 6 trials on a larger mixing is a little narrower: the trade the default makes.
    assert anytime_summary(x[:6], mixing=0.3).half_width < anytime_summary(x[:6]).half_width
