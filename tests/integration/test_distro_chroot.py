"""scripts/test-distro.sh (`make test-trixie`) leaves the host as it was: stopped by Ctrl-C or
SIGTERM in the middle of a step, or failing, its mounts, the network namespace made inside
it, its processes and its overlay are gone, and the host's /run/netns never saw that namespace.

The step runs in a stand-in root file system made of this host's own bash and ip, whose `make`
makes a network namespace, starts a child and waits (the real root file system is Debian 13's,
too slow to build here; `make test-trixie` itself runs on it)."""

import fcntl
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mpstream.paths import REPO_ROOT
from mpstream.proc import pid_alive

SCRIPT = REPO_ROOT / "scripts" / "test-distro.sh"
PROGRAMS = ("bash", "env", "sleep", "ip", "touch")


def _copy_with_libraries(program: str, root: Path) -> None:
    path = Path(shutil.which(program)).resolve()
    shutil.copy2(path, root / "usr" / "bin" / program)
    listing = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
    for lib in re.findall(r"(/\S+) \(0x", listing):
        target = root / lib.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            shutil.copy2(Path(lib).resolve(), target)


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def stand_in_root(root: Path, netns: str, make_body: str) -> Path:
    for d in ("proc", "sys", "dev", "run", "tmp", "root", "etc", "var/cache/apt/archives",
              "usr/bin", "usr/sbin", "usr/local/share/ca-certificates"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "bin").symlink_to("usr/bin")
    (root / "sbin").symlink_to("usr/sbin")
    (root / "var" / "run").symlink_to("../run")
    for program in PROGRAMS:
        _copy_with_libraries(program, root)
    _executable(root / "usr" / "sbin" / "update-ca-certificates", "#!/bin/bash\nexit 0\n")
    _executable(root / "usr" / "bin" / "make",
                f"#!/bin/bash\nip netns add {netns}\n{make_body}\n")
    return root


def _pids_rooted_in(directory: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "root")).is_relative_to(directory):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _host_netns() -> set[str]:
    try:
        return set(os.listdir("/run/netns"))
    except FileNotFoundError:
        return set()


def _start(tmp_path: Path, make_body: str) -> tuple[subprocess.Popen, Path, str]:
    netns = f"mpsdistro{os.getpid()}"
    rootfs = stand_in_root(tmp_path / "rootfs", netns, make_body)
    cache = tmp_path / "cache"
    env = {**os.environ, "MPSTREAM_CACHE": str(cache), "MPSTREAM_DISTRO_ROOTFS": str(rootfs),
           "MPSTREAM_DISTRO_STEPS": "setup"}
    proc = subprocess.Popen(["bash", str(SCRIPT), "trixie"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return proc, cache / "trixie" / "runs", netns


def _wait_until_running(proc: subprocess.Popen, runs: Path) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready = list(runs.glob("*/upper/root/ready"))
        if ready:
            return ready[0].parents[2]
        if proc.poll() is not None:
            raise AssertionError(f"the script ended early: {proc.stdout.read()}")
        time.sleep(0.1)
    raise AssertionError("the step did not start within 60 s")


def _assert_nothing_left(run: Path, netns: str) -> None:
    assert not run.exists(), f"{run} was left behind"
    assert _pids_rooted_in(run) == []
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(run) not in mounts
    assert netns not in _host_netns()


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_stopped_run_leaves_no_mount_namespace_process_or_directory(tmp_path, how):
    body = "sleep 300 &\ntouch /root/ready\nwait"
    proc, runs, netns = _start(tmp_path, body)
    try:
        run = _wait_until_running(proc, runs)
        # While it runs: the step's processes live in the overlay, its namespace does not
        # show on the host, its mounts are not the host's.
        inside = _pids_rooted_in(run / "root")
        assert len(inside) >= 2, f"expected the step's shell and its child, found {inside}"
        assert netns not in _host_netns()
        assert str(run) not in Path("/proc/self/mountinfo").read_text()
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the whole group
        else:
            proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == (130 if how == "ctrl-c" else 143), output
    # Dead, not necessarily reaped yet: the killed step's processes are orphans, and this
    # machine's init reaps orphans up to 2 s later (measured); a zombie holds nothing.
    for pid in inside:
        assert not pid_alive(pid), f"process {pid} of the step outlived it"
    _assert_nothing_left(run, netns)


def test_a_failing_step_fails_the_run_and_is_cleaned_up(tmp_path):
    proc, runs, netns = _start(tmp_path, "touch /root/ready\nsleep 300 &\nexit 3")
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3, output
    assert "FAILED (exit 3)" in output
    assert list(runs.iterdir()) == []
    assert netns not in _host_netns()
    assert str(tmp_path) not in Path("/proc/self/mountinfo").read_text()


def test_a_run_waiting_for_the_heavy_lock_stops_on_sigterm(tmp_path):
    lock = tmp_path / "heavy.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # someone else is measuring
        rootfs = stand_in_root(tmp_path / "rootfs", "unused", "exit 0")
        env = {**os.environ, "MPSTREAM_CACHE": str(tmp_path / "cache"),
               "MPSTREAM_DISTRO_ROOTFS": str(rootfs), "MPSTREAM_DISTRO_STEPS": "heavy",
               "MPSTREAM_HEAVY_LOCK": str(lock)}
        proc = subprocess.Popen(["bash", str(SCRIPT), "trixie"], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            waiting = []
            while not waiting and time.monotonic() < deadline:
                waiting = [p for p in _children(proc.pid) if _comm(p) == "flock"]
                time.sleep(0.1)
            assert waiting, "the run is not waiting for the lock"
            proc.send_signal(signal.SIGTERM)
            output, _ = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 143, output
        assert not any(pid_alive(p) and _comm(p) == "flock" for p in waiting)
        assert list((tmp_path / "cache" / "trixie" / "runs").iterdir()) == []


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
