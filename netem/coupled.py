"""The coupled congestion controls LIA, OLIA, BALIA and wVegas: BPF programs (netem/cc/) that
mpstream registers with the kernel when a topology asks for one and unregisters when the last
topology using it is gone.

A profile names them `lia`, `olia`, `balia` and `wvegas`; the kernel knows them as `mps_lia`,
`mps_olia`, `mps_balia` and `mps_wvegas`, so they cannot clash with a congestion control of the
same name a kernel or another tool provides. `make coupled-cc` builds the objects into build/cc/.

Bookkeeping, under the state root's `coupled-cc/` (mpstream/state.py), all under one lock:
- `CC.loaded`: written before mpstream registers CC, with the root namespace's
  `tcp_allowed_congestion_control` as it was; removed after it is unregistered. The kernel drops
  an unregistered CC from the allowed list itself, so unregistering restores the list.
- `CC.TOPOLOGY.use`: a topology that uses CC, written before it is loaded or used.
A use whose topology has no record any more (its owner was killed, and `mpstream clean`
removed it) no longer counts; `clean_stale` unregisters what nothing uses. A CC registered
without a `.loaded` record (by someone else) is used but never unregistered.

Sockets keep a CC after it is unregistered, and so does a namespace whose default it is: a
topology whose CC another topology's teardown unregistered keeps working (measured).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

from mpstream import state
from mpstream.errors import UserError
from mpstream.netem import teardown
from mpstream.netem.system import PROC_SYS, available_values, sh
from mpstream.paths import BUILD_DIR

COUPLED = ("lia", "olia", "balia", "wvegas")
PREFIX = "mps_"
OBJECT_DIR = BUILD_DIR / "cc"
BUILD_COMMAND = "make coupled-cc"
# The coupled CCs see a connection's first four subflows (netem/cc/coupled_math.h says why).
MAX_PATHS = 4


def is_coupled(cc: str) -> bool:
    return cc in COUPLED


def kernel_name(cc: str) -> str:
    """The name the kernel knows `cc` by: `mps_lia` for `lia`; other names are the kernel's."""
    return PREFIX + cc if is_coupled(cc) else cc


def object_path(cc: str) -> Path:
    return OBJECT_DIR / f"{cc}.bpf.o"


def records_dir() -> Path:
    return state.kind_dir(state.COUPLED_CC)


def _locked() -> contextlib.AbstractContextManager[Path]:
    return state.locked(state.COUPLED_CC)


def registered(proc_sys: Path = PROC_SYS) -> list[str]:
    return available_values("net.ipv4.tcp_available_congestion_control", proc_sys)


def machine_refusal(cc: str) -> str | None:
    """Why `cc` cannot be loaded here before trying (None when it can be tried)."""
    if not object_path(cc).exists():
        return (f"the coupled congestion control {cc!r} is not built ({object_path(cc)} is "
                f"missing): run `{BUILD_COMMAND}` (it needs clang, libbpf-dev, bpftool and a "
                "kernel with BTF, /sys/kernel/btf/vmlinux)")
    if shutil.which("bpftool") is None:
        return (f"loading {cc!r} needs bpftool: apt-get install bpftool (or `make setup`)")
    return None


def _register(cc: str, folder: Path, proc_sys: Path) -> None:
    """Registers `cc`, its `.loaded` record written first (a kill in between leaves a record
    `clean_stale` acts on)."""
    allowed = available_values("net.ipv4.tcp_allowed_congestion_control", proc_sys)
    marker = folder / f"{cc}.loaded"
    marker.write_text(json.dumps({"cc": cc, "kernel_name": kernel_name(cc),
                                  "allowed_before": allowed}))
    done = sh(["bpftool", "struct_ops", "register", str(object_path(cc))], check=False,
              timeout=60)
    if kernel_name(cc) not in registered(proc_sys):
        marker.unlink(missing_ok=True)
        detail = (done.stderr or done.stdout).strip().splitlines()
        # The verifier's log ends with the reason; its last lines are the useful ones.
        raise UserError(
            f"the kernel refused the coupled congestion control {cc!r}: "
            + " | ".join(detail[-4:]) + " (it needs BPF struct_ops for tcp_congestion_ops, "
            "the bpf_rdonly_cast kfunc and MPTCP's subflow fields: `mpstream doctor` "
            "reports what this kernel has)")


def _unregister(cc: str, folder: Path, proc_sys: Path = PROC_SYS) -> str | None:
    """Unregisters `cc` and drops its `.loaded` record; None once the kernel no longer lists
    it, else what bpftool said, and the record stays: a CC left registered without its record
    would look like someone else's, and `mpstream clean` would never take it away."""
    done = sh(["bpftool", "struct_ops", "unregister", "name", kernel_name(cc)], check=False)
    if kernel_name(cc) in registered(proc_sys):
        return (done.stderr or done.stdout).strip() or f"exit {done.returncode}"
    (folder / f"{cc}.loaded").unlink(missing_ok=True)
    return None


