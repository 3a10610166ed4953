"""Finding and removing everything a topology made, from the kernel's own state and its record.

Every interface lives inside one of the topology's namespaces (nothing is created in the root
namespace), so removing the namespaces removes the interfaces. Processes are found through the
namespace they run in (`ip netns pids`), which still works after the tool that started them
was killed with -9; emulators whose namespace was already deleted are found by their binary.

A topology's record (`NAME.json` in the state root's `topologies/`, see mpstream.state) is
written before its first namespace and removed after its last, and names its owner: the process
that built it, or none for one `netem up` left running on purpose. Cleaning removes only what
belongs to no one: an owner that died, or `mps-*` namespaces that have no record at all.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpstream import state
from mpstream.netem.system import sh
from mpstream.paths import BUILD_DIR
from mpstream.proc import pid_alive, stop_pids

NS_PREFIX = "mps-"
# A topology's namespaces: its client, link and server, and its competing clients (user1..).
MAX_COMPETITORS = 4
CORE_ROLES = ("client", "link", "server")  # every topology has these
ROLES = (*CORE_ROLES, *(f"user{k}" for k in range(1, MAX_COMPETITORS + 1)))


def competitor_role(index: int) -> str:
    """The host (namespace role) of a profile's competitor `index` (0-based)."""
    return f"user{index + 1}"
NAME_RULE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]{0,31}$")
NETNS_DIR = Path("/run/netns")
EMULATOR = BUILD_DIR / "mpstream-linkem"


def netns_name(topology: str, role: str) -> str:
    return f"{NS_PREFIX}{topology}-{role}"


def state_dir() -> Path:
    """Where topologies built now are recorded."""
    return state.kind_dir(state.TOPOLOGIES)


def record_dirs() -> list[Path]:
    """Every folder that may hold topology records, the current one first: the state root's
    and, since namespaces are machine-wide, the default root's when the root is moved; each
    also in the layout of older versions (records right in the root)."""
    dirs: list[Path] = []
    for base in (state.root(), state.DEFAULT_ROOT):
        for folder in (state.kind_dir(state.TOPOLOGIES, base),
                       state.legacy_dir(state.TOPOLOGIES, base)):
            if folder not in dirs:
                dirs.append(folder)
    return dirs


def _is_name(text: str) -> bool:
    # The old layout shares its folder with the state root's own subfolders.
    return bool(NAME_RULE.match(text)) and text not in state.KINDS


def all_namespaces() -> list[str]:
    """Every mps-* namespace, live or leftover."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(NS_PREFIX))


def topology_namespaces(topology: str) -> list[str]:
    present = set(all_namespaces())
    return [ns for ns in (netns_name(topology, r) for r in ROLES) if ns in present]


def topology_names() -> list[str]:
    """Names of topologies that have at least one namespace."""
    names = set()
    for ns in all_namespaces():
        stem, _, role = ns[len(NS_PREFIX):].rpartition("-")
        if stem and role in ROLES:
            names.add(stem)
    return sorted(names)


def netns_pids(netns: str) -> list[int]:
    proc = sh(["ip", "netns", "pids", netns], check=False)
    return [int(tok) for tok in proc.stdout.split() if tok.isdigit()]


def remove_namespaces(namespaces: list[str]) -> None:
    # Again until none is left: a dying server may still fork (a master respawning workers).
    for _ in range(5):
        pids = sorted({pid for ns in namespaces for pid in netns_pids(ns)} - {os.getpid()})
        if not pids:
            break
        stop_pids(pids)
    for ns in namespaces:
        # A process that has just been SIGKILLed may hold the namespace for a moment.
        for _ in range(50):
            if sh(["ip", "netns", "del", ns], check=False).returncode == 0:
                break
            if not (NETNS_DIR / ns).exists():
                break
            time.sleep(0.05)


def _emulators() -> dict[int, str]:
    """pid -> topology of every emulator of ours still running wherever it is (e.g. its
    namespace is gone). Ours are recognised by their config file in a record folder's
    <topology>/, so emulators started by anything else are left alone."""
    folders = record_dirs()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            exe = os.readlink(entry / "exe")
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if Path(exe.removesuffix(" (deleted)")).name != EMULATOR.name:
            continue
        for arg in argv:
            owner = Path(arg.decode(errors="replace")).parent
            if owner.parent in folders and _is_name(owner.name):
                found[int(entry.name)] = owner.name
                break
    return found


def orphan_emulator_pids(pattern: str = "*") -> list[int]:
    """Emulators of the topologies whose name matches `pattern`, wherever they run."""
    return sorted(pid for pid, name in _emulators().items() if fnmatch.fnmatchcase(name, pattern))


# --- records ------------------------------------------------------------------------------------


def state_paths(topology: str) -> list[Path]:
    """The record and the emulators' folder of `topology`, wherever they are."""
    if not _is_name(topology):
        return []
    return [path for folder in record_dirs()
            for path in (folder / f"{topology}.json", folder / topology,
                         folder / f".{topology}.json.tmp")  # its owner was killed writing it
            if path.exists()]


def record_path(topology: str) -> Path | None:
    """The record of `topology` (the current root's first, when several roots hold one)."""
    return next((p for p in state_paths(topology) if p.suffix == ".json"), None)


