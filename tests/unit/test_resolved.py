"""Each condition resolved once: a run of two conditions reads each profile and deployment file
once a condition (the scenario's loading), its trials none (they read run.json); run.json holds
what each condition resolved to and gives back the same values; an older run.json without them
is resolved as it loads."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from pathlib import Path

import pytest

from mpstream.errors import UserError
from mpstream.runner import run as run_module
from mpstream.runner.layout import RUN_JSON, read_json, write_json
from mpstream.runner.record import TrialRecord
from mpstream.runner.scenario import load_scenario
from mpstream.runner.sites.emulated import EmulatedSite
from mpstream.runner.trial import load_plan, plan_json, run_trial
from mpstream.transports.pathpolicy import DeadlineMarks, policy_named

pytestmark = pytest.mark.unit

WIFI_CELL = """
[[paths]]
name = "wifi"
rate = "20mbit"
delay_ms = 5.0
[[paths]]
name = "cell"
rate = "10mbit"
delay_ms = 20.0
metered = true
cost_per_gb = 8.0
"""
TWO_PATHS = """
mode = "tcp"
[[paths]]
rate = "10mbit"
[[paths]]
rate = "5mbit"
"""
DEPLOYMENT = """
[server]
cc = "bbr"
"""
SCENARIO = """
name = "two"
kind = "iperf"
duration_s = 5
trials = 2

[[conditions]]
label = "metered"
profile = "cell.toml"
deployment = "ends.toml"
path_policy = "backup"
deadline_marks = [3, 9]

