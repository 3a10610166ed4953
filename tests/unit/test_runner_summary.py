"""A run's summary for docs/data/ (runner/report/summary.py, `mpstream report --summary`): per
condition the trials and each metric's n, mean, sd and interval as the report computed them,
and what made the run; from run folders built of the golden fixture's real trials."""

import csv
import json
import shutil

from click.testing import CliRunner

from mpstream.paths import REPO_ROOT
from mpstream.runner.cli import report
from mpstream.runner.report.summary import RunFolder
from mpstream.runner.report.summary import _command as command_of
from mpstream.runner.scenario import SCENARIOS_DIR
from tests.runfolder import make_run

ENV = {"commit": "0123abc", "kernel": "6.18.0", "cpus": 2, "load_avg_1m": 1.5}


def _run(tmp_path, rounds=3):
    run = make_run(tmp_path / "run", rounds=rounds)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "environment": ENV}))
    for i, trial in enumerate(sorted((run / "trials").glob("*/trial.json"))):
        record = json.loads(trial.read_text())
        trial.write_text(json.dumps({**record, "load_avg_1m": float(i), "elapsed_s": 30.0 + i}))
    return run


def test_report_summary_holds_the_reports_figures_and_the_runs_provenance(tmp_path):
    run = _run(tmp_path)
    out = tmp_path / "data" / "demo-x.json"
    result = CliRunner().invoke(report, [str(run), "--out", str(tmp_path / "rep"),
                                       "--summary", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    data = json.loads(text)
    assert data["run"]["id"] == "demo-x"
    assert data["run"]["command"] == "mpstream run demo --trials 3"
    assert data["run"]["environment"] == ENV
    assert data["run"]["load_avg_1m"] == {"min": 0.0, "median": 4.0, "max": 8.0}
    assert (data["run"]["trials"], data["run"]["ok"]) == (9, 9)
    assert data["run"]["pcap"] is False
    assert "captured packets" not in (tmp_path / "rep" / "report.html").read_text()
    assert [c["label"] for c in data["conditions"]] == ["balanced", "unbalanced", "single"]
    # the same figures as the report's conditions.csv, to six significant digits
    with (tmp_path / "rep" / "conditions.csv").open() as fh:
        rows = {(r["condition"], r["metric"]): r for r in csv.DictReader(fh)}
    for cond in data["conditions"]:
        assert cond["trials_ok"] == 3 and cond["trials_failed"] == 0
        startup = cond["metrics"]["startup_delay_ms"]
        row = rows[(cond["group"], "startup_delay_ms")]
        assert startup["n"] == int(row["n"]) == 3
        assert startup["mean"] == float(f"{float(row['mean']):.6g}")
        assert startup["ci95"] == [float(f"{float(row[k]):.6g}")
                                   for k in ("ci95_low", "ci95_high")]
        assert startup["unit"] == "ms"
        # each trial's headline figures and load, for a wide interval's reader
        assert [t["startup_delay_ms"] for t in cond["trials"]] == [startup["mean"]] * 3
        assert cond["metrics"]["load_avg_1m"]["n"] == 3
    assert sorted(t["load_avg_1m"] for c in data["conditions"] for t in c["trials"]) == \
        [float(i) for i in range(9)]
    # and each trial's own time, which a resumed run's span from first start to last end is not
    assert sorted(t["elapsed_s"] for c in data["conditions"] for t in c["trials"]) == \
        [30.0 + i for i in range(9)]
    # one line per metric, so that a diff of two summaries reads figure by figure
    assert sum('"startup_delay_ms": {' in line for line in text.splitlines()) == 3


def test_a_single_trial_has_no_interval_and_an_older_run_no_provenance(tmp_path):
    run = make_run(tmp_path / "run", rounds=1)
    out = tmp_path / "one.json"
    assert CliRunner().invoke(report, [str(run), "--out", str(tmp_path / "rep"),
                                     "--summary", str(out)]).exit_code == 0
    data = json.loads(out.read_text())
    assert data["run"]["environment"] is None and data["run"]["load_avg_1m"] is None
    startup = data["conditions"][0]["metrics"]["startup_delay_ms"]
    assert startup["n"] == 1 and startup["sd"] is None and startup["ci95"] == [None, None]


def test_a_condition_played_with_two_rules_counts_each_groups_own_trials(tmp_path):
    run = _run(tmp_path)
    for trial in (run / "trials").glob("r01-*/trial.json"):  # one round of three under BBA-0
        trial.write_text(json.dumps({**json.loads(trial.read_text()), "abr": "bba0"}))
    out = tmp_path / "summary.json"
    result = CliRunner().invoke(report, [str(run), "--out", str(tmp_path / "rep"),
                                       "--summary", str(out)])
    assert result.exit_code == 0, result.output
    conditions = json.loads(out.read_text())["conditions"]
    counts = {c["group"]: (c["trials_ok"], c["metrics"]["startup_delay_ms"]["n"])
              for c in conditions}
    assert counts["balanced/bba0"] == (1, 1)
    assert sorted(counts) == sorted(f"{c}/{a}" for c in ("balanced", "unbalanced", "single")
                                    for a in ("bba0", "default"))
    assert {n for g, n in counts.items() if g.endswith("/default")} == {(2, 2)}


def test_the_command_names_the_conditions_that_ran_and_the_cluster(tmp_path):
    run = _run(tmp_path)
    out = tmp_path / "summary.json"

    def command():
        result = CliRunner().invoke(report, [str(run), "--out", str(tmp_path / "rep"),
                                           "--summary", str(out)])
        assert result.exit_code == 0, result.output
        return json.loads(out.read_text())["run"]["command"]

    assert command() == "mpstream run demo --trials 3"  # every condition ran: none is named
    singles = list((run / "trials").glob("*-single-*"))
    assert len(singles) == 3
    for trial in singles:  # as if run with --condition balanced --condition unbalanced
        shutil.rmtree(trial)
    meta = json.loads((run / "run.json").read_text())
    # The plan keeps every condition (run.py); `chosen` is what the --conditions named.
    (run / "run.json").write_text(json.dumps({**meta, "cluster": "local:2",
                                              "chosen": ["unbalanced", "balanced"]}))
    assert command() == ("mpstream run demo --trials 3 --condition balanced "
                         "--condition unbalanced --cluster local:2")
    assert json.loads(out.read_text())["run"]["planned"] == 6


def test_the_command_names_a_scenario_by_its_file_unless_it_is_a_shipped_one(tmp_path):
    meta = json.loads((_run(tmp_path) / "run.json").read_text())

    def command(scenario_file):
        return command_of(RunFolder.of({**meta, "scenario_file": scenario_file}), [])

    assert command(str(SCENARIOS_DIR / "demo.toml")) == "mpstream run demo --trials 3"
    # A scenario checked in beside its summary: named from the repository's root, so that
    # `mpstream reproduce` reads the same file again.
    beside = REPO_ROOT / "docs" / "data" / "mptcp-tuned-front-2026-11-29.toml"
    assert command(str(beside)) == (
        "mpstream run docs/data/mptcp-tuned-front-2026-11-29.toml --trials 3")
    elsewhere = tmp_path / "mine.toml"
    assert command(str(elsewhere)) == "mpstream run demo --trials 3"  # not here: its name
    elsewhere.write_text((SCENARIOS_DIR / "demo.toml").read_text())
    assert command(str(elsewhere)) == f"mpstream run {elsewhere} --trials 3"


def test_a_run_stopped_part_way_keeps_the_whole_runs_command_and_says_how_far_it_got(tmp_path):
    # A long sweep is run in parts, each resuming the last: a summary written between parts has
    # trials of some conditions only, and must not read as a run of those conditions.
    run = _run(tmp_path)
    for trial in (run / "trials").glob("*-single-*"):
        shutil.rmtree(trial)
    for trial in (run / "trials").glob("r02-*"):
        shutil.rmtree(trial, ignore_errors=True)
    out = tmp_path / "summary.json"
    result = CliRunner().invoke(report, [str(run), "--out", str(tmp_path / "rep"),
                                       "--summary", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())["run"]
    assert data["command"] == "mpstream run demo --trials 3"
    assert (data["trials"], data["planned"]) == (4, 9)


def test_a_plans_conditions_come_in_the_scenarios_order_and_none_without_a_plan():
    from mpstream.runner.report.summary import RunFolder, _planned_conditions

    def planned(run):
        return _planned_conditions(RunFolder.of(run))

    spec = {"name": "x", "conditions": [{"label": "single"}, {"label": "single-tcp"},
                                        {"label": "1000k-bbr"}]}
    run = {"scenario_spec": spec, "plan": ["r00-1000k-bbr", "r00-single-tcp-dashjs"]}
    assert planned(run) == ["single-tcp", "1000k-bbr"]
    assert planned({"scenario_spec": spec}) is None  # an older run folder
    assert planned({**run, "chosen": ["1000k-bbr", "single"]}) == ["single", "1000k-bbr"]


def test_the_conditions_chosen_add_up_over_the_runs_into_a_folder(tmp_path):
    from mpstream.runner.run import chosen_conditions
    from mpstream.runner.scenario import expand_trials, parse_scenario

    sc = parse_scenario({"name": "x", "kind": "iperf", "trials": 2, "duration_s": 1,
                         "conditions": [{"label": label, "profile": "disjoint-2x10"}
                                        for label in ("a", "b", "c")]}, base_dir=tmp_path)
    plan = expand_trials(sc, 2)
    assert chosen_conditions(sc, plan, None, [], {}) is None  # no --condition: all of them
    assert chosen_conditions(sc, plan, None, ["c", "a"], {}) == ["a", "c"]
    assert chosen_conditions(sc, plan, {"chosen": ["b"]}, ["c"], {}) == ["b", "c"]
    assert chosen_conditions(sc, plan, {"chosen": None}, ["c"], {}) is None  # once all, all
    # A folder from before `chosen` was kept: the conditions its finished trials are of.
    done = {t.key: "ok" for t in plan if t.condition.label == "b"}
    assert chosen_conditions(sc, plan, {"plan": []}, ["c"], done) == ["b", "c"]


def test_a_run_that_captured_packets_says_so(tmp_path):
    run = _run(tmp_path)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "pcap": True}))
    out = tmp_path / "summary.json"
    result = CliRunner().invoke(report, [str(run), "--out", str(tmp_path / "rep"),
                                       "--summary", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["run"]["pcap"] is True
    assert "This run captured packets" in (tmp_path / "rep" / "report.html").read_text()


def test_every_checked_in_summary_is_one_model_written_back_byte_for_byte():
    # The report's, the benchmarks' and the scripts' summaries are one model: each file in
    # docs/data/ reads into it and is written again as it is, field order and all.
    from mpstream.paths import REPO_ROOT
    from mpstream.runner.report.summary import RunSummary, dumps

    files = sorted((REPO_ROOT / "docs" / "data").glob("*.json"))
    assert files
    for path in files:
        text = path.read_text()
        assert dumps(RunSummary.model_validate_json(text)) == text, path.name
