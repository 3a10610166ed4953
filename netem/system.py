"""Running `ip`, `sysctl` and friends, and the prerequisites checks that turn a missing root or
kernel feature into one clear sentence instead of a traceback."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from mpstream.errors import UserError
from mpstream.network import in_netns

PROC_SYS = Path("/proc/sys")


class CommandFailed(UserError):
    """A system command the topology needs failed; the message carries its stderr."""


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is done. Starting a process is not
    interruptible safely: an interrupt inside `Popen()` leaves the child running unseen, and
    whatever it creates (a namespace, an emulator) would appear after teardown looked."""
    deferred = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, deferred)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def sh(argv: Sequence[str], *, input: str | None = None, check: bool = True,
       timeout: float = 30) -> subprocess.CompletedProcess:
    """Runs a short system command to its end, even when interrupted meanwhile."""
    with signals_deferred():
        proc = subprocess.run(list(argv), input=input, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True)
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise CommandFailed(f"`{' '.join(argv)}` failed (exit {proc.returncode}): {detail}")
    return proc


def ip_batch(netns: str, lines: Sequence[str]) -> None:
    """Several `ip` commands in one namespace, one process: fast and all-or-error."""
    if lines:
        sh(["ip", "-n", netns, "-batch", "-"], input="\n".join(lines) + "\n")


def ip_batch_undo(netns: str, lines: Sequence[str]) -> None:
    """`ip` commands that take something away: each is tried (-force) whatever happened to
    the one before, and what is already gone (or a namespace that is) is no error."""
    if lines:
        sh(["ip", "-n", netns, "-force", "-batch", "-"], input="\n".join(lines) + "\n",
           check=False)


def sysctl(netns: str, settings: dict[str, str | int]) -> None:
    argv = in_netns(netns, ["sysctl", "-q", "-w"])
    argv += [f"{key}={value}" for key, value in settings.items()]
    sh(argv)


CLIENT_RMEM_INITIAL = 4 * 1024 * 1024


def client_rmem(current: str | None = None) -> str:
    """The client's `net.ipv4.tcp_rmem`: the kernel's minimum and maximum (as this host has
    them), and a new socket's buffer at 4 MB instead of 128 KB. Over MPTCP on 6.18 a 128 KB
    connection buffer that out-of-order data fills stops the connection for good: the data
    that would fill the hole waits in the connection's backlog, which the kernel moves in only
    while the buffer has room, and the buffer grows only as the application reads
    (docs/netem.md#the-clients-receive-buffer)."""
    text = current if current is not None else (PROC_SYS / "net/ipv4/tcp_rmem").read_text()
    low, _, high = (int(v) for v in text.split())
    return f"{low} {CLIENT_RMEM_INITIAL} {max(high, CLIENT_RMEM_INITIAL)}"


def kernel_has_mptcp() -> bool:
    return (PROC_SYS / "net" / "mptcp" / "enabled").exists()


def require_root() -> None:
    if os.geteuid() != 0:
        raise UserError(
            "path emulation needs root (it creates network namespaces, interfaces and MPTCP "
            "endpoints): run the command as root, e.g. with sudo"
        )


def require_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise UserError(
            f"missing programs: {', '.join(missing)}; install the Debian packages listed in "
            "scripts/system-packages.txt (`make system`)"
        )


def require_mptcp(proc_sys: Path = PROC_SYS) -> None:
    """The running kernel must have upstream MPTCP (5.6+ with CONFIG_MPTCP)."""
    if not (proc_sys / "net" / "mptcp" / "enabled").exists():
        raise UserError(
            "this kernel has no Multipath TCP support (/proc/sys/net/mptcp is missing): use a "
            "Linux kernel 5.6 or later built with CONFIG_MPTCP=y; without it only profiles "
            "with mode = \"tcp\" (single-path TCP) can run"
        )


def available_values(key: str, proc_sys: Path = PROC_SYS) -> list[str]:
    """Space-separated lists such as net.ipv4.tcp_available_congestion_control."""
    path = proc_sys / key.replace(".", "/")
    return path.read_text().split() if path.exists() else []


def require_cc(cc: str, proc_sys: Path = PROC_SYS) -> None:
    """The congestion control must exist, and be allowed: a namespace other than the
    initial one may only pick from net.ipv4.tcp_allowed_congestion_control, so it is added
    there (a permission list of the host, widened, never narrowed)."""
    available = available_values("net.ipv4.tcp_available_congestion_control", proc_sys)
    # Not yet loaded modules (tcp_bbr) are loadable by name.
    if cc not in available and shutil.which("modprobe"):
        sh(["modprobe", f"tcp_{cc}"], check=False)
        available = available_values("net.ipv4.tcp_available_congestion_control", proc_sys)
    if cc not in available:
        raise UserError(
            f"cc: congestion control {cc!r} is not available in this kernel; available: "
            f"{', '.join(available) or 'none listed'}"
        )
    allowed = available_values("net.ipv4.tcp_allowed_congestion_control", proc_sys)
    if cc not in allowed:
        try:
            (proc_sys / "net/ipv4/tcp_allowed_congestion_control").write_text(
                " ".join([*allowed, cc]) + "\n")
        except PermissionError:
            # Only the machine's initial network namespace may change the list (a local
            # cluster's host runs in a namespace of its own: `mpstream run` allows it first).
            raise UserError(
                f"cc: congestion control {cc!r} is not in net.ipv4.tcp_allowed_congestion_"
                f"control ({' '.join(allowed)}), and this network namespace may not add it: "
                f"run `sysctl -w net.ipv4.tcp_allowed_congestion_control=\"{' '.join(allowed)} "
                f"{cc}\"` on the machine itself") from None


def require_scheduler(name: str, proc_sys: Path = PROC_SYS) -> None:
    available = available_values("net.mptcp.available_schedulers", proc_sys)
    if available and name not in available:
        raise UserError(
            f"mptcp.scheduler: scheduler {name!r} is not available in this kernel; "
            f"available: {', '.join(available)}"
        )
