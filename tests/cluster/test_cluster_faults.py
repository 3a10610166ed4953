"""Faults during a `--cluster local:2` run: a host's Ray processes killed mid-trial (its trial
runs again on the other host), the run stopped with SIGTERM (nothing left, resumable), and the
coordinator killed with -9 (`mpstream clean` removes the cluster; the same command resumes).
Every time each trial ends up in the run folder exactly once."""

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from mpstream.netem.teardown import netns_pids
from mpstream.runner.layout import load_trials
from mpstream.runner.scenario import expand_trials, load_scenario
from tests.waiting import descendants, wait_until

from .conftest import iperf_scenario, leftovers, mpstream

pytestmark = pytest.mark.timeout(600)

RAY = re.compile(r"raylet|ray::|log_monitor|dashboard|runtime_env")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _trial_running(run_pid: int, host: str = "h*") -> tuple[str, str, int] | None:
    """(host namespace, key, pid) of a trial running on the run's local cluster."""
    for ns in sorted(Path("/run/netns").glob(f"mpsc-c{run_pid}-{host}")):
        for pid in netns_pids(ns.name):
            found = re.search(r"mpstream\.cli trial \S+ --key (\S+)", _cmdline(pid))
            if found:
                return ns.name, found.group(1), pid
    return None


def _mid_trial(run_pid: int, host: str = "h*") -> tuple[str, str]:
    """Waits until a trial of the run carries its traffic (its iperf3 client runs): (host
    namespace, key) of that trial."""
    def traffic() -> tuple[str, str] | None:
        trial = _trial_running(run_pid, host)
        if trial and any("iperf3 -c" in line for line in descendants(trial[2]).values()):
            return trial[:2]
        return None
    return wait_until(traffic, 120, "a trial's iperf3 client runs", 0.3)


def _start(scenario: Path, out: Path, *more: str) -> subprocess.Popen:
    return mpstream("run", str(scenario), "--cluster", "local:2", "--out", str(out),
                    "--no-report", *more, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True)


def _finish(proc: subprocess.Popen) -> str:
    output, _ = proc.communicate(timeout=400)
    assert proc.returncode == 0, output
    return " ".join(output.split())


def _each_trial_once(scenario: Path, out: Path) -> dict:
    plan = [t.key for t in expand_trials(load_scenario(scenario))]
    trials = load_trials(out)
    assert sorted(t.key for t in trials) == sorted(plan)
    assert sorted(p.name for p in (out / "trials").iterdir()) == sorted(plan)
    assert all(t.ok for t in trials), [(t.key, t.record.reason) for t in trials]
    return {t.key: t for t in trials}


@pytest.mark.parametrize("balanced", [False, True], ids=["any-host", "balance-hosts"])
def test_a_host_whose_ray_dies_mid_trial_has_its_trial_run_on_the_other(tmp_path, balanced):
    scenario = iperf_scenario(tmp_path, duration=10)
    out = tmp_path / "run"
    proc = _start(scenario, out, *(["--balance-hosts"] if balanced else []))
    netns, key = _mid_trial(proc.pid, "h1")
    killed = [pid for pid in netns_pids(netns) if RAY.search(_cmdline(pid))]
    assert killed
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    output = _finish(proc)
    trials = _each_trial_once(scenario, out)
    assert trials[key].record.host == "local-2", (key, trials[key].record)
    assert "4 ok, 0 failed" in output
    if balanced:  # round 0 was local-1's: what was left of it went to local-2
        assert trials[key].record.round == 0
        assert {t.record.host for t in trials.values() if t.record.round == 1} == {"local-2"}
        assert "host local-1 is gone" in (out / "cluster.log").read_text()


def test_sigterm_stops_the_run_and_its_cluster_and_the_run_resumes(tmp_path):
    scenario = iperf_scenario(tmp_path, duration=6)
    out = tmp_path / "run"
    proc = _start(scenario, out)
    _mid_trial(proc.pid)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=200)
    assert proc.returncode == 130, output
    assert "resume with" in output
    assert leftovers() == []
    assert len(load_trials(out)) < 4
    _finish(_start(scenario, out))
    _each_trial_once(scenario, out)


def test_a_killed_coordinator_is_cleaned_up_and_its_run_resumes(tmp_path):
    scenario = iperf_scenario(tmp_path, duration=6)
    out = tmp_path / "run"
    proc = _start(scenario, out)
    wait_until(lambda: len(load_trials(out)) >= 1, 200, "a trial is done", 0.3)
    kept = {t.key: (t.dir / "trial.json").stat().st_mtime_ns for t in load_trials(out)}
    proc.kill()
    proc.communicate(timeout=30)
    assert leftovers(), "the cluster outlives its coordinator until `mpstream clean`"
    clean = mpstream("clean", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said, _ = clean.communicate(timeout=200)
    assert clean.returncode == 0, said
    assert f"removed local cluster c{proc.pid}" in said, said
    assert leftovers() == []
    _finish(_start(scenario, out))
    trials = _each_trial_once(scenario, out)
    for key, mtime in kept.items():
        assert (trials[key].dir / "trial.json").stat().st_mtime_ns == mtime
