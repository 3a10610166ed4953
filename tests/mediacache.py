"""The test sessions' encoded media, kept outside the clone between test runs, as the other
builds are ($MPSTREAM_CACHE, default /var/cache/mpstream): every `make test-*` target is a test
session of its own, and each used to encode the same `tiny` ladder again (17 s here).

An entry is named by what made it: the encoder's and the manifests' source files, the ffmpeg
that encoded it and the arguments. A change to any of them makes a new entry, so a cached tree
is never one the current code would not have written. Each session gets a copy (tests may alter
what they are given); the cache keeps the few newest entries.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The code whose output the tree is: the encoder and the manifests it writes and checks.
SOURCES = ("encoder", "manifests")
KEEP = 3


def cache_dir() -> Path:
    return Path(os.environ.get("MPSTREAM_CACHE", "/var/cache/mpstream")) / "test-media"


def key(*args: object) -> str:
    digest = hashlib.sha256(repr(args).encode())
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    for tool in ("ffmpeg", "ffprobe"):
        found = shutil.which(tool)
        version = subprocess.run([found, "-version"], capture_output=True, text=True,
                                 check=False).stdout if found else "missing"
        digest.update(f"{tool}: {version}".encode())
    return digest.hexdigest()[:24]


def cached_media(out: Path, make: Callable[[Path], None], *args: object) -> Path:
    """`out` holding the tree `make(folder)` writes for `args`: copied from the cache when an
    entry exists, else made there (then copied) or, where the cache cannot be written, in
    `out` itself."""
    entry = cache_dir() / key(*args)
    if not entry.is_dir():
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=".new-", dir=entry.parent))
        except OSError:
            make(out)
            return out
        try:
            make(work / "media")
            # Atomic: a session beside this one finds a whole tree or none.
            os.replace(work / "media", entry)
        except OSError:
            if not entry.is_dir():  # else another session put the same entry there first
                raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        _prune(entry.parent, keep=entry)
    shutil.copytree(entry, out, dirs_exist_ok=True)
    return out


def _prune(folder: Path, keep: Path) -> None:
    for stale in folder.glob(".new-*"):  # left by a session that was killed while encoding
        if time.time() - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)
    entries = sorted((p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [p for p in entries if p != keep][KEEP - 1:]:
        shutil.rmtree(old, ignore_errors=True)
