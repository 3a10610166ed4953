"""`mpstream reproduce`'s parts that need no run: the recorded command read back, the figures the
docs quote from a summary, and whether a new figure agrees with the published one."""

import copy
import csv
import json

import pytest

from mpstream.errors import UserError
from mpstream.runner.reproduce import (
    DATA_DIR,
    Reproduction,
    RunCommand,
    agree,
    docs_figures,
    figure,
    rows_of,
    summary_files,
    write_table,
)

DEMO = DATA_DIR / "demo-2026-11-27.json"


def test_the_recorded_command_read_back():
    c = RunCommand.parse("mpstream run mpcc-buffer-sweep --trials 3 --condition 375k-lia "
                         "--condition 400k-lia --cluster local:2")
    assert (c.scenario, c.trials, c.conditions, c.cluster) == (
        "mpcc-buffer-sweep", 3, ["375k-lia", "400k-lia"], "local:2")
    u = RunCommand.parse("mpstream run demo --until download_share:0.05 --max-trials 4")
    assert (u.until, u.max_trials, u.trials) == ("download_share:0.05", 4, None)
    assert RunCommand.parse(".venv/bin/python bench/bench_server.py") is None


def test_agree_is_overlap():
    assert agree((1.0, 0.9, 1.1), (1.15, 1.05, 1.25)) is True
    assert agree((1.0, 0.9, 1.1), (1.3, 1.2, 1.4)) is False
    assert agree((1.0, 0.9, 1.1), (1.05, None, None)) is True  # one trial: inside the other's
    assert agree((1.0, None, None), (1.0, None, None)) is None
    assert agree((1.0, 0.9, 1.1), (None, None, None)) is None
    # A stated tolerance settles what one run's narrow intervals cannot.
    assert agree((0.9436, 0.9427, 0.9445), (0.9409, None, None)) is False
    assert agree((0.9436, 0.9427, 0.9445), (0.9409, None, None), tolerance=0.01) is True
    assert agree((1.0, None, None), (1.05, None, None), tolerance=0.02) is None


def test_ratio_figure_takes_its_interval_from_both_means():
    summary = {"conditions": [
        {"group": "a", "label": "a", "metrics": {"m": {"mean": 300, "ci95": [290, 310]}}},
        {"group": "b", "label": "b", "metrics": {"m": {"mean": 200, "ci95": [190, 210]}}}]}
    mean, low, high = figure(summary, "a", "m", "ratio:b")
    assert mean == pytest.approx(1.5)
    assert (low, high) == (pytest.approx(290 / 210), pytest.approx(310 / 190))


def test_rows_name_each_quoted_figure_and_whether_it_agrees(tmp_path):
    figs = docs_figures()
    published = json.loads(DEMO.read_text())
    shifted = copy.deepcopy(published)
    for c in shifted["conditions"]:
        if c["label"] == "unbalanced":
            m = c["metrics"]["download_share"]
            m["mean"], m["ci95"] = 0.5, [0.45, 0.55]
    new = tmp_path / DEMO.name
    new.write_text(json.dumps(shifted))
    rep = Reproduction(DEMO.stem, published["run"]["command"], new_summary=str(new))
    rows = rows_of(rep, DEMO, figs)
    shares = {r["condition"]: r for r in rows if r["metric"] == "download_share"}
    assert set(shares) == {"balanced", "unbalanced", "single"}  # as docs/install.md quotes them
    assert shares["unbalanced"]["agree"] is False
    assert "docs/install.md" in shares["unbalanced"]["pages"]
    assert shares["balanced"]["agree"] is True
    write_table(rows, [rep], tmp_path)
    with open(tmp_path / "reproduction.csv", newline="") as fh:
        written = list(csv.DictReader(fh))
    assert {"summary", "condition", "metric", "published_mean", "new_mean", "agree"} <= set(
        written[0])
    assert "disagree" in (tmp_path / "reproduction.html").read_text()


def test_summaries_named_or_refused():
    assert summary_files(["demo-2026-11-27"], False) == [DEMO.resolve()]
    with pytest.raises(UserError, match="no run summary"):
        summary_files(["nothing-like-it"], False)
    with pytest.raises(UserError, match="--all"):
        summary_files([], False)
