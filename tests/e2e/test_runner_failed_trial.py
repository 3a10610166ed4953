"""`mpstream run` whose one trial fails, end to end: paths too slow for the player page to load
its player library. The run exits 1 (done, something failed), keeps the trial's record, says
why in a person's words (how much of the player library could have arrived), and with --json
prints one JSON document on standard output."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runs import leftover_namespaces
from tests.scenarios import scenario_head

# About 90 s, most of it the page's wait for its player (45 s) and the worker's start.
pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]

MPSTREAM = str(Path(sys.executable).parent / "mpstream")
# Two paths of 32 kbit/s: the page (index.html, main.js: 25 KB) loads in seconds, its 861 KB
# player library would take minutes; the trial fails when the page's wait for it ends.
TOO_SLOW = """
[[conditions]]
label = "too-slow"
profile = "thesis-bandwidth-balanced"
set = { "paths.*.rate" = "32kbit" }
"""


def test_a_run_whose_trial_failed_exits_1_and_says_why(tiny_media, tmp_path):
    scenario = tmp_path / "too-slow.toml"
    scenario.write_text(scenario_head("too-slow", kind="video", seed=27, duration_s=2,
                                      media_dir=tiny_media) + TOO_SLOW)
    out = tmp_path / "run"
    done = subprocess.run([MPSTREAM, "run", str(scenario), "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 1, done.stderr[-2000:]
    said = json.loads(done.stdout)  # the whole of standard output: one document
    (record,) = [json.loads(p.read_text()) for p in out.glob("trials/*/trial.json")]
    assert record["status"] == "failed"
    assert (said["planned"], said["ok"], said["failed"]) == (1, 0, 1)
    assert said["failed_trials"] == [{"key": record["key"], "reason": record["reason"]}]
    assert said["report"] == str(out / "report" / "report.html")
    assert said["estimate"]["trials"] == 1
    # The reason says what happened: how much of the page's player library could have arrived.
    said_why = re.fullmatch(
        r"player: the player page did not load its player library within 45 s: at most (\d+) "
        r"KB of its (\d+) KB scripts? (?:/player/chunks/\S+\.js, )*/player/chunks/dashjs-\S+\.js"
        r"(?:, /player/chunks/\S+\.js)* arrived, the client's paths "
        r"receiving (\d+) KB in all", record["reason"])
    assert said_why, record["reason"]
    arrived, size, received = map(int, said_why.groups())
    assert arrived < received < size
    assert "collector" not in record["reason"]
    assert "time:" in done.stderr and "machine time" in done.stderr
    assert leftover_namespaces(out) == []
