"""What a run's trials left behind, found by name: each `mpstream trial` says first which
topology it builds (its trial.log's first line), so a test can look for exactly its own
namespaces while other runs on the machine have theirs."""

from __future__ import annotations

import json
import subprocess
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
