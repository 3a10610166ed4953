"""Paired statistics over trace pairs (runner/report/paired.py): figures over pairs worked by
hand, the percentile bootstrap of a difference over pairs, and the report's paired.csv and the
summary's `paired` section for a run over pairs (none for a run without)."""

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from mpstream.runner.cli import report
from mpstream.runner.report.paired import (
    FIGURES,
    difference_interval,
    paired_figures,
    per_pair,
    reducer,
)
from mpstream.runner.report.summary import RunSummary, dumps
from tests.runfolder import make_run

pytestmark = pytest.mark.unit

# Four pairs; the baseline stalls more in each, by 0, 0.05, 0.1 and 0.15.
BASE = {"a": 0.0, "b": 0.1, "c": 0.2, "d": 0.3}
MINE = {"a": 0.0, "b": 0.05, "c": 0.1, "d": 0.15}


def test_a_percentile_is_linear_between_the_two_closest_ranks():
    # 95th of four: rank 0.95 × 3 = 2.85, 85% of the way from the 3rd value to the 4th.
    assert reducer("p95")(np.array([0.3, 0.0, 0.2, 0.1])) == pytest.approx(0.2 + 0.85 * 0.1)
    assert reducer("p50")(np.array([0.3, 0.0, 0.2, 0.1])) == pytest.approx(0.15)
    assert reducer("p5")(np.array([4.0, 8.0, 6.0, 2.0])) == pytest.approx(2.0 + 0.15 * 2.0)
    assert reducer("mean")(np.array([1.0, 2.0])) == 1.5
    with pytest.raises(ValueError, match="mean or pNN"):
        reducer("max")


def test_four_pairs_with_known_differences():
    groups = {"mp": {"rebuffer_ratio": MINE}, "wifi": {"rebuffer_ratio": BASE}}
    figures = paired_figures(groups, {"mp": "wifi", "wifi": "wifi"},
                             [("rebuffer_ratio", "mean"), ("rebuffer_ratio", "p95")])
    mean, p95, base_mean, base_p95 = figures
    assert (mean.condition, mean.baseline, mean.pairs) == ("mp", "wifi", 4)
    assert mean.value == pytest.approx(0.075) and mean.baseline_value == pytest.approx(0.15)
    assert mean.difference == pytest.approx(-0.075)
    # Resampled means of the differences 0, -0.05, -0.1, -0.15 lie between their extremes.
    assert -0.15 <= mean.ci95_low < mean.difference < mean.ci95_high <= 0
    assert p95.value == pytest.approx(0.1 + 0.85 * 0.05)
    assert p95.baseline_value == pytest.approx(0.2 + 0.85 * 0.1)
    assert p95.difference == pytest.approx(0.1425 - 0.285)
    # The baseline alone: its figures, no difference.
    assert (base_mean.baseline, base_mean.difference) == (None, None)
    assert base_mean.value == pytest.approx(0.15)
    assert base_p95.value == pytest.approx(0.285)


def test_a_constant_difference_has_that_interval_and_the_same_trials_the_same_one():
    x, y = np.array([3.0, 5.0, 4.0, 9.0]), np.array([1.0, 3.0, 2.0, 7.0])
    assert difference_interval(x, y, "mean") == pytest.approx((2.0, 2.0))
    noisy = np.array([3.0, 4.0, 6.0, 8.0])
    assert difference_interval(noisy, y, "p95") == difference_interval(noisy, y, "p95")
    assert difference_interval(x[:1], y[:1], "mean") == (None, None)


def test_pairs_one_side_lacks_are_left_out_and_rounds_are_averaged():
    rows = [("a", {"rebuffer_ratio": 0.1}), ("a", {"rebuffer_ratio": 0.3}),
            ("b", {"rebuffer_ratio": float("nan")}), ("c", {"rebuffer_ratio": 0.0})]
    assert per_pair(rows, ["rebuffer_ratio"]) == {"rebuffer_ratio": {"a": 0.2, "c": 0.0}}
    groups = {"mp": {"rebuffer_ratio": {"a": 0.2, "c": 0.0}},
              "wifi": {"rebuffer_ratio": {"a": 0.4, "b": 1.0, "c": 0.0}}}
    fig = paired_figures(groups, {"mp": "wifi"}, [("rebuffer_ratio", "mean")])[0]
    assert fig.pairs == 2 and fig.baseline_value == pytest.approx(0.2)


def _paired_run(tmp_path):
    """The golden trials, four rounds: each round a pair, each condition a trial of it."""
    run = make_run(tmp_path / "run", rounds=4)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "baseline": "single"}))
    for trial in (run / "trials").glob("*/trial.json"):
        record = json.loads(trial.read_text())
        trial.write_text(json.dumps({**record, "pair": f"p{record['round'] + 1}"}))
    return run


