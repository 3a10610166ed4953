"""Process lifetime helpers shared by every part that starts or stops programs.

One place for "is it still alive", "stop it, then make sure" and "SIGTERM unwinds like Ctrl-C",
so that teardown behaves the same in the encoder, the emulators, the servers and the runner.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

from mpstream.errors import UserError

_PR_SET_PDEATHSIG = 1


# The process that forked this one, as it was at the fork: the parent sets it just before it
# forks (subprocess runs these hooks when it is given a preexec_fn), the child inherits it.
_forked_from = 0


def _remember_the_forker() -> None:
    global _forked_from
    _forked_from = os.getpid()


os.register_at_fork(before=_remember_the_forker)


def die_with_parent() -> None:
    """SIGTERM to this process when the thread that started it ends (PR_SET_PDEATHSIG): a
    program killed with -9 leaves none of its children running. For `preexec_fn`, or first
    thing in a child."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    # A parent killed between the fork and the prctl sends no signal ever: the child would
    # outlive it (an nginx of `serve` killed with -9 as it started it, 1 in about 20 runs).
    if _forked_from and os.getppid() != _forked_from:
        os.kill(os.getpid(), signal.SIGTERM)

class Started:
    """A context manager of programs it starts (`start`): closed on exit, and when starting
    them fails part-way, so that nothing it started stays behind."""

    def start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        with contextlib.ExitStack() as on_failure:
            on_failure.callback(self.close)
            self.start()
            on_failure.pop_all()  # started: closed on exit instead
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pid_alive(pid: int) -> bool:
    """True while `pid` runs; a zombie counts as dead (its parent will reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z"):
            return False
    return True


def stop(proc: subprocess.Popen, graceful: signal.Signals = signal.SIGTERM,
         timeout: float = 10.0) -> None:
    """Ask `proc` to stop with `graceful`, wait up to `timeout`, then SIGKILL it and whatever is
    left of its process group (a daemon's workers share its group when it was started in a new
    session). SIGKILL goes to the whole group at once: killed, a leader leaves its members
    running, with nothing left to stop them."""
    if graceful == signal.SIGKILL and _group_has_members(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(graceful)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(3)
    # Members of its group (if it leads one) get a moment to exit, then are forced.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _group_has_members(proc.pid):
        time.sleep(0.05)
    if _group_has_members(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(3)


def stop_pids(pids: list[int], timeout: float = 3.0) -> None:
    """SIGTERM each pid (emulators write their stats on it), then SIGKILL what is left."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.02)
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _live_processes() -> Iterator[tuple[int, int, int, str]]:
    """(pid, parent pid, process group, command name) of every live (non-zombie) process, each
    from one read of its /proc stat, so a process that exits meanwhile is simply left out."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            head, tail = (entry / "stat").read_text().split("(", 1)[1].rsplit(")", 1)
            fields = tail.split()
        except (OSError, IndexError, ValueError):
            continue
        if fields[0] != "Z":
            yield int(entry.name), int(fields[1]), int(fields[2]), head


def _group_has_members(pgid: int) -> bool:
    return any(pgrp == pgid for _, _, pgrp, _ in _live_processes())


def child_pids(pid: int, name: str | None = None) -> set[int]:
    """The live children of `pid` (not grandchildren); with `name`, only those whose command
    name (/proc's comm, at most 15 characters) is `name`."""
    return {child for child, ppid, _, comm in _live_processes()
            if ppid == pid and (name is None or comm == name)}


@contextlib.contextmanager
def signals_interrupt(*signums: signal.Signals, once: bool = False) -> Iterator[None]:
    """Inside the block, the given signals (default SIGTERM) raise KeyboardInterrupt, so that a
    scheduler's or a user's `kill` tears down exactly as Ctrl-C does. With `once`, only the
    first signal interrupts and SIGINT and SIGTERM are ignored after it, so that the teardown
    it starts is not cut short by a second one (a trial process gets Ctrl-C from the terminal
    and SIGTERM from its runner). Only the main thread can own signal handlers; elsewhere this
    does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handled = signums or (signal.SIGTERM,)

    def interrupt(signum, frame):
        if once:
            for s in {*handled, signal.SIGINT, signal.SIGTERM}:
                signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupt) for s in {*handled, signal.SIGINT}}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


_TICK = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """The machine's non-idle CPU time so far, all cores (/proc/stat; benchmarks take the
    difference around what they measure)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / _TICK


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU time `pid` has used so far (its own, not its children's)."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / _TICK  # utime, stime



def ready_line(proc: subprocess.Popen[str], timeout_s: float) -> dict | None:
    """What a program of ours says when it is ready: the value of the first JSON line on its
    stdout with a "ready" key. None when it exits first or `timeout_s` pass (the caller says
    which, with the program's own last words)."""
    return keyed_line(proc, "ready", timeout_s)


def await_ready(proc: subprocess.Popen[str], what: str, timeout_s: float,
                last_words: Callable[[], str], hint: str = "") -> dict:
    """`proc`'s ready line (ready_line); a UserError naming `what` with the program's last
    words if it exits first, or, stopping it, with `hint` if it is not ready in time."""
    said = ready_line(proc, timeout_s)
    if said is not None:
        return said
    if proc.poll() is not None:
        raise UserError(f"{what} exited ({proc.returncode}) before it was ready: "
                        f"{last_words()}")
    stop(proc, timeout=2.0)
    raise UserError(f"{what} was not ready after {timeout_s:g} s{hint}")


def keyed_line(proc: subprocess.Popen[str], key: str, timeout_s: float) -> dict | None:
    """The value of the next JSON line on `proc`'s stdout with key `key` (a ready line, an
    answer to a command); None when it exits first or `timeout_s` pass."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        readable, _, _ = select.select([proc.stdout], [], [], 0.1)
        line = proc.stdout.readline() if readable else ""
        with contextlib.suppress(json.JSONDecodeError):
            said = json.loads(line) if line.strip() else None
            if isinstance(said, dict) and key in said:
                return dict(said[key])
        if proc.poll() is not None and not line:
            return None
    return None


class _InThread:
    """A context manager entered and exited by a thread of its own, which lives from the one to
    the other: a child started with PR_SET_PDEATHSIG (the servers') is signalled when the
    thread that started it ends, not the process."""

    def __init__(self, cm: contextlib.AbstractContextManager[Any]):
        self.cm = cm
        self.entered: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.exited: concurrent.futures.Future[bool | None] = concurrent.futures.Future()
        self._leave = threading.Event()
        self._exc_info: tuple[Any, Any, Any] = (None, None, None)
        threading.Thread(target=self._live, name="side-by-side", daemon=True).start()

    def _live(self) -> None:
        try:
            self.entered.set_result(self.cm.__enter__())
        except BaseException as exc:  # handed to the main thread, which raises it
            self.entered.set_exception(exc)
            return
        self._leave.wait()
        try:
            self.exited.set_result(self.cm.__exit__(*self._exc_info))
        except BaseException as exc:
            self.exited.set_exception(exc)

    def start_leaving(self, *exc_info: Any) -> None:
        self._exc_info = exc_info
        self._leave.set()

    def left(self, *exc_info: Any) -> bool | None:
        return _wait_through_interrupts(self.exited).result()


def _wait_through_interrupts(future: concurrent.futures.Future[Any]
                             ) -> concurrent.futures.Future[Any]:
    """Waits for `future` even when Ctrl-C (or SIGTERM as KeyboardInterrupt) comes meanwhile,
    and raises that interrupt once it is done: what the other thread starts or stops must not
    be left half done."""
    interrupted: BaseException | None = None
    while True:
        try:
            concurrent.futures.wait([future])
            break
        except KeyboardInterrupt as exc:
            interrupted = exc
    if interrupted is not None:
        raise interrupted
    return future


@contextlib.contextmanager
def side_by_side(background: contextlib.AbstractContextManager[Any],
                 here: contextlib.AbstractContextManager[Any]) -> Iterator[tuple[Any, Any]]:
    """Enters `background` in a thread of its own while `here` is entered in this one, so that
    two slow set-ups (servers booting, a browser starting) overlap; yields both values and on the
    way out exits both at once too (`background` in its thread), and returns once both are
    done. When either fails to enter, the other is exited. An interrupt while `background` is
    entering or exiting waits for it to finish, so that what it started is also undone."""
    other = _InThread(background)
    with contextlib.ExitStack() as outer, contextlib.ExitStack() as inner:
        try:
            here_value = inner.enter_context(here)
        finally:
            try:
                _wait_through_interrupts(other.entered)
            finally:
                if other.entered.done() and other.entered.exception() is None:
                    # Exits run last pushed first: `background` starts leaving, `here` leaves,
                    # then `background` is waited for.
                    outer.push(other.left)
                    inner.push(other.start_leaving)
        yield other.entered.result(), here_value
