"""Where mpstream records what it sets up outside its own files, so that what a killed process
left can be found and removed by `mpstream clean`.

One root (`/run/mpstream`, or `$MPSTREAM_STATE_DIR`), one folder per kind of record:

- `topologies/`: one `NAME.json` per emulated topology (owner, namespaces, emulators) and a
  `NAME/` folder with its emulators' configurations, logs and counters (netem);
- `host-changes/`: one file per session that changed this host's network configuration (MPTCP
  endpoints, limits, policy rules and tables), each change written before it is made (hostnet);
- `clusters/`: one `NAME.json` per local cluster of `run --cluster local:N` (owner, namespaces,
  the hosts' init processes) and a `NAME/` folder with its token and logs (runner/cluster/local.py);
- `coupled-cc/`: the coupled congestion controls mpstream registered with the kernel and the
  topologies that use them (netem/coupled.py).

The parts import this module and not each other. The root is read when asked for, so a test
may point it elsewhere with the environment variable.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

ENV = "MPSTREAM_STATE_DIR"
DEFAULT_ROOT = Path("/run/mpstream")
TOPOLOGIES = "topologies"
HOST_CHANGES = "host-changes"
CLUSTERS = "clusters"
COUPLED_CC = "coupled-cc"
PATH_CAPS = "path-caps"
KINDS = (TOPOLOGIES, HOST_CHANGES, CLUSTERS, COUPLED_CC, PATH_CAPS)


def root() -> Path:
    return Path(os.environ.get(ENV) or DEFAULT_ROOT)


def kind_dir(kind: str, base: Path | None = None) -> Path:
    """The folder of one kind of record under `base` (the current root by default)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of state {kind!r}")
    return (base or root()) / kind


@contextlib.contextmanager
def locked(kind: str) -> Iterator[Path]:
    """The folder of one kind of record, made if needed, held under its lock for the block:
    what several mpstream processes share (a program loaded for all their topologies) is
    changed by one at a time."""
    folder = kind_dir(kind)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield folder
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def legacy_dir(kind: str, base: Path | None = None) -> Path:
    """Where versions before the single root kept a kind of record: topologies right in the
    root (`/run/mpstream/NAME.json`), host changes beside it (`/run/mpstream-hostnet/`).
    `mpstream clean` still reads there, so that what an older version left is cleaned too."""
    base = base or root()
    if kind == TOPOLOGIES:
        return base
    if kind == HOST_CHANGES:
        return base.with_name(base.name + "-hostnet")
    raise ValueError(f"unknown kind of state {kind!r}")
