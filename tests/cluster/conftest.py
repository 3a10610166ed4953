"""Trials on a local Ray cluster (`run --cluster local:N`): real Ray, real namespaces. After
every test nothing of a cluster is left: no namespace, no sandbox mount, no Ray process, no
record and no Ray session in /tmp."""

import subprocess
import sys
from pathlib import Path

import pytest

from mpstream.runner.cluster import local
from tests.scenarios import balanced_and_single

# Ray's programs as they show in the process table (the workers rename themselves ray::…).
RAY_PROCESSES = r"raylet|gcs_server|ray::|ray/dashboard|ray/autoscaler|log_monitor.py"



def iperf_scenario(folder: Path, duration: float = 4) -> Path:
    path = folder / "iperf-cluster.toml"
    path.write_text(balanced_and_single("iperf-cluster", trials=2, seed=3, duration_s=duration))
    return path


def mpstream(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mpstream.cli", *args], **kw)


def leftovers() -> list[str]:
    found = local.leftovers()
    procs = subprocess.run(["pgrep", "-af", RAY_PROCESSES], capture_output=True, text=True)
    found += [f"process {line}" for line in procs.stdout.splitlines()]
    for info in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            text = info.read_text()
        except OSError:
            continue
        if " mpstream-run " in text:
            found.append(f"a sandbox's mounts ({info.parent})")
    if Path("/tmp/ray").exists():
        found.append("/tmp/ray")
    return found


@pytest.fixture(autouse=True)
def nothing_left_behind():
    before = leftovers()
    assert before == [], f"left by something earlier: {before}"
    yield
    assert leftovers() == []
