"""Temporary folders of a session, named after its process (mps-<purpose>-<pid>-XXXX), so that
`mpstream clean` can tell the folder of a killed session (its process gone) from a live one's:
a kill -9 runs no `finally`, and a browser profile or a page's media can be hundreds of MB."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from mpstream.proc import pid_alive

# What each kind of folder holds, as `clean` says it.
PURPOSES = {
    "carrier": "the QUIC hop's files",
    "chromium": "Chromium's own temporary files",
    "play": "the trial folder of `play` (its servers', browser's and samplers' files)",
    "play-url": "the player page and collector of `play --url`",
    "firefox": "a Firefox profile",
    "server": "the server stack's files: nginx's, the collector's database",
    "traces": "a trial's trace pair: its WiFi, cellular and summed traces",
}
_NAME = re.compile(r"^mps-(" + "|".join(map(re.escape, PURPOSES)) + r")-(\d+)-")


def _prefix(purpose: str) -> str:
    if purpose not in PURPOSES:
        raise ValueError(f"no temporary folder purpose {purpose!r} (known: {', '.join(PURPOSES)})")
    return f"mps-{purpose}-{os.getpid()}-"


def session_tempdir(purpose: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for this process, removed when the context ends."""
    return tempfile.TemporaryDirectory(prefix=_prefix(purpose))


def session_mkdtemp(purpose: str) -> Path:
    """A temporary folder for this process that the caller removes (one that outlives a `with`
    block, as a server stack's between its start and stop)."""
    return Path(tempfile.mkdtemp(prefix=_prefix(purpose)))


def session_folders(purpose: str, pid: int, root: Path | None = None) -> list[Path]:
    """The temporary folders of this purpose that process `pid` made."""
    return sorted(Path(root or tempfile.gettempdir()).glob(f"mps-{purpose}-{pid}-*"))


def clean_stale_tempdirs(root: Path | None = None,
                         purposes: tuple[str, ...] | None = None) -> list[str]:
    """Removes the temporary folders (of the given purposes, or of all) of sessions whose
    process is gone; what it removed."""
    removed = []
    for folder in sorted(Path(root or tempfile.gettempdir()).glob("mps-*-*")):
        m = _NAME.match(folder.name)
        if purposes is not None and m and m.group(1) not in purposes:
            continue
        if m and folder.is_dir() and not pid_alive(int(m.group(2))):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(f"removed: {folder} ({PURPOSES[m.group(1)]} of a killed session)")
    return removed
