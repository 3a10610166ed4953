import os
import subprocess
from pathlib import Path

import pytest

from mpstream.scratch import (
    PURPOSES,
    clean_stale_tempdirs,
    session_folders,
    session_mkdtemp,
    session_tempdir,
)


def _dead_pid() -> int:
    dead = subprocess.Popen(["true"])
    dead.wait()
    return dead.pid


def test_clean_removes_the_temp_folders_of_dead_sessions_only(tmp_path):
    gone_pid = _dead_pid()
    mine = [tmp_path / f"mps-{p}-{os.getpid()}-abc" for p in PURPOSES]
    gone = [tmp_path / f"mps-{p}-{gone_pid}-def" for p in PURPOSES]
    # Not ours to judge: no pid, an unknown purpose, a file.
    other = [tmp_path / "mps-carrier-notapid", tmp_path / f"mps-other-{gone_pid}-x"]
    for folder in (*mine, *gone, *other):
        folder.mkdir()
        (folder / "data").write_text("{}\n")
    stray = tmp_path / f"mps-firefox-{gone_pid}-file"
    stray.write_text("")
    said = clean_stale_tempdirs(tmp_path)
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {p.name for p in (*mine, *other, stray)}
    assert len(said) == len(PURPOSES)
    assert any("a Firefox profile" in line and f"mps-firefox-{gone_pid}" in line for line in said)


def test_a_session_folder_carries_the_process_and_goes_away():
    with session_tempdir("play-url") as folder:
        assert Path(folder).name.startswith(f"mps-play-url-{os.getpid()}-")
        (Path(folder) / "x").write_text("y")
    assert not Path(folder).exists()
    with pytest.raises(ValueError, match="known: carrier"):
        session_tempdir("nope")


def test_clean_of_some_purposes_leaves_the_others(tmp_path):
    gone_pid = _dead_pid()
    for p in ("server", "firefox"):
        (tmp_path / f"mps-{p}-{gone_pid}-a").mkdir()
    said = clean_stale_tempdirs(tmp_path, purposes=("server",))
    assert [p.name for p in tmp_path.iterdir()] == [f"mps-firefox-{gone_pid}-a"]
    assert len(said) == 1 and "server stack" in said[0]


def test_a_folder_the_caller_removes_is_found_by_its_process():
    folder = session_mkdtemp("server")
    try:
        assert session_folders("server", os.getpid()) == [folder]
        assert session_folders("server", _dead_pid()) == []
    finally:
        folder.rmdir()
    with pytest.raises(ValueError, match="known: carrier"):
        session_mkdtemp("nope")
