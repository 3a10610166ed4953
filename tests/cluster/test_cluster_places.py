"""Where a local cluster's user keeps things: a checkout and its virtual environment under /tmp
(as `git clone ... /tmp/mpstream` puts them) run trials as anywhere else, and one the hosts
cannot see (under /run, which each host mounts for itself) is refused in mpstream's words,
naming the path, before any trial runs."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mpstream.runner.layout import load_trials

from .conftest import iperf_scenario

pytestmark = pytest.mark.timeout(400)


def _virtualenv_at(folder: Path) -> Path:
    """A virtual environment at `folder` that runs this one's interpreter and packages (its
    site-packages a link to ours): what `make setup` makes, at a path of the test's choosing,
    without installing anything again."""
    base = Path(sys.base_prefix)
    (folder / "bin").mkdir(parents=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (folder / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    (folder / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\ninclude-system-site-packages "
                                       "= false\n")
    site = Path(sys.prefix) / "lib" / version / "site-packages"
    (folder / "lib" / version).mkdir(parents=True)
    (folder / "lib" / version / "site-packages").symlink_to(site)
    python = folder / "bin" / "python"
    for script in ("ray", "mpstream"):  # pip's entry points, speaking to this interpreter
        lines = (Path(sys.prefix) / "bin" / script).read_text().splitlines(keepends=True)
        (folder / "bin" / script).write_text(f"#!{python}\n" + "".join(lines[1:]))
        (folder / "bin" / script).chmod(0o755)
    said = subprocess.run([python, "-c", "import sys, mpstream.runner; print(sys.executable)"],
                          capture_output=True, text=True, check=True)
    assert said.stdout.strip() == str(python)  # the hosts are asked to run this very path
    return python


def _run(python: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "mpstream.cli", "run", *args], cwd=cwd,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)


def test_a_checkout_under_tmp_runs_its_trials_on_local_hosts():
    home = Path(tempfile.mkdtemp(prefix="mps-clone-", dir="/tmp"))
    try:
        python = _virtualenv_at(home / ".venv")
        scenario = iperf_scenario(home)  # the scenario and the run folder under /tmp too
        done = _run(python, home, str(scenario), "--cluster", "local:1", "--out",
                    str(home / "run"), "--no-report")
        assert done.returncode == 0, done.stdout + done.stderr
        trials = load_trials(home / "run")
        assert len(trials) == 4 and all(t.ok for t in trials), [t.record.reason for t in trials]
        assert {t.record.host for t in trials} == {"local-1"}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_an_interpreter_the_hosts_cannot_see_is_named_before_any_trial(tmp_path):
    hidden = Path(tempfile.mkdtemp(prefix="mps-test-venv-", dir="/run"))
    try:
        python = _virtualenv_at(hidden / ".venv")
        scenario = iperf_scenario(tmp_path)
        out = tmp_path / "run"
        done = _run(python, tmp_path, str(scenario), "--cluster", "local:1", "--out", str(out))
        said = " ".join((done.stdout + done.stderr).split())
        assert done.returncode != 0, said
        assert f"cannot see {hidden}/.venv/bin/python" in said, said
        assert "out of /run" in said, said
        assert "nsenter" not in said and "Traceback" not in said, said
        assert not (out / "trials").exists() or not os.listdir(out / "trials"), said
    finally:
        shutil.rmtree(hidden, ignore_errors=True)
