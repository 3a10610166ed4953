"""Starting and stopping the server's daemons so that none outlives mpstream.

Each daemon gets its own process group (Ctrl-C in a terminal reaches mpstream, which then stops
them in order) and a parent-death signal (if mpstream itself is killed, the kernel sends SIGTERM
to the daemon's master, which shuts its workers down). `ip netns exec` and `mptcpize run` both
exec in place, so the pid we hold is the daemon's master's own.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def netns_prefix(netns: str | None) -> list[str]:
    return ["ip", "netns", "exec", netns] if netns else []


def spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    out = log.open("ab")
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    finally:
        out.close()


def stop(proc: subprocess.Popen, graceful: signal.Signals, timeout: float) -> None:
    """Ask the master to stop with `graceful`, wait, then SIGKILL whatever of its process group
    is left (workers included)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(graceful)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(3)
    # Workers share the master's group: wait briefly for them to exit, then force.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _group_has_members(proc.pid):
        time.sleep(0.05)
    if _group_has_members(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(3)


def _group_has_members(pgid: int) -> bool:
    """Any live (non-zombie) process in this process group?"""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            return True
    return False


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
