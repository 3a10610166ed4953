"""The stopping rule of `mpstream run --until` (runner/until.py) on synthetic streams of trials."""

import numpy as np
import pytest

from mpstream.runner.until import Until, states


def _stop_after(until: Until, streams: dict[str, np.ndarray], baseline: str | None = None
                ) -> dict[str, tuple[int, str]]:
    """Feeds the streams round by round as a run does; each condition's trial count and
    reason when it stopped."""
    labels = list(streams)
    taken = dict.fromkeys(labels, 0)
    stopped: dict[str, tuple[int, str]] = {}
    for _ in range(until.max_trials):
        for label in labels:
            if label not in stopped:
                taken[label] += 1
        values = {label: list(streams[label][:taken[label]]) for label in labels}
        for label, s in states(until, values, taken, baseline).items():
            if s.stop_reason is not None and label not in stopped:
                stopped[label] = (s.trials, s.stop_reason)
        if len(stopped) == len(labels):
            break
    return stopped


def test_a_tight_condition_stops_early_and_a_noisy_one_runs_to_the_cap():
    rng = np.random.default_rng(3)
    until = Until.parse("download_share:0.05", max_trials=10)
    got = _stop_after(until, {"tight": rng.normal(0.88, 0.01, 10),
                              "noisy": rng.normal(0.60, 0.30, 10)})
    assert got["tight"][1] == "sure" and got["tight"][0] <= 5
    assert got["noisy"] == (10, "cap")


def test_ratio_to_the_baseline_stops_when_the_ratio_is_sure_and_the_baseline_with_it():
    rng = np.random.default_rng(4)
    until = Until.parse("startup_delay_ms:0.1x", max_trials=12)
    got = _stop_after(until, {"tcp": rng.normal(200, 4, 12), "clear": rng.normal(300, 6, 12),
                              "unclear": rng.normal(250, 120, 12)}, baseline="tcp")
    assert got["clear"][1] == "sure" and got["clear"][0] <= 10
    assert got["unclear"] == (12, "cap")
    # The baseline serves the unclear condition to its end.
    assert got["tcp"] == (12, "cap")


def test_the_baseline_stops_with_the_last_condition_compared_with_it():
    rng = np.random.default_rng(5)
    until = Until.parse("startup_delay_ms:0.1x", max_trials=10)
    got = _stop_after(until, {"tcp": rng.normal(200, 2, 10), "mptcp": rng.normal(210, 2, 10)},
                      baseline="tcp")
    assert got["mptcp"][1] == "sure"
    assert got["tcp"] == (got["mptcp"][0], "sure")


def test_failed_trials_count_toward_the_cap():
    until = Until.parse("download_share:0.01", max_trials=4)
    found = states(until, {"a": [0.5]}, {"a": 4}, None)
    assert found["a"].stop_reason == "cap"


@pytest.mark.parametrize("text, problem", [
    ("download_share", "METRIC:WIDTH"),
    ("download_share:abc", "METRIC:WIDTH"),
    ("download_share:0", "above 0"),
])
def test_refusals(text, problem):
    with pytest.raises(ValueError, match=problem):
        Until.parse(text, max_trials=5)


def test_max_trials_under_the_floor_is_refused():
    with pytest.raises(ValueError, match="3 or more"):
        Until.parse("download_share:0.05", max_trials=2)


def test_parse_round_trip():
    u = Until.parse("startup_delay_ms:0.05x", max_trials=8)
    assert (u.metric, u.width, u.ratio, u.max_trials) == ("startup_delay_ms", 0.05, True, 8)
    assert Until.from_json(u.as_json()) == u
    assert u.text() == "startup_delay_ms:0.05x"
