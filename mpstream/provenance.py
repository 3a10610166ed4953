"""Where and with what a measurement was made: the code's commit, the kernel, the machine's
cores and how busy it was. A run folder keeps this (run.json, trial.json) so that a figure
taken from it can say which code and which conditions produced it (docs/data/)."""

from __future__ import annotations

import os
import platform
import subprocess

from mpstream.paths import REPO_ROOT


def load_avg_1m() -> float | None:
    """The machine's one-minute load average (None where the system does not say)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def code_commit() -> str | None:
    """The commit of the checkout mpstream runs from, with `+dirty` when its tracked files
    differ from it; None outside a git checkout (an installed package)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True,
                                 text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if not head:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + ("+dirty" if dirty else "")


def environment() -> dict[str, object]:
    return {"commit": code_commit(), "kernel": platform.release(), "cpus": os.cpu_count(),
            "load_avg_1m": load_avg_1m()}
