"""The machine time long work says before it starts: trials × (the scenario's duration + the
overhead a trial was measured to take), that overhead measured again from the runs in docs/data,
a run's plan (resumed, capped by --until), a search's and a reproduction's; and `--dry-run`,
which prints the plan and runs and writes nothing."""

import json
import statistics
from datetime import datetime

import pytest

from mpstream.cli import main
from mpstream.errors import UserError
from mpstream.runner import run as run_module
from mpstream.runner.cost import TRIAL_OVERHEAD_S, Cost, machine_time
from mpstream.runner.layout import TRIAL_JSON, write_json
from mpstream.runner.reproduce import DATA_DIR, RunCommand, reproduction_cost
from mpstream.runner.run import plan_run
from mpstream.runner.scenario import load_scenario
from mpstream.runner.trial import failed_record
from mpstream.runner.tune.search import search_cost
from mpstream.runner.until import Until
from tests.scenarios import balanced_and_single

pytestmark = pytest.mark.unit

DEMO = DATA_DIR / "demo-2026-11-27.json"


def test_a_cost_is_its_trials_each_a_session_and_the_overhead():
    cost = Cost.of_trials(6, 5)
    assert cost.seconds == pytest.approx(6 * (5 + TRIAL_OVERHEAD_S))
    assert str(cost).startswith(f"about {machine_time(cost.seconds)} of machine time: 6 trial")
    assert cost.as_json()["machine_seconds"] == round(cost.seconds)
    assert [machine_time(s) for s in (52, 14 * 60, 3.2 * 3600)] == ["52 s", "14 min", "3.2 h"]


def _span_s(run: dict) -> float:
    return (datetime.fromisoformat(run["finished"])
            - datetime.fromisoformat(run["started"])).total_seconds()


def test_the_overhead_is_what_the_published_runs_took_a_trial_beyond_their_duration():
    """The median, over the runs of docs/data made on one machine (a cluster's spread its
    trials over hosts), of a run's span a trial less its scenario's duration."""
    beyond = []
    for path in sorted(DATA_DIR.glob("*.json")):
        run = json.loads(path.read_text())["run"]
        command = RunCommand.parse(run.get("command") or "")
        if command is None or run.get("of_run") or command.cluster or not run.get("trials"):
            continue
        try:
            duration_s = load_scenario(command.scenario).duration_s
        except UserError:
            continue  # a trace this machine has not fetched
        beyond.append(_span_s(run) / run["trials"] - duration_s)
    assert len(beyond) >= 20
    assert statistics.median(beyond) == pytest.approx(TRIAL_OVERHEAD_S, abs=0.5)


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text(balanced_and_single("two", trials=3, duration_s=4))
    return load_scenario(path)


def test_a_runs_plan_counts_the_trials_left_and_writes_nothing(scenario, tmp_path):
    out = tmp_path / "run"
    planned = plan_run(scenario, out)
    assert (len(planned.selected), len(planned.todo)) == (6, 6)
    assert planned.cost().seconds == pytest.approx(6 * (4 + TRIAL_OVERHEAD_S))
    assert not out.exists()
    first = planned.todo[0]
    (out / "trials" / first.key).mkdir(parents=True)
    write_json(out / "trials" / first.key / TRIAL_JSON,
               failed_record(scenario.kind, first, "timeout").model_dump(mode="json"))
    resumed = plan_run(scenario, out)
    assert len(resumed.todo) == 5 and first not in resumed.todo
    assert "(1 of 6 already done)" in resumed.describe()[0]
    assert len(plan_run(scenario, out, retry_failed=True).todo) == 6
    assert plan_run(scenario, out, only=["single"]).cost().trials == 3


def test_a_run_until_sure_counts_its_cap(scenario, tmp_path):
    planned = plan_run(scenario, tmp_path / "run", until=Until.parse("stall_count:1", 7))
    assert planned.cost().trials == 2 * 7
    assert "its cap, 7 trials a condition" in " ".join(planned.describe())


def test_run_dry_run_prints_the_plan_and_runs_nothing(scenario, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_module, "run_scenario", lambda *a, **kw: pytest.fail("it ran"))
    out = tmp_path / "run"
    main(["run", str(scenario.base_dir / "two.toml"), "--out", str(out), "--dry-run", "--json"])
    printed = capsys.readouterr()
    said = json.loads(printed.out)
    assert (said["dry_run"], said["to_run"], said["estimate"]["trials"]) == (True, 6, 6)
    assert said["estimate"]["machine_seconds"] == round(6 * (4 + TRIAL_OVERHEAD_S))
    assert "time: about" in printed.err
    assert not out.exists()


def test_a_reproduction_costs_what_the_published_run_took():
    run = json.loads(DEMO.read_text())["run"]
    same = reproduction_cost(DEMO, None, None)
    assert same is not None
    assert (same.trials, same.seconds) == (run["trials"], pytest.approx(_span_s(run)))
    per_round = run["trials"] // run["trials_per_condition"]
    assert reproduction_cost(DEMO, 2, None).trials == per_round * 2
    assert reproduction_cost(DEMO, None, Until.parse("stall_count:1", 4)).trials == per_round * 4
    assert reproduction_cost(DATA_DIR / "bench-trial-setup-2026-11-29.json", None, None) is None


def test_reproduce_dry_run_sums_the_summaries_and_runs_nothing(tmp_path, capsys):
    out = tmp_path / "reproduced"
    main(["reproduce", DEMO.stem, "bench-trial-setup-2026-11-29", "--out", str(out),
          "--dry-run", "--json"])
    said = json.loads(capsys.readouterr().out)
    assert said["summaries"]["bench-trial-setup-2026-11-29"] is None  # run by hand
    assert said["machine_seconds"] == said["summaries"][DEMO.stem]["machine_seconds"]
    assert not out.exists()


def test_a_search_counts_every_candidates_rounds_beside_its_baseline(tmp_path):
    path = tmp_path / "two-players.toml"
    path.write_text(balanced_and_single("two-players", kind="video", media_dir=tmp_path,
                                        duration_s=10).replace(
        'players = ["dashjs"]', 'players = ["dashjs", "hlsjs"]'))
    cost = search_cost(load_scenario(path), 20, 3)
    assert cost.trials == 20 * 3 * 2 * 2  # candidates × rounds × (it, baseline) × players
    assert cost.seconds_a_trial == pytest.approx(10 + TRIAL_OVERHEAD_S)