def _allow(cc: str, proc_sys: Path) -> None:
    """A namespace other than the initial one may only pick a CC from the root namespace's
    tcp_allowed_congestion_control. A registered BPF CC is not in it; the `.loaded` record
    holds the list as it was, and unregistering takes the name out again."""
    allowed = available_values("net.ipv4.tcp_allowed_congestion_control", proc_sys)
    if kernel_name(cc) not in allowed:
        (proc_sys / "net/ipv4/tcp_allowed_congestion_control").write_text(
            " ".join([*allowed, kernel_name(cc)]) + "\n")


def acquire(cc: str, topology: str, proc_sys: Path = PROC_SYS) -> str:
    """Makes `cc` usable in `topology`'s namespaces (registered and allowed) and records the
    use; returns the kernel's name for it."""
    reason = machine_refusal(cc)
    with _locked() as folder:
        (folder / f"{cc}.{topology}.use").write_text(topology)
        if kernel_name(cc) not in registered(proc_sys):
            if reason:
                (folder / f"{cc}.{topology}.use").unlink(missing_ok=True)
                raise UserError(f"cc: {reason}")
            _register(cc, folder, proc_sys)
        _allow(cc, proc_sys)
    return kernel_name(cc)


def release(cc: str, topology: str) -> None:
    """`topology` no longer uses `cc`; unregisters it when nothing else does and mpstream
    registered it."""
    with _locked() as folder:
        (folder / f"{cc}.{topology}.use").unlink(missing_ok=True)
        _unload_unused(folder)


def _users(folder: Path, cc: str) -> list[str]:
    """Topologies recorded as using `cc` that still exist."""
    users = []
    for use in folder.glob(f"{cc}.*.use"):
        topology = use.name.removeprefix(f"{cc}.").removesuffix(".use")
        if teardown.record_path(topology) is not None:
            users.append(topology)
        else:
            use.unlink(missing_ok=True)  # its topology is gone: the use ended with it
    return users


def _unload_unused(folder: Path, proc_sys: Path = PROC_SYS) -> list[tuple[str, str | None]]:
    """Each CC mpstream loaded that no topology uses, unregistered: (cc, None), or (cc, why
    not) when the kernel still lists it (its record kept for the next try)."""
    unloaded = []
    for marker in sorted(folder.glob("*.loaded")):
        cc = marker.name.removesuffix(".loaded")
        if cc in COUPLED and not _users(folder, cc):
            unloaded.append((cc, _unregister(cc, folder, proc_sys)))
    return unloaded


def clean_stale(proc_sys: Path = PROC_SYS) -> list[str]:
    """Unregisters the coupled CCs mpstream loaded that no existing topology uses (after a
    kill -9); returns a line per CC."""
    if not records_dir().exists():
        return []
    with _locked() as folder:
        return [f"unregistered congestion control {kernel_name(cc)} (no topology uses it)"
                if why is None else
                f"could not unregister congestion control {kernel_name(cc)}: {why}; its record "
                "is kept, so `mpstream clean` tries again"
                for cc, why in _unload_unused(folder, proc_sys)]


def awaiting_kernel(proc_sys: Path = PROC_SYS) -> list[str]:
    """A line per struct_ops map of one of mpstream's CCs that is unregistered but still exists.
    Sockets that ran the CC hold its map until they are freed, which for the sockets of a
    deleted namespace the kernel does minutes later on its own: nothing is left to undo, and
    nothing mpstream could do would free it sooner."""
    if shutil.which("bpftool") is None:
        return []
    shown = sh(["bpftool", "-j", "struct_ops", "show"], check=False)
    try:
        maps = json.loads(shown.stdout or "[]")
    except json.JSONDecodeError:
        return []  # an older bpftool's error text; the list is a courtesy, not a check
    kernel_names = {kernel_name(cc) for cc in COUPLED}
    listed = set(registered(proc_sys))
    return [f"left to the kernel: {m['name']}'s struct_ops map (id {m['id']}) is unregistered "
            "but sockets that ran it still hold it; the kernel frees it when they close "
            "(a deleted namespace's sockets within minutes)"
            for m in maps if m.get("name") in kernel_names and m["name"] not in listed]


def probe(cc: str, proc_sys: Path = PROC_SYS) -> tuple[bool, str]:
    """Whether `cc` loads here, for `mpstream doctor`: registered and unregistered again at
    once when it is not in use, left alone when it is."""
    reason = machine_refusal(cc)
    if reason:
        return False, reason
    with _locked() as folder:
        if kernel_name(cc) in registered(proc_sys):
            return True, f"{kernel_name(cc)} registered (in use)"
        try:
            _register(cc, folder, proc_sys)
        except UserError as refused:
            return False, str(refused)
        why = _unregister(cc, folder, proc_sys)
        if why is not None:
            return False, f"{kernel_name(cc)} loaded but could not be unregistered: {why}"
    return True, f"{kernel_name(cc)} loads (registered and unregistered again)"
