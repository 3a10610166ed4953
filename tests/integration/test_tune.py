"""A real `mpstream tune` of two candidates, one trial each beside the baseline: killed with
SIGKILL once its first candidate is finished, cleaned with `mpstream clean`, then run again
with the same folder, it evaluates only the second, and writes its front and presets, which
a scenario's condition accepts unchanged."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from mpstream.deployment import load_deployment
from tests.runs import kill_when

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]

MPSTREAM = str(Path(sys.executable).parent / "mpstream")
SCENARIO = """
name = "tune-mini"
trials = 1
seed = 3
duration_s = 6
players = ["dashjs"]
baseline = "tcp"

[media]
source = "synthetic"
ladder = "tiny"
segment_duration = 2
duration = 12

[[conditions]]
label = "tcp"
profile = "thesis-bandwidth-single"
transport = "tcp"

[[conditions]]
label = "mptcp"
profile = "thesis-bandwidth-unbalanced"
transport = "mptcp"
"""
SPACE = """
description = "two congestion controls, two slow starts after idle"
[settings]
"server.cc" = ["cubic", "bbr"]
"server.sysctls.net.ipv4.tcp_slow_start_after_idle" = [0, 1]
"""


def _evaluated(out: Path) -> list[dict[str, str]]:
    path = out / "candidates.csv"
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_killed_search_resumes_without_repeating_a_finished_candidate(tmp_path):
    (tmp_path / "tune-mini.toml").write_text(SCENARIO)
    (tmp_path / "space.toml").write_text(SPACE)
    out = tmp_path / "tune"
    argv = [MPSTREAM, "tune", str(tmp_path / "tune-mini.toml"), "--space",
            str(tmp_path / "space.toml"), "--budget", "2", "--trials", "1", "--out", str(out)]
    kill_when(argv, tmp_path / "killed.log", lambda: len(_evaluated(out)) >= 1,
              "no candidate finished")
    first = _evaluated(out)[0]
    finished = {p: p.stat().st_mtime_ns for p in (out / "trials").glob("*/trial.json")
                if p.parent.name.split("-", 1)[1].startswith(first["label"])}
    assert len(finished) == 2  # the candidate's trial and its baseline copy's

    cleaned = subprocess.run([MPSTREAM, "clean"], capture_output=True, text=True, timeout=120)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    resumed = subprocess.run(argv, capture_output=True, text=True, timeout=400,
                             start_new_session=True)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]

    rows = _evaluated(out)
    assert [r["n"] for r in rows] == ["1", "2"] and rows[0]["label"] == first["label"]
    assert {p: p.stat().st_mtime_ns for p in finished} == finished  # not run again
    assert all(r["state"] in ("complete", "pruned") for r in rows), rows
    with (out / "front.csv").open(newline="") as fh:
        front = list(csv.DictReader(fh))
    assert front and {"startup_ratio", "share_ratio", "longest_stall_ms"} <= set(front[0])
    presets = sorted((out / "presets").glob("*.toml"))
    assert [p.stem for p in presets] == sorted(r["label"] for r in front)
    preset = load_deployment(presets[0])
    assert preset.server.cc in ("cubic", "bbr")
    assert (out / "front.png").is_file()
    reported = subprocess.run([MPSTREAM, "report", str(out)], capture_output=True, text=True,
                              timeout=120)
    assert reported.returncode == 0, reported.stderr
    html = (out / "report" / "report.html").read_text()
    assert "Pareto front" in html and front[0]["label"] in html
    # A front member is a deployment a scenario's condition takes as it is.
    checked = subprocess.run([MPSTREAM, "deployments", str(presets[0])], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0 and "server" in checked.stdout, checked.stderr
