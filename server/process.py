"""Starting and stopping the server's daemons so that none outlives mpstream.

Each daemon gets its own process group (Ctrl-C in a terminal reaches mpstream, which then stops
them in order) and a parent-death signal (if mpstream itself is killed, the kernel sends SIGTERM
to the daemon's master, which shuts its workers down). `ip netns exec` and `mptcpize run` both
exec in place, so the pid we hold is the daemon's master's own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from mpstream.proc import die_with_parent


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
            preexec_fn=die_with_parent,
        )
    finally:
        out.close()


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
