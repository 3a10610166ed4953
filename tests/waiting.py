"""Waiting for a state rather than sleeping for a time that is usually enough: on a loaded
machine a fixed sleep is sometimes too short, and always too long otherwise."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mpstream.netem.teardown import netns_pids

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout_s: float, what: str,
               interval_s: float = 0.05) -> T:
    """Calls `condition` until it returns something true, and returns that; fails the test,
    saying it was waiting until `what`, when `timeout_s` pass first."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout_s:g} s until {what}, in vain")
        time.sleep(interval_s)


def command_lines(netns: str) -> list[str]:
    """The command lines of the processes in network namespace `netns` (none when it is gone)."""
    lines = []
    for pid in netns_pids(netns):
        with contextlib.suppress(OSError):  # it ended meanwhile
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            lines.append(" ".join(arg.decode(errors="replace") for arg in argv).strip())
    return lines


def listening(netns: str, port: int) -> bool:
    """A TCP socket listens on `port` in network namespace `netns` (ss, in that namespace)."""
    done = subprocess.run(["ip", "netns", "exec", netns, "ss", "-Hltn", f"sport = :{port}"],
                          capture_output=True, text=True)
    return done.returncode == 0 and bool(done.stdout.strip())


def descendants(pid: int) -> dict[int, str]:
    """The live descendants of `pid` (in any namespace) with their command lines."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):  # it ended meanwhile
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {}, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            found[child] = " ".join(arg.decode(errors="replace") for arg in argv).strip()
        todo += children.get(child, [])
    return found


def ctrl_c(proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """What a terminal's Ctrl-C does to `proc`'s process group (SIGINT), then its exit waited
    for; killed when it does not exit in time, so that a failing test leaves nothing."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def namespaces_of(name: str) -> list[str]:
    """The network namespaces a topology called `name` left (mps-NAME-...)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(f"mps-{name}-")]
