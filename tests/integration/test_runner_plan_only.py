"""`run --plan-only` prepares a run folder and runs nothing; `mpstream trial` then runs any of
its trials on its own (what a batch system's array job does), and `run` on the folder does
only what is left."""

import json
import subprocess
import sys

import pytest

from tests.scenarios import balanced_and_single

pytestmark = pytest.mark.timeout(300)

SCENARIO = balanced_and_single("plan-only", seed=2, duration_s=2)


def _mpstream(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "mpstream.cli", *args], capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return " ".join(done.stdout.split())


def test_a_planned_run_is_run_one_trial_at_a_time_elsewhere(tmp_path):
    scenario = tmp_path / "plan-only.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    said = _mpstream("run", str(scenario), "--out", str(out), "--plan-only")
    assert "planned: 2 trial(s)" in said
    plan = json.loads((out / "run.json").read_text())["plan"]
    assert sorted(plan) == ["r00-balanced", "r00-single"]
    assert not (out / "trials").exists() and not (out / "report").exists()

    said = _mpstream("trial", str(out), "--key", plan[0])
    assert json.loads((out / "trials" / plan[0] / "trial.json").read_text())["status"] == "ok"

    said = _mpstream("run", str(scenario), "--out", str(out), "--no-report")
    assert "resuming: 1 of 2 trials already done" in said
    assert (out / "trials" / plan[1] / "trial.json").is_file()


def test_a_run_of_some_conditions_plans_them_all_and_runs_only_those(tmp_path):
    """--condition: the plan (and so the report's order and a sweep's figure) keeps every
    condition; only the named ones' trials are to run. A label the scenario lacks is refused
    with those it has, before the run folder is touched."""
    scenario = tmp_path / "plan-only.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    said = _mpstream("run", str(scenario), "--out", str(out), "--plan-only", "--trials", "2",
                     "--condition", "single")
    assert "planned: 2 trial(s)" in said
    assert sorted(json.loads((out / "run.json").read_text())["plan"]) == [
        "r00-balanced", "r00-single", "r01-balanced", "r01-single"]
    # What the run is a run of (its summary's command and trials planned): the conditions named
    # over every `run` into the folder, until all are.
    assert json.loads((out / "run.json").read_text())["chosen"] == ["single"]
    said = _mpstream("run", str(scenario), "--out", str(out), "--plan-only", "--trials", "2",
                     "--condition", "balanced")
    assert "planned: 2 trial(s)" in said  # balanced's
    # Both named, all are: the run is one of the whole scenario (null), as with '*'.
    assert json.loads((out / "run.json").read_text())["chosen"] is None

    refused = subprocess.run([sys.executable, "-m", "mpstream.cli", "run", str(scenario),
                              "--out", str(tmp_path / "other"), "--condition", "singel"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    said = " ".join((refused.stdout + refused.stderr).split())
    assert "has no condition 'singel'; its conditions: balanced, single" in said
    assert not (tmp_path / "other").exists()


def test_a_run_resumed_with_no_options_goes_on_as_it_was_planned(tmp_path):
    """`mpstream run SCENARIO --out FOLDER`, what an interrupted run says to resume it with:
    the trials per condition, the conditions and the capture it was begun with, not the
    scenario's; `--condition '*'` widens it to all."""
    scenario = tmp_path / "plan-only.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    _mpstream("run", str(scenario), "--out", str(out), "--plan-only", "--trials", "3",
              "--condition", "single", "--pcap")
    said = _mpstream("run", str(scenario), "--out", str(out), "--plan-only")
    assert "planned: 3 trial(s)" in said
    run = json.loads((out / "run.json").read_text())
    assert (run["trials"], run["chosen"], run["pcap"]) == (3, ["single"], True)
    assert len(run["plan"]) == 6

    said = _mpstream("run", str(scenario), "--out", str(out), "--plan-only", "--condition", "*")
    assert "planned: 6 trial(s)" in said
    assert json.loads((out / "run.json").read_text())["chosen"] is None


def test_a_run_of_conditions_the_scenario_no_longer_has_is_not_widened_unasked(tmp_path):
    scenario = tmp_path / "plan-only.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    _mpstream("run", str(scenario), "--out", str(out), "--plan-only", "--condition", "single")
    scenario.write_text(SCENARIO.replace('label = "single"', 'label = "tcp"'))
    refused = subprocess.run([sys.executable, "-m", "mpstream.cli", "run", str(scenario),
                              "--out", str(out), "--plan-only"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    said = " ".join((refused.stdout + refused.stderr).split())
    assert "the run was of condition(s) single, which scenario 'plan-only' no longer has" in said
    assert json.loads((out / "run.json").read_text())["chosen"] == ["single"]
