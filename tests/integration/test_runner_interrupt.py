"""An iperf scenario run by the real command: interrupted mid-trial it leaves nothing behind
(no namespace, no process) and no trial.json for that trial; resumed, it does that trial and
only that one, and the report reads iperf3's figures and the kernel samples."""

import csv
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runs import leftover_namespaces, trial_topologies
from tests.scenarios import balanced_and_single
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

SCENARIO = balanced_and_single("iperf-mini", duration_s=4)


def _mpstream(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mpstream.cli", *args], **kw)


def _leftovers(out: Path) -> tuple[list[str], str]:
    """The run's namespaces still there, and iperf3 processes still in one of its namespaces
    (other runs on the machine have iperf3 on the same port in theirs)."""
    topologies = tuple(f"mps-{t}-" for t in trial_topologies(out))
    procs = subprocess.run(["pgrep", "-af", "iperf3"], capture_output=True,
                           text=True).stdout
    mine = []
    for line in procs.splitlines():
        pid = line.split()[0]
        netns = subprocess.run(["ip", "netns", "identify", pid], capture_output=True,
                               text=True).stdout.strip()
        if topologies and netns.startswith(topologies):
            mine.append(line)
    return leftover_namespaces(out), "\n".join(mine)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_tears_down_and_resumes(tmp_path, sig):
    scenario = tmp_path / "iperf-mini.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    proc = _mpstream("run", str(scenario), "--out", str(out), "--no-report",
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Interrupt mid-trial: once the trial's traffic runs (its iperf3 client).
    wait_until(lambda: "iperf3 -c" in _leftovers(out)[1], 120, "the trial's iperf3 client runs",
               0.2)
    proc.send_signal(sig)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "resume with" in output
    assert trial_topologies(out), "the interrupted trial did not say its topology"
    assert _leftovers(out) == ([], "")
    started = [d for d in (out / "trials").iterdir()]
    assert len(started) == 1 and not (started[0] / "trial.json").exists()

    resumed = _mpstream("run", str(scenario), "--out", str(out),
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = resumed.communicate(timeout=200)
    assert resumed.returncode == 0, output
    assert _leftovers(out) == ([], "")
    with (out / "report" / "trials.csv").open() as fh:
        trials = {r["condition"]: r for r in csv.DictReader(fh)}
    assert set(trials) == {"balanced", "single"}
    for cond, row in trials.items():
        assert row["status"] == "ok", row
        # 30 Mbit/s either way; the emulator on a busy machine gets most of it.
        assert 15 < float(row["throughput_mbps"]) < 31, row
        assert float(row["path0_bytes_share"]) > (0.99 if cond == "single" else 0.2)
    assert float(trials["balanced"]["path1_bytes_share"]) > 0.2
    assert os.path.getsize(out / "report" / "report.html") > 10_000