def test_the_report_of_a_run_over_pairs_writes_its_paired_figures(tmp_path):
    run = _paired_run(tmp_path)
    out = tmp_path / "mobile-x.json"
    result = CliRunner().invoke(report, [str(run), "--out", str(tmp_path / "rep"),
                                       "--summary", str(out)])
    assert result.exit_code == 0, result.output
    with (tmp_path / "rep" / "trials.csv").open() as fh:
        trials = list(csv.DictReader(fh))
    assert {t["pair"] for t in trials} == {"p1", "p2", "p3", "p4"}
    with (tmp_path / "rep" / "paired.csv").open() as fh:
        rows = {(r["condition"], r["metric"], r["statistic"]): r for r in csv.DictReader(fh)}
    startup = rows[("unbalanced", "startup_delay_ms", "p95")]
    assert (startup["baseline"], startup["pairs"], startup["unit"]) == ("single", "4", "ms")
    # Every pair played the same trial of each condition: the difference is the same in each
    # pair, and its interval is that difference.
    diff = float(startup["value"]) - float(startup["baseline_value"])
    assert float(startup["difference"]) == pytest.approx(diff)
    assert float(startup["ci95_low"]) == pytest.approx(diff)
    assert float(startup["ci95_high"]) == pytest.approx(diff)
    assert rows[("single", "startup_delay_ms", "p95")]["baseline"] == ""
    text = out.read_text()
    summary = json.loads(text)
    figures = {(f["condition"], f["metric"], f["statistic"]) for f in summary["paired"]}
    assert ("balanced", "rebuffer_ratio", "p99") in figures
    assert {(m, s) for _, m, s in figures} <= set(FIGURES)
    assert dumps(RunSummary.model_validate_json(text)) == text
    # The report's page: the figures over pairs beside the baseline, and each pair drawn.
    assert (tmp_path / "rep" / "per-pair.png").stat().st_size > 10_000
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "<h2>Over trace pairs</h2>" in page
    p95 = f"{float(startup['value']):.1f} (Δ {diff:.1f} [{diff:.1f}, {diff:.1f}])"
    assert "<td>unbalanced</td><td>single</td>" in page and p95 in page, p95


def test_a_run_without_pairs_has_no_paired_figures(tmp_path):
    run = make_run(tmp_path / "run", rounds=2)
    out = tmp_path / "demo-x.json"
    assert CliRunner().invoke(report, [str(run), "--out", str(tmp_path / "rep"),
                                       "--summary", str(out)]).exit_code == 0
    assert not (tmp_path / "rep" / "paired.csv").exists()
    assert not (tmp_path / "rep" / "per-pair.png").exists()
    assert "Over trace pairs" not in (tmp_path / "rep" / "report.html").read_text()
    assert "paired" not in json.loads(out.read_text())
    with (tmp_path / "rep" / "trials.csv").open() as fh:
        assert "pair" not in next(csv.reader(fh))


def test_each_rule_is_set_beside_the_baseline_rule_under_the_same_condition(tmp_path):
    """Eight rounds: the four pairs with the players' own rule, then with `multipath`."""
    run = make_run(tmp_path / "run", rounds=8)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "baseline": "single",
                                              "baseline_abr": "default"}))
    for trial in (run / "trials").glob("*/trial.json"):
        record = json.loads(trial.read_text())
        trial.write_text(json.dumps({**record, "pair": f"p{record['round'] % 4 + 1}",
                                     "abr": "default" if record["round"] < 4 else "multipath"}))
    out = tmp_path / "mobile-abr-x.json"
    assert CliRunner().invoke(report, [str(run), "--out", str(tmp_path / "rep"),
                                       "--summary", str(out)]).exit_code == 0
    beside = {(f["condition"], f["baseline"]) for f in json.loads(out.read_text())["paired"]
              if f["metric"] == "qoe_yin"}
    assert beside == {
        ("single/default", None), ("single/multipath", None),
        ("balanced/default", "single/default"), ("balanced/multipath", "single/multipath"),
        ("unbalanced/default", "single/default"), ("unbalanced/multipath", "single/multipath"),
        # the rule's own comparison, condition by condition
        ("single/multipath", "single/default"), ("balanced/multipath", "balanced/default"),
        ("unbalanced/multipath", "unbalanced/default"),
        # the whole against what a user has: the baseline condition with the baseline rule
        ("balanced/multipath", "single/default"), ("unbalanced/multipath", "single/default")}