def read_state(topology: str) -> dict[str, Any] | None:
    path = record_path(topology)
    try:
        return json.loads(path.read_text()) if path else None
    except (OSError, ValueError):
        return None


def recorded_names() -> list[str]:
    names = set()
    for folder in record_dirs():
        if folder.is_dir():
            names |= {p.stem for p in folder.glob("*.json")}
            legacy = folder.name != state.TOPOLOGIES
            names |= {p.name for p in folder.iterdir()
                      if p.is_dir() and (not legacy or _topology_folder(p))}
    return sorted(n for n in names if _is_name(n))


def _topology_folder(path: Path) -> bool:
    """A topology's own folder: beside its record, or holding its emulators' configurations.
    In the old layout the root holds topology folders, so a folder of another kind of record
    (one this version does not know) must not be taken for a topology."""
    return path.with_suffix(".json").exists() or any(path.glob("path*.json"))


def remove_state(topology: str) -> None:
    for path in state_paths(topology):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


# --- whose it is, and removing it ---------------------------------------------------------------


def owner(topology: str) -> tuple[str, int | None]:
    """Whose `topology` is: ("live", pid) while the process that built it runs; ("detached",
    None) for one `netem up` left running on purpose; ("stale", pid or None) when its owner
    died, or when namespaces or emulators have no record (a build or teardown killed between
    its steps); ("none", None) when nothing of it is there."""
    record = read_state(topology)
    if record is None:
        if topology_namespaces(topology) or orphan_emulator_pids(topology) \
                or state_paths(topology):
            return "stale", None
        return "none", None
    if record.get("detached") and topology_namespaces(topology):
        return "detached", None
    try:
        pid = int(record["owner_pid"])
    except (KeyError, TypeError, ValueError):
        return "live", None  # not ours to judge: leave it
    return ("live" if pid_alive(pid) else "stale"), pid


@dataclass
class Removed:
    """What removing one topology took away."""

    name: str
    owner_pid: int | None = None
    namespaces: list[str] = field(default_factory=list)
    processes: int = 0  # in its namespaces, besides the emulators
    emulators: int = 0
    state: list[Path] = field(default_factory=list)

    def describe(self) -> str:
        why = "no record" if self.owner_pid is None else f"owner pid {self.owner_pid} is gone"
        parts = [f"namespaces {' '.join(self.namespaces)}" if self.namespaces else "",
                 f"{self.processes} process(es)" if self.processes else "",
                 f"{self.emulators} emulator(s)" if self.emulators else "",
                 f"state {' '.join(map(str, self.state))}" if self.state else ""]
        return f"removed topology {self.name} ({why}): " + "; ".join(p for p in parts if p)


def remove_topology(topology: str) -> Removed:
    """Stops every process in its namespaces and its emulators, removes the namespaces (and so
    their interfaces) and its record."""
    namespaces = topology_namespaces(topology)
    emulators = set(orphan_emulator_pids(topology))
    others = {pid for ns in namespaces for pid in netns_pids(ns)} - emulators - {os.getpid()}
    record = read_state(topology) or {}
    removed = Removed(topology, record.get("owner_pid"), namespaces, len(others), len(emulators),
                      state_paths(topology))
    remove_namespaces(namespaces)
    stop_pids(orphan_emulator_pids(topology))
    remove_state(topology)
    return removed


@dataclass
class Sweep:
    """What `clean_stale` did: the topologies it removed and those it left to their owners."""

    removed: list[Removed] = field(default_factory=list)
    in_use: dict[str, int | None] = field(default_factory=dict)  # name -> live owner's pid
    detached: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [r.describe() for r in self.removed]
        out += [f"left alone: topology {name} (in use by pid {pid})"
                for name, pid in self.in_use.items()]
        out += [f"left alone: topology {name} (left up by `netem up`; `mpstream netem down "
                f"{name}` removes it)" for name in self.detached]
        return out


def clean_stale(pattern: str = "*") -> Sweep:
    """Removes what killed programs left of the topologies whose name matches `pattern`
    (shell-style): their namespaces with the interfaces and processes in them, their emulators
    and records. Topologies whose owner runs, or that `netem up` left up, stay."""
    sweep = Sweep()
    names = set(topology_names()) | set(recorded_names()) | set(_emulators().values())
    # `mps-X-role` namespaces where X is no topology name were not made by mpstream.
    for name in sorted(n for n in names if _is_name(n) and fnmatch.fnmatchcase(n, pattern)):
        status, pid = owner(name)
        if status == "stale":
            sweep.removed.append(remove_topology(name))
        elif status == "live":
            sweep.in_use[name] = pid
        elif status == "detached":
            sweep.detached.append(name)
    return sweep


def leftovers(pattern: str = "*") -> list[str]:
    """What is still there of the matching topologies: namespaces, emulator processes, state
    files. Empty after a clean teardown."""
    found = [f"namespace {ns}" for ns in all_namespaces()
             if fnmatch.fnmatchcase(ns, f"{NS_PREFIX}{pattern}-*")]
    found += [f"emulator process {pid}" for pid in orphan_emulator_pids(pattern)]
    found += [f"state {path}" for name in recorded_names() if fnmatch.fnmatchcase(name, pattern)
              for path in state_paths(name)]
    return found
