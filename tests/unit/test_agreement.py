"""The sequential decision of a reproduced figure (runner/agreement.py) on hand-worked samples,
and the headline set that feeds it (runner/reproduce/headline.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from mpstream.errors import UserError
from mpstream.qoe.stats import anytime_summary
from mpstream.runner.agreement import Agreement, Band, FigureCheck, collect, decide
from mpstream.runner.cost import Cost
from mpstream.runner.reproduce.headline import HEADLINE_SET, extensions, load_set, print_plan

TIGHT = [10.0, 10.1, 9.9, 10.0, 10.05, 9.95]  # mean 10.0, sd 0.071


def rows(label: str, values: list[float], metric: str = "m") -> list[tuple[str, dict]]:
    return [(label, {metric: v}) for v in values]


def test_the_decision_reads_the_interval_against_the_band():
    band = Band.around(10.0, 0.1, absolute=False)
    assert (band.low, band.high) == (9.0, 11.0)
    assert decide(9.5, 10.5, band) == "agrees"
    assert decide(11.2, 12.0, band) == "disagrees"
    assert decide(7.0, 8.9, band) == "disagrees"
    assert decide(10.5, 11.5, band) == "undecided"  # across the band's edge
    assert decide(-math.inf, math.inf, band) == "undecided"
    assert Band.around(0.4, 1.0, absolute=True) == Band(-0.6, 1.4)


def test_tight_trials_at_the_published_value_agree():
    # Worked by hand: n = 6, S = 0.025, so the anytime interval is 10.0 +- 0.14, inside 9-11.
    s = anytime_summary(TIGHT)
    assert 0.1 < (s.ci_high - s.ci_low) / 2 < 0.2
    rule = Agreement((FigureCheck("a", "m", "mean", Band(9.0, 11.0)),), max_trials=10)
    values, taken = collect(rows("a", TIGHT))
    (v,) = rule.verdicts(values, taken)
    assert v.decision == "agrees" and v.trials == 6 and v.mean == pytest.approx(10.0)


def test_tight_trials_away_from_it_disagree_and_spread_ones_stay_undecided():
    far = Agreement((FigureCheck("a", "m", "mean", Band(12.0, 14.0)),), max_trials=10)
    (v,) = far.verdicts(*collect(rows("a", TIGHT)))
    assert v.decision == "disagrees"
    wide = Agreement((FigureCheck("a", "m", "mean", Band(9.0, 11.0)),), max_trials=10)
    (v,) = wide.verdicts(*collect(rows("a", [6.0, 14.0, 9.0, 12.0])))
    assert v.decision == "undecided"


def test_nothing_is_decided_before_the_floor():
    rule = Agreement((FigureCheck("a", "m", "mean", Band(0.0, 100.0)),), max_trials=10)
    (v,) = rule.verdicts(*collect(rows("a", [10.0, 10.0])))
    assert v.decision == "undecided"


def test_a_ratio_is_decided_within_the_new_run_only():
    # The new run is three times slower than the published one in both conditions: its
    # absolute figures would disagree, but the ratio (2.0 here and there) agrees.
    check = FigureCheck("mptcp", "m", "ratio:tcp", Band.around(2.0, 0.2, absolute=False))
    rule = Agreement((check,), max_trials=12)
    base = [3 * v for v in TIGHT]
    # each round's two trials vary apart (the pairs are not proportional)
    values, taken = collect(rows("tcp", base) + rows("mptcp", [2 * v for v in reversed(base)]))
    (v,) = rule.verdicts(values, taken)
    assert v.mean == pytest.approx(2.0)
    assert 1.6 < v.low < 2.0 < v.high < 2.4
    assert v.decision == "agrees"
    assert check.carriers == ("mptcp", "tcp")


def test_a_condition_stops_once_the_figures_it_carries_are_decided():
    rule = Agreement((FigureCheck("a", "m", "mean", Band(9.0, 11.0)),
                      FigureCheck("b", "m", "ratio:c", Band(0.9, 1.1))), max_trials=8)
    trials = [("a", "a", {"m": v}) for v in TIGHT]
    trials += [("b", "b", {"m": v}) for v in [6.0, 14.0, 9.0, 12.0, 10.0, 8.0]]
    trials += [("c", "c", {"m": v}) for v in TIGHT]
    states = rule.states(trials, ["a", "b", "c"])
    assert states["a"].stop_reason == "sure"
    # c carries b's undecided ratio: both go on.
    assert states["b"].stop_reason is None and states["c"].stop_reason is None
    trials += [("b", "b", {"m": 10.0}), ("c", "c", {"m": 10.0})] * 2
    states = rule.states(trials, ["a", "b", "c"])
    assert states["b"].stop_reason == "cap" and states["c"].stop_reason == "cap"


def test_a_condition_played_by_two_players_counts_rounds_not_trials():
    rule = Agreement((FigureCheck("live/dashjs", "m", "mean", Band(0.0, 1.0)),), max_trials=4)
    trials = [("live", f"live/{p}", {"m": 5.0}) for _ in range(3) for p in ("dashjs", "hlsjs")]
    states = rule.states(trials, ["live"])
    assert states["live"].trials == 3
    assert states["live"].stop_reason == "sure"  # its figure disagrees: decided
    assert rule.verdicts(*collect((g, r) for _, g, r in trials))[0].decision == "disagrees"


def test_a_failed_trial_counts_toward_the_cap_and_gives_no_figure():
    rule = Agreement((FigureCheck("a", "m", "mean", Band(9.0, 11.0)),), max_trials=3)
    states = rule.states([("a", "a", None)] * 3, ["a"])
    assert states["a"].stop_reason == "cap"
    assert rule.verdicts(*collect([("a", None)] * 3))[0].decision == "undecided"


def test_the_checked_in_headline_set_loads_and_fits_two_hours():
    chosen = load_set()
    said = print_plan(chosen, Console(file=open("/dev/null", "w")))  # noqa: SIM115
    assert said["caps_seconds"] <= said["machine_seconds"] <= 2 * 3600
    seeds = {f.seed for r in chosen.runs for f in r.figures}
    assert {"thesis", "NP03", "MPCC", "ECE4400", "CS244", "README"} <= seeds
    assert sum(len(r.figures) for r in chosen.runs) >= 8


@dataclass(frozen=True)
class _Run:
    # What `extensions` reads of a headline run: its cap and the cost of a round.
    max_trials: int
    round_s: float

    def cost(self, rounds: int | None = None) -> Cost:
        return Cost(rounds or self.max_trials, self.round_s, "a round")


def _done(seconds: float, trials: int, *decisions: str) -> dict:
    return {"seconds": seconds, "trials": trials, "figures": [{"decision": d} for d in decisions]}


def test_what_the_budget_leaves_goes_to_undecided_runs_cheapest_round_first():
    runs = [_Run(5, 100.0), _Run(3, 50.0), _Run(4, 10.0)]
    done = [_done(300, 5, "undecided", "agrees"), _done(150, 3, "undecided"),
            _done(50, 4, "agrees")]
    # 1000 s less the 500 spent: the 50 s run first, its cap again (3 rounds: 150 s), then
    # the 100 s run, as many as the 350 s left allow (3 of its 5).
    assert extensions(runs, done, 1000.0) == {1: 3, 0: 3}
    # Nothing left, or nothing undecided: nothing given.
    assert extensions(runs, done, 500.0) == {}
    assert extensions(runs, [_done(1, 1, "agrees")] * 3, 10_000.0) == {}


def test_a_round_costs_what_the_runs_own_trials_took_when_that_is_longer():
    # Its trials took 80 s each, not the published 50: 350 s left buy 4 rounds, not 7.
    runs = [_Run(10, 50.0)]
    assert extensions(runs, [_done(800, 10, "undecided")], 1150.0) == {0: 4}
    assert extensions(runs, [_done(300, 10, "undecided")], 650.0) == {0: 7}


def test_a_budget_below_the_caps_or_not_hours_is_refused(tmp_path):
    first_run = "[[run]]\n" + HEADLINE_SET.read_text().split("\n[[run]]\n")[1]
    for budget in ("0.01", '"two"', "true"):
        with pytest.raises(UserError, match=r"budget_h .*: give the hours the set may take"):
            load_set(_set(tmp_path, f"budget_h = {budget}\n{first_run}"))
    fine = load_set(_set(tmp_path, f"budget_h = 2\n{first_run}"))
    assert fine.budget_s == 7200.0 and 0 < fine.caps_seconds() < 7200.0
    assert load_set(_set(tmp_path, first_run)).budget_s is None


def _set(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "set.toml"
    path.write_text(text)
    return path


def test_a_headline_set_with_a_wrong_entry_is_refused_by_name(tmp_path):
    with pytest.raises(UserError, match="no summary"):
        load_set(_set(tmp_path, '[[run]]\nsummary = "nope"\n'))
    base = '[[run]]\nsummary = "demo-2026-11-27"\n[[run.figure]]\ncondition = "single"\n'
    with pytest.raises(UserError, match="has no single no_such_metric"):
        load_set(_set(tmp_path, base + 'metric = "no_such_metric"\ntolerance = 0.1\n'
                      'why = "x"\n'))
    with pytest.raises(UserError, match="lacks tolerance, why"):
        load_set(_set(tmp_path, base + 'metric = "download_share"\n'))
    with pytest.raises(UserError, match="not by a run alone"):
        load_set(_set(tmp_path, '[[run]]\nsummary = "bench-origin-2026-11-29"\n'))
    with pytest.raises(UserError, match="no headline set"):
        load_set(tmp_path / "missing.toml")
    assert HEADLINE_SET.name == "headline.toml"


def test_a_runs_time_is_its_trials_own_not_the_wait_between_them(tmp_path):
    from mpstream.runner.layout import TRIAL_JSON, write_json
    from mpstream.runner.reproduce.headline import trial_seconds
    from mpstream.runner.scenario import expand_trials, load_scenario
    from mpstream.runner.trial import failed_record

    scenario = load_scenario("demo")
    # A first trial of 60 s, and one of 30 s resumed an hour later: 90 s, not the hour's span.
    for trial, (start, end) in zip(expand_trials(scenario, 1),
                                   [("10:00:00", "10:01:00"), ("11:00:00", "11:00:30")],
                                   strict=False):
        record = failed_record(scenario.kind, trial, "")
        record.started_at = f"2026-12-02T{start}+00:00"
        record.finished_at = f"2026-12-02T{end}+00:00"
        (tmp_path / "trials" / trial.key).mkdir(parents=True)
        write_json(tmp_path / "trials" / trial.key / TRIAL_JSON, record.model_dump(mode="json"))
    assert trial_seconds(tmp_path) == 90.0