[[conditions]]
label = "tcp"
profile = "two.toml"
deployment = "ends.toml"
"""
FILES = {"cell.toml": WIFI_CELL, "two.toml": TWO_PATHS, "ends.toml": DEPLOYMENT}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, text in {**FILES, "s.toml": SCENARIO}.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.fixture
def reads(monkeypatch, folder) -> Counter[str]:
    """Each read of a profile or deployment file of `folder`, by name."""
    seen: Counter[str] = Counter()
    read_text = Path.read_text

    def counted(self: Path, *args, **kwargs):
        if self.name in FILES and self.resolve().parent == folder.resolve():
            seen[self.name] += 1
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    return seen


class InProcessTrials:
    """Runs each trial as `mpstream trial RUN_DIR --key KEY` does (the plan read from run.json),
    here, its network refused: what a trial reads before its network is what is counted."""

    def __init__(self, reads: Counter[str]):
        self.reads = reads
        self.before: Counter[str] | None = None  # what the run had read by its first trial

    def run(self, run_dir, trials, started, finished) -> None:
        if self.before is None:
            self.before = Counter(self.reads)
        for trial in trials:
            started(trial.key)
            plan = load_plan(run_dir)
            finished(trial.key, run_trial(plan.scenario, plan.trial(trial.key), run_id="r",
                                          run_dir=run_dir, media_dir=None, topo_name="t"))


def test_a_two_condition_run_reads_each_profile_and_deployment_once_a_condition(
        folder, reads, monkeypatch):
    def refused(self):
        raise UserError("no network in a unit test")

    def preflight(scenario):  # what this machine lacks is no matter here; its reads are
        with contextlib.suppress(UserError):
            real_preflight(scenario)

    real_preflight = run_module.preflight
    trials = InProcessTrials(reads)
    monkeypatch.setattr(run_module, "preflight", preflight)
    monkeypatch.setattr(run_module, "trial_runner", lambda *a, **kw: trials)
    monkeypatch.setattr(EmulatedSite, "open", refused)
    out = folder / "run"
    statuses = run_module.run_scenario(load_scenario(folder / "s.toml"), out, progress=False)
    assert len(statuses) == 4
    # Each profile once (one condition each), the deployment once a condition; the trials, in
    # their processes, none.
    assert reads == {"cell.toml": 1, "two.toml": 1, "ends.toml": 2}
    assert trials.before == reads
    record = TrialRecord.model_validate(read_json(out / "trials" / "r00-metered" / "trial.json"))
    assert (record.transport, record.path_policy, record.deployment,
            record.metered_paths) == ("mptcp", "backup", "ends", [1])
    assert record.reason == "no network in a unit test"
    # The profile the topology would have built: the held path flagged backup.
    built = read_json(out / "trials" / "r00-metered" / "profile.json")
    assert [p["backup"] for p in built["paths"]] == [False, True]
    assert built["deployment"]["server"]["cc"] == "bbr"


def test_run_json_holds_what_each_condition_resolved_to_and_gives_it_back(folder, reads):
    scenario = load_scenario(folder / "s.toml")
    write_json(folder / RUN_JSON, plan_json(scenario, 1, None, False))
    written = json.loads((folder / RUN_JSON).read_text())["resolved"]
    metered = written["metered"]
    assert metered["transport"] == {"name": "mptcp", "scheduler": None}
    assert metered["path_policy"] == "backup"
    assert metered["deployment"]["name"] == "ends"
    assert metered["deployment"]["server"]["cc"] == "bbr"
    assert "deployment" not in metered["network"]  # the network alone, the deployment beside
    assert [p["name"] for p in metered["network"]["paths"]] == ["wifi", "cell"]
    assert metered["paths"] == {"held": [1], "metered": {"1": 8.0}}
    assert written["tcp"]["transport"]["name"] == "tcp"  # the profile's mode names it
    assert written["tcp"]["path_policy"] == "always"
    before = Counter(reads)
    plan = load_plan(folder)
    assert reads == before  # read back from run.json, no file again
    for cond in scenario.all_conditions():
        again = plan.scenario.resolved(cond)
        assert again == scenario.resolved(cond)
        assert again.network is not None and again.network.cc == "bbr"
        assert again.network.deployment is again.deployment
    back = plan.scenario.resolved(plan.scenario.conditions[0])
    assert back.path_policy == policy_named("backup") and back.paths.held == (1,)
    assert back.player.deadline_marks == DeadlineMarks(low_s=3, high_s=9)


def test_an_older_run_json_without_resolutions_is_resolved_as_it_loads(folder, reads):
    scenario = load_scenario(folder / "s.toml")
    old = plan_json(scenario, 1, None, False)
    del old["resolved"]
    write_json(folder / RUN_JSON, old)
    before = Counter(reads)
    plan = load_plan(folder)
    assert reads - before == Counter({"cell.toml": 1, "two.toml": 1, "ends.toml": 2})
    for cond in scenario.all_conditions():
        assert plan.scenario.resolved(cond) == scenario.resolved(cond)


def test_a_condition_names_its_deployments_policy_and_its_transport_sets_the_mode(folder):
    (folder / "held.toml").write_text('path_policy = "backup"\n')
    (folder / "s.toml").write_text(SCENARIO.replace('deployment = "ends.toml"\npath_policy = '
                                                    '"backup"', 'deployment = "held.toml"')
                                   + '\n[[conditions]]\nlabel = "named"\nprofile = "two.toml"'
                                     '\ntransport = "mptcp"\n')
    scenario = load_scenario(folder / "s.toml")
    metered, _, named = scenario.all_conditions()
    assert metered.path_policy == "backup"  # the deployment's, named as run.json names it
    assert scenario.resolved(metered).path_policy == policy_named("backup")
    # The transport a condition names sets its network's mode (a tcp profile run over MPTCP).
    assert scenario.resolved(named).network.mode == "mptcp"
    assert scenario.resolved(named).transport.name == "mptcp"


def test_a_resolution_that_does_not_hold_here_is_refused_naming_the_condition(folder):
    scenario = load_scenario(folder / "s.toml")
    run = plan_json(scenario, 1, None, False)
    run["resolved"]["tcp"]["network"]["paths"][0] = {"trace": "not-on-this-host"}
    write_json(folder / RUN_JSON, run)
    with pytest.raises(UserError, match=r"condition 'tcp': network: paths\.0\.trace: trace "
                                        r"file 'not-on-this-host' not found"):
        load_plan(folder)
