"""A trial over a trace pair (docs/mobile.md): its pair's traces are written for the trial, the
emulator replays them on the condition's paths (the sum on a `single_path = "sum"` condition's
one path), the record names the pair, and the traces' folder is gone when the trial is."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.scenarios import PHONE

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]  # make test-paths

PAIRS = """
seed = 1
window_s = 12
wifi_shapes = ["steady"]
wifi_rate_mbit = [8, 8]
[[cellular]]
trace = "TMobile-LTE-short"
offsets = 1
"""
SCENARIO = """
name = "pairs"
kind = "iperf"
trials = 1
seed = 2
duration_s = 3
pairs = "pairs.toml"
[[conditions]]
label = "mp"
profile = "phone.toml"
[[conditions]]
label = "sum"
profile = "phone.toml"
single_path = "sum"
"""


def _mpstream(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "mpstream.cli", *args], capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _pair_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("mps-traces-*"))


def test_a_trial_plays_its_pair_and_leaves_no_trace_behind(tmp_path, trace_store):
    for name, text in (("phone.toml", PHONE), ("pairs.toml", PAIRS), ("s.toml", SCENARIO)):
        (tmp_path / name).write_text(text)
    out = tmp_path / "run"
    _mpstream("run", str(tmp_path / "s.toml"), "--out", str(out), "--plan-only")
    run = json.loads((out / "run.json").read_text())
    (pair,) = run["pair_set"]["pairs"]
    before = _pair_folders()
    for key in run["plan"]:
        _mpstream("trial", str(out), "--key", key)
        tdir = out / "trials" / key
        record = json.loads((tdir / "trial.json").read_text())
        assert (record["status"], record["pair"]) == ("ok", pair["name"]), record["reason"]
        assert json.loads((tdir / "pair.json").read_text())["name"] == pair["name"]
        profile = json.loads((tdir / "profile.json").read_text())
        traces = [Path(p["trace"]).name for p in profile["paths"]]
        wanted = ["sum", "cellular"] if record["condition"]["label"] == "sum" else \
            ["wifi", "cellular"]
        assert traces == wanted
        assert profile["mode"] == ("tcp" if wanted[0] == "sum" else "mptcp")
        # The emulator replayed the pair's cellular window on path 1 and carried packets.
        stats = json.loads((tdir / "link-stats.json").read_text())
        assert stats["path1"]["b_to_a"]["packets_in"] > 0
    assert _pair_folders() <= before
