"""A real `mpstream run` killed with SIGKILL mid-trial, the runner and everything in its process
group at once, leaves its topology behind (namespaces, emulators, record); `mpstream clean`
removes all of it; the same command then resumes and completes every trial.

The run's namespaces are told apart from other programs' by comparing `ip netns list` before
and during the run and keeping those that hold a process of the run's session, so the test does
not depend on how the runner names topologies or whether a trial runs in a child process."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpstream.netem.teardown import CORE_ROLES, EMULATOR, state_dir
from mpstream.proc import pid_alive
from tests.integration.test_runner_interrupt import SCENARIO  # two iperf conditions

pytestmark = pytest.mark.timeout(400)

MPSTREAM = str(Path(sys.executable).parent / "mpstream")


def mps_namespaces() -> set[str]:
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listing.splitlines() if line.startswith("mps-")}


def netns_pids(ns: str) -> set[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return {int(tok) for tok in out.split()}


def session_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def is_emulator(pid: int) -> bool:
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name == EMULATOR.name
    except OSError:
        return False


def emulators_of(stem: str) -> set[int]:
    """Emulator processes whose command line names the topology, wherever they run."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and is_emulator(int(entry.name)):
            try:
                argv = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if f"/{stem}/" in argv:
                found.add(int(entry.name))
    return found


def running_trial(before: set[str], session: int) -> str | None:
    """The topology stem of the run's trial once it is really running: its three namespaces
    exist, its emulators run in the link namespace and a process of the run's session (the
    iperf3 server) in the server namespace."""
    stems = {ns[len("mps-"):].rpartition("-")[0] for ns in mps_namespaces() - before}
    for stem in stems:
        names = {role: f"mps-{stem}-{role}" for role in CORE_ROLES}
        if not set(names.values()) <= mps_namespaces():
            continue
        if any(is_emulator(p) for p in netns_pids(names["link"])) and any(
                session_of(p) == session for p in netns_pids(names["server"])):
            return stem
    return None


def test_kill_9_of_a_run_then_clean_then_resume(tmp_path):
    scenario = tmp_path / "iperf-mini.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    argv = [MPSTREAM, "run", str(scenario), "--out", str(out), "--no-report"]
    before = mps_namespaces()
    with (tmp_path / "killed.log").open("w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    stem = None
    try:
        deadline = time.monotonic() + 120
        while stem is None:
            assert proc.poll() is None, (tmp_path / "killed.log").read_text()
            assert time.monotonic() < deadline, "no trial started within 120 s"
            time.sleep(0.1)
            stem = running_trial(before, proc.pid)
        namespaces = [f"mps-{stem}-{role}" for role in CORE_ROLES]
        pids = set().union(*(netns_pids(ns) for ns in namespaces))
        emulators = emulators_of(stem)
        record, folder = state_dir() / f"{stem}.json", state_dir() / stem
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and all its children at once
        proc.wait()
        check_clean_then_resume(argv, out, stem, namespaces, pids, emulators, record, folder)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if stem is not None:  # a failed check leaves nothing of the run on the machine
            subprocess.run([MPSTREAM, "netem", "clean", stem], capture_output=True, timeout=120)


def check_clean_then_resume(argv, out, stem, namespaces, pids, emulators, record, folder):
    # Nothing could tear down: the test is meaningful only if something is left.
    assert set(namespaces) <= mps_namespaces()
    assert emulators and all(pid_alive(p) for p in emulators)
    assert record.is_file() and folder.is_dir()

    done = subprocess.run([MPSTREAM, "clean"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"removed topology {stem}" in done.stdout, done.stdout
    assert not set(namespaces) & mps_namespaces()
    assert not [p for p in pids | emulators if pid_alive(p)]
    assert not emulators_of(stem)
    assert not record.exists() and not folder.exists()
    assert not list(state_dir().glob(f".{stem}.*"))

    resumed = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                             start_new_session=True)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    plan = json.loads((out / "run.json").read_text())["plan"]
    trials = [json.loads(p.read_text()) for p in (out / "trials").glob("*/trial.json")]
    assert sorted(t["key"] for t in trials) == sorted(plan) and len(plan) == 2
    assert len(list((out / "trials").iterdir())) == len(plan)
    assert all(t["status"] == "ok" for t in trials), [t.get("reason") for t in trials]
