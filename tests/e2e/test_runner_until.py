"""`mpstream run --until`, end to end: a run that stops when sure, killed with SIGKILL after its
second trial and resumed without the option, keeps its trials and its rule (run.json), stops
its condition once it is sure after the floor of three trials, and its summary says why."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpstream.runner.layout import finished_keys
from tests.runs import kill_when, leftover_namespaces

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]  # make test-failed-run

MPSTREAM = str(Path(sys.executable).parent / "mpstream")


def test_a_killed_run_resumes_with_its_stopping_rule(tiny_media, tmp_path):
    scenario = tmp_path / "until-mini.toml"
    scenario.write_text(f"""
name = "until-mini"
seed = 4
duration_s = 4
players = ["dashjs"]
[media]
dir = "{tiny_media}"
[[conditions]]
label = "single"
profile = "thesis-bandwidth-single"
transport = "tcp"
""")
    out = tmp_path / "run"
    # The played time of a 4 s session varies by tenths of a second; the anytime interval at the
    # floor of 3 trials is 7.6 sd either side, so a 5 s width is met at the floor for any sd up
    # to 0.65 s (a 1 s width needed sd under 0.13 s, which a quiet run can miss).
    argv = [MPSTREAM, "run", str(scenario), "--until", "played_s:5", "--max-trials", "5",
            "--out", str(out), "--no-report"]
    kill_when(argv, tmp_path / "killed.log", lambda: len(finished_keys(out)) >= 2,
              "two trials did not finish")
    subprocess.run([MPSTREAM, "clean"], check=True, capture_output=True)
    kept = sorted(finished_keys(out))
    assert len(kept) >= 2
    assert json.loads((out / "run.json").read_text())["until"]["metric"] == "played_s"

    again = subprocess.run([MPSTREAM, "run", str(scenario), "--out", str(out), "--no-report"],
                           capture_output=True, text=True, timeout=400)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "single: sure after 3 trial(s)" in " ".join(again.stdout.split())
    assert sorted(finished_keys(out)) == ["r00-single-dashjs", "r01-single-dashjs",
                                          "r02-single-dashjs"]
    summary = tmp_path / "summary.json"
    subprocess.run([MPSTREAM, "report", str(out), "--summary", str(summary)], check=True,
                   capture_output=True)
    data = json.loads(summary.read_text())
    assert data["run"]["intervals"] == "anytime-valid"
    assert "--until played_s:5 --max-trials 5" in data["run"]["command"]
    (cond,) = data["conditions"]
    assert (cond["stop_reason"], cond["trials_ok"]) == ("sure", 3)
    assert leftover_namespaces(out) == []
