"""What a run's trials left behind, found by name: each `mpstream trial` says first which
topology it builds (its trial.log's first line), so a test can look for exactly its own
namespaces while other runs on the machine have theirs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def trial_topologies(run_dir: Path) -> set[str]:
    """The topology names the run's trials announced (finished or interrupted)."""
    names = set()
    trials = Path(run_dir) / "trials"
    for log in [*trials.glob("*/trial.log"), *trials.glob(".*.log")]:
        for line in log.read_text().splitlines():
            try:
                said = json.loads(line)
            except ValueError:
                continue
            if isinstance(said, dict) and "topology" in said:
                names.add(said["topology"])
    return names


def leftover_namespaces(run_dir: Path) -> list[str]:
    """Network namespaces of the run's trials that still exist."""
    prefixes = tuple(f"mps-{name}-" for name in trial_topologies(run_dir))
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return sorted(line.split()[0] for line in listing.splitlines()
                  if prefixes and line.startswith(prefixes))


def kill_when(argv: list[str], log: Path, ready: Callable[[], bool], what: str,
              timeout_s: float = 300) -> None:
    """Runs `argv` in a session of its own (its output in `log`) and SIGKILLs the whole session
    once `ready()` says so: the test's kill -9 of a run or a search part way."""
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while not ready():
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, f"{what} within {timeout_s:g} s"
            time.sleep(0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
