"""Exit codes, the same for every command (docs/commands.md#exit-codes): the table there is the
one the program uses, and what happened maps to it: done and good 0, done with a failure 1
(a trial's record kept, a figure that disagrees, a check), refused before anything ran 2,
interrupted 130; with --json, one JSON document on standard output."""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import click
import pytest

from mpstream import cli as cli_module
from mpstream import doctor as doctor_module
from mpstream.cli import main
from mpstream.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED, UserError
from mpstream.paths import REPO_ROOT
from mpstream.runner import cli as runner_cli
from mpstream.runner import reproduce as reproduce_module
from mpstream.runner import run as run_module
from mpstream.runner import trial as trial_module
from mpstream.runner.layout import TRIAL_JSON, write_json
from mpstream.runner.scenario import expand_trials
from mpstream.runner.trial import failed_record
from tests.scenarios import balanced_and_single

pytestmark = pytest.mark.unit


def exit_code(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as ended:
        return ended.code if isinstance(ended.code, int) else EXIT_FAILED
    return EXIT_OK


def test_the_docs_table_is_the_codes_the_program_uses():
    text = (REPO_ROOT / "docs" / "commands.md").read_text()
    section = text.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    codes = [int(code) for code in re.findall(r"^\| (\d+) \|", section, flags=re.M)]
    assert codes == [EXIT_OK, EXIT_FAILED, EXIT_REFUSED, EXIT_INTERRUPTED]


@click.command()
@click.argument("what")
def happen(what: str) -> None:
    if what == "failed":
        raise UserError("a trial failed", exit_code=EXIT_FAILED)
    if what == "refused":
        raise UserError("no such scenario")
    if what == "interrupted":
        raise KeyboardInterrupt


@pytest.mark.parametrize(("argv", "code"), [
    (["good"], EXIT_OK), (["failed"], EXIT_FAILED), (["refused"], EXIT_REFUSED),
    ([], EXIT_REFUSED), (["good", "--no-such-option"], EXIT_REFUSED),
    (["interrupted"], EXIT_INTERRUPTED),
])
def test_what_happened_is_the_exit_code(monkeypatch, argv, code):
    monkeypatch.setitem(cli_module.SUBCOMMANDS, "happen", f"{__name__}:happen")
    assert exit_code(["happen", *argv]) == code


@pytest.fixture
def one_trial_scenario(tmp_path) -> Path:
    path = tmp_path / "one.toml"
    path.write_text(balanced_and_single("one", duration_s=2))
    return path


def test_a_run_whose_trial_failed_exits_1_keeping_its_record(one_trial_scenario, tmp_path,
                                                            monkeypatch, capsys):
    """The trial's record stays, the report is still made, and --json prints one document with
    each failed trial's key and reason."""
    reason = "player: the player page did not load its player library within 45 s"

    def run_scenario(scenario, out_dir, **_):
        statuses = {}
        for planned in expand_trials(scenario):
            ok = planned.condition.label == "single"
            record = failed_record(scenario.kind, planned, "" if ok else reason)
            record.status = "ok" if ok else "failed"
            (out_dir / "trials" / planned.key).mkdir(parents=True)
            write_json(out_dir / "trials" / planned.key / TRIAL_JSON,
                       record.model_dump(mode="json"))
            statuses[planned.key] = record.status
        return statuses

    reports = []
    monkeypatch.setattr(run_module, "run_scenario", run_scenario)
    monkeypatch.setattr(runner_cli, "_report", lambda run_dir, out, console: reports.append(
        run_dir) or SimpleNamespace(html=run_dir / "report" / "report.html"))
    out = tmp_path / "run"
    assert exit_code(["run", str(one_trial_scenario), "--out", str(out), "--json"]) == 1
    said = json.loads(capsys.readouterr().out)
    assert reports == [out]
    assert (said["planned"], said["ran"], said["ok"], said["failed"]) == (2, 2, 1, 1)
    assert said["failed_trials"] == [{"key": "r00-balanced", "reason": reason}]
    assert said["report"] == str(out / "report" / "report.html")
    assert (out / "trials" / "r00-balanced" / TRIAL_JSON).is_file()


def test_a_run_whose_trials_all_passed_exits_0(one_trial_scenario, tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "run_scenario", lambda scenario, out_dir, **_: {})
    assert exit_code(["run", str(one_trial_scenario), "--out", str(tmp_path / "run"),
                      "--no-report"]) == EXIT_OK


def test_a_trial_exits_1_when_its_record_says_failed(tmp_path, monkeypatch):
    monkeypatch.setattr(trial_module, "load_plan", lambda run_dir: None)
    for status, code in (("failed", EXIT_FAILED), ("ok", EXIT_OK)):
        monkeypatch.setattr(trial_module, "one_trial",
                            lambda *a, status=status: SimpleNamespace(status=status))
        assert exit_code(["trial", str(tmp_path), "--key", "r00-a"]) == code


@pytest.mark.parametrize(("disagree", "failed", "code"), [
    (0, 0, EXIT_OK), (1, 0, EXIT_FAILED), (0, 2, EXIT_FAILED)])
def test_reproduce_exits_1_when_a_figure_disagrees_or_a_trial_failed(
        tmp_path, monkeypatch, capsys, disagree, failed, code):
    said = {"figures": 3, "agree": 3 - disagree, "disagree": disagree, "failed_trials": failed}
    monkeypatch.setattr(reproduce_module, "reproduce", lambda *a, **kw: said)
    assert exit_code(["reproduce", "demo-2026-11-27", "--out", str(tmp_path), "--json"]) == code
    printed = json.loads(capsys.readouterr().out)
    assert (printed["disagree"], printed["failed_trials"]) == (disagree, failed)


def test_doctor_exits_1_when_a_required_thing_is_missing_and_says_each_fix(monkeypatch,
                                                                          capsys):
    Finding = doctor_module.Finding
    found = [Finding("build", "Python", True, "3.11"),
             Finding("player", "Firefox (HEVC)", False, "not found", "apt-get install "
                     "firefox-esr", required=False)]
    monkeypatch.setattr(doctor_module, "diagnose", lambda: found)
    assert exit_code(["doctor", "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["ok"] is True
    found.append(Finding("host", "root", False, "uid 1000", "run it with sudo"))
    assert exit_code(["doctor", "--json"]) == EXIT_FAILED
    said = json.loads(capsys.readouterr().out)
    assert said["ok"] is False
    assert [(c["name"], c["ok"], c["required"], c["fix"]) for c in said["checks"]][1:] == [
        ("Firefox (HEVC)", False, False, "apt-get install firefox-esr"),
        ("root", False, True, "run it with sudo")]
