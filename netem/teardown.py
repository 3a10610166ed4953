"""Finding and removing everything a topology made, from the kernel's own state.

Every interface lives inside one of the topology's namespaces (nothing is created in the root
namespace), so removing the namespaces removes the interfaces. Processes are found through the
namespace they run in (`ip netns pids`), which still works after the tool that started them
was killed with -9; emulators whose namespace was already deleted are found by their binary.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import time
from pathlib import Path

from mpstream.netem.system import sh
from mpstream.paths import BUILD_DIR
from mpstream.proc import stop_pids

NS_PREFIX = "mps-"
ROLES = ("client", "link", "server")
STATE_DIR = Path("/run/mpstream")
NETNS_DIR = Path("/run/netns")
EMULATOR = BUILD_DIR / "mpstream-linkem"


def netns_name(topology: str, role: str) -> str:
    return f"{NS_PREFIX}{topology}-{role}"


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


def orphan_emulator_pids(pattern: str = "*") -> list[int]:
    """Emulators of matching topologies still running wherever they are (e.g. their namespace
    is gone). Ours are recognised by their config file under STATE_DIR/<topology>/, so
    emulators started by anything else are left alone."""
    pids = []
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
            config = Path(arg.decode(errors="replace"))
            owner = config.parent
            if owner.parent == STATE_DIR and fnmatch.fnmatchcase(owner.name, pattern):
                pids.append(int(entry.name))
                break
    return pids


def remove_state(topology: str) -> None:
    (STATE_DIR / f"{topology}.json").unlink(missing_ok=True)
    shutil.rmtree(STATE_DIR / topology, ignore_errors=True)


def remove_topology(topology: str) -> None:
    remove_namespaces(topology_namespaces(topology))
    remove_state(topology)


def clean_all(pattern: str = "*") -> list[str]:
    """Removes every mps-* namespace of topologies whose name matches `pattern` (shell-style;
    all by default), with their interfaces and processes, their emulators and recorded state.
    Returns the names of the topologies it removed."""
    names = sorted(set(topology_names()) | set(recorded_names()))
    names = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    namespaces = [ns for ns in all_namespaces()
                  if fnmatch.fnmatchcase(ns, f"{NS_PREFIX}{pattern}-*")]
    remove_namespaces(namespaces)
    stop_pids(orphan_emulator_pids(pattern))
    for name in names:
        remove_state(name)
    return names


def recorded_names() -> list[str]:
    if not STATE_DIR.is_dir():
        return []
    return sorted({p.stem for p in STATE_DIR.glob("*.json")} |
                  {p.name for p in STATE_DIR.iterdir() if p.is_dir()})


def leftovers(pattern: str = "*") -> list[str]:
    """What is still there of the matching topologies: namespaces, emulator processes, state
    files. Empty after a clean teardown."""
    found = [f"namespace {ns}" for ns in all_namespaces()
             if fnmatch.fnmatchcase(ns, f"{NS_PREFIX}{pattern}-*")]
    found += [f"emulator process {pid}" for pid in orphan_emulator_pids(pattern)]
    found += [f"state {STATE_DIR / name}" for name in recorded_names()
              if fnmatch.fnmatchcase(name, pattern)]
    return found
