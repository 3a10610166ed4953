"""MPTCP on a real host's own interfaces, for the length of one session, undone exactly after.

A multi-homed host (a laptop on WiFi and LTE, a testbed node with two NICs) needs three things
before an MPTCP connection spreads over its interfaces:

- one MPTCP endpoint per extra interface (`ip mptcp endpoint add ADDR dev IF subflow`), so the
  kernel's path manager opens a subflow from it;
- `ip mptcp limits` that allow those subflows (and the addresses a server announces);
- source-based policy routing: a routing table per interface and a rule `from ADDR lookup T`,
  so that a subflow bound to an interface's address also leaves by that interface.

`HostPaths` adds what is missing, and only that, and removes exactly what it added: on success,
on an error, on Ctrl-C and SIGTERM (its `with` block unwinds), and after a SIGKILL through
`mpstream clean`, which reads the state file written *before* each change. Endpoints, rules and
tables it did not add are never touched. It works in the network namespace the process runs in.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpstream.errors import UserError
from mpstream.netem.hostchanges import (
    Endpoint,
    HostChange,
    Limits,
    RouteTable,
    Rule,
    family_flag,
    from_record,
    ip,
    ip_json,
)
from mpstream.network import Network, PathCounters, PathInfo
from mpstream.proc import pid_alive
from mpstream.state import HOST_CHANGES, kind_dir, legacy_dir
from mpstream.transports.base import Transport, get_transport
from mpstream.transports.direct import mptcp_enabled

# Rule priorities and table ids are picked among free ones from here on (below `main`, 32766).
FIRST_PRIORITY = 9700
FIRST_TABLE = 9700
MAX_LIMIT = 8  # the kernel's cap on subflows and on accepted addresses


def netns_id() -> str:
    """Identity of the network namespace this process is in (device and inode of its file)."""
    st = os.stat("/proc/self/ns/net")
    return f"{st.st_dev}:{st.st_ino}"


@dataclass(frozen=True)
class InterfaceSpec:
    name: str
    backup: bool = False


def parse_interfaces(text: str) -> list[InterfaceSpec]:
    """`IF1,IF2[:backup],...` → specs; a clear error for anything else."""
    specs = []
    for raw in (part.strip() for part in text.split(",")):
        if not raw:
            raise UserError(f"--interfaces {text!r}: an empty name; give e.g. eth0,wlan0:backup")
        name, _, flag = raw.partition(":")
        if flag not in ("", "backup"):
            raise UserError(f"--interfaces: {raw!r}: the only flag is `:backup` "
                            "(e.g. wwan0:backup)")
        if not re.fullmatch(r"[A-Za-z0-9_.@-]{1,15}", name):
            raise UserError(f"--interfaces: {name!r} is not an interface name")
        specs.append(InterfaceSpec(name, flag == "backup"))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise UserError(f"--interfaces {text!r}: an interface is named twice")
    return specs


@dataclass
class Interface:
    """What the host says about one interface: its address in the server's family, the
    main table's routes through it (the connected prefix, a default route's gateway)."""

    name: str
    address: str
    routes: list[dict[str, Any]]
    backup: bool = False


def describe_interface(spec: InterfaceSpec, family: int) -> Interface:
    links = {link["ifname"]: link for link in ip_json("link", "show")}
    if spec.name not in links:
        raise UserError(
            f"--interfaces: no interface {spec.name!r} here (there are: "
            f"{', '.join(sorted(links))}); `ip link` lists them."
        )
    link = links[spec.name]
    if "UP" not in link.get("flags", []):
        raise UserError(f"interface {spec.name} is down: bring it up (`ip link set {spec.name} "
                        "up`, or connect it) and try again.")
    addrs = ip_json(family_flag(family), "addr", "show", "dev", spec.name)
    usable = [a for entry in addrs for a in entry.get("addr_info", [])
              if not a.get("tentative") and not a.get("deprecated")]
    # Global addresses first; a loopback server is reached from a host-scope one.
    found = [a["local"] for a in usable if a.get("scope") == "global"] or [
        a["local"] for a in usable if spec.name == "lo"]
    if not found:
        raise UserError(f"interface {spec.name} has no IPv{family} address of global scope: the "
                        f"server is reached over IPv{family}, so each interface needs one.")
    routes = [r for r in ip_json(family_flag(family), "route", "show", "table", "main", "dev",
                                 spec.name) if r.get("type", "unicast") == "unicast"]
    return Interface(spec.name, found[0], routes, spec.backup)


def resolve_server(host: str) -> tuple[str, int]:
    """The server's address and its family (4 or 6), resolved here."""
    import socket

    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise UserError(f"cannot resolve the server {host!r}: {exc.strerror}") from None
    addr = str(infos[0][4][0])
    return addr, 6 if ":" in addr else 4


def route_interface(host: str) -> InterfaceSpec:
    """The interface by which this host reaches `host` now (its main route)."""
    addr, family = resolve_server(host)
    found = ip_json(family_flag(family), "route", "get", addr)
    if not found or not found[0].get("dev"):
        raise UserError(f"no route to {host} ({addr}) from here: check `ip route get {addr}`")
    return InterfaceSpec(found[0]["dev"])


def read_limits() -> dict[str, int]:
    text = ip("mptcp", "limits", "show").stdout.split()
    return {k: int(v) for k, v in zip(text[::2], text[1::2], strict=True)}


# --- the undo log -------------------------------------------------------------------------------


class StateFile:
    """The changes made so far (hostchanges.py), each recorded before it is applied, so that
    `mpstream clean` can undo them after a SIGKILL."""

    def __init__(self, purpose: str):
        folder = state_dir()
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{os.getpid()}-{time.monotonic_ns()}.json"
        self.record: dict[str, Any] = {
            "owner_pid": os.getpid(), "netns": netns_id(), "purpose": purpose,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "changes": [],
        }  # fmt: skip
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record, indent=1))
        tmp.replace(self.path)

    def apply(self, change: HostChange) -> None:
        """Record the change, then make it."""
        self.record["changes"].append(change.record())
        self._write()
        change.apply()

    def undo_all(self) -> list[str]:
        """Undo in reverse order; every step is tried even if one fails. The file goes once
        all are undone."""
        problems = []
        for action in reversed(self.record["changes"]):
            try:
                from_record(action).undo()
            except Exception as exc:  # keep going: undo as much as possible
                problems.append(f"{action}: {exc}")
        if not problems:
            self.path.unlink(missing_ok=True)
        return problems


def state_dir() -> Path:
    """Where sessions record their changes now."""
    return kind_dir(HOST_CHANGES)


def record_dirs() -> list[Path]:
    """Where records may be: the state root's folder, and where older versions kept them."""
    return [state_dir(), legacy_dir(HOST_CHANGES)]


def clean(folders: Sequence[Path] | None = None) -> dict[str, Any]:
    """Undo what killed owners left in this network namespace; other namespaces' files and
    live owners' files are left alone (and counted)."""
    here = netns_id()
    out: dict[str, Any] = {"undone": [], "live": 0, "other_netns": 0, "problems": [],
                           "partial": []}
    folders = [folder for folder in (folders or record_dirs()) if folder.is_dir()]
    # A file being written when its owner was killed; the change it adds was not made yet.
    for path in sorted(p for folder in folders for p in folder.glob("*.tmp")):
        owner = path.name.partition("-")[0]
        if owner.isdigit() and not pid_alive(int(owner)):
            path.unlink(missing_ok=True)
            out["partial"].append(str(path))
    for path in sorted(p for folder in folders for p in folder.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if pid_alive(int(record.get("owner_pid", 0))):
            out["live"] += 1
            continue
        if record.get("netns") != here:
            out["other_netns"] += 1
            continue
        state = StateFile.__new__(StateFile)
        state.path, state.record = path, record
        problems = state.undo_all()
        out["undone"].append({"file": str(path), "purpose": record.get("purpose"),
                              "changes": len(record["changes"])})
        out["problems"] += problems
    return out


# --- the session's changes ----------------------------------------------------------------------


def _free_ints(used: set[int], start: int, count: int) -> list[int]:
    out: list[int] = []
    n = start
    while len(out) < count:
        if n not in used:
            out.append(n)
        n += 1
    return out


def _used_tables(family: int) -> set[int]:
    used = set()
    for r in ip_json(family_flag(family), "route", "show", "table", "all"):
        with contextlib.suppress(ValueError, TypeError):
            used.add(int(r.get("table", 254)))
    for r in ip_json(family_flag(family), "rule", "show"):
        with contextlib.suppress(ValueError, TypeError):
            used.add(int(r.get("table", 0)))
    return used


def _route_argv(route: dict[str, Any], dev: str) -> list[str]:
    argv = [route["dst"]]
    if route.get("gateway"):
        argv += ["via", route["gateway"]]
    argv += ["dev", dev]
    if route.get("metric") is not None:
        argv += ["metric", str(route["metric"])]
    if route.get("scope") and route["scope"] != "universe":
        argv += ["scope", route["scope"]]
    if route.get("prefsrc"):
        argv += ["src", route["prefsrc"]]
    return argv


@dataclass
class HostPaths(Network):
    """The host's interfaces set up for one session towards `server` over `transport`.

    The first interface carries the initial subflow (a rule sends traffic to the server through
    it); with a transport on the kernel's MPTCP each further interface gets a `subflow`
    endpoint (`backup` when asked). Use as a context manager. The client is this process's own
    network namespace; the server is another host, where nothing is run.
    """

    specs: list[InterfaceSpec]
    server: str
    transport: Transport = field(default_factory=lambda: get_transport("mptcp"))
    purpose: str = "mpstream play"
    interfaces: list[Interface] = field(default_factory=list)
    family: int = 4
    server_addr: str = ""
    _state: StateFile | None = None

    @property
    def paths(self) -> list[PathInfo]:
        return [PathInfo(i, itf.name, itf.address, itf.name, itf.backup)
                for i, itf in enumerate(self.interfaces)]

    def netns(self, host: str) -> str | None:
        if host != "client":
            raise UserError(f"{host}: the server of a real network is another host; mpstream "
                            "runs nothing there")
        return None

    def path_bytes(self) -> list[PathCounters]:
        return interface_bytes([itf.name for itf in self.interfaces])

    def capacity_bps(self, paths: Sequence[int]) -> float | None:
        return None  # a real path's rate is measured (paths check), not configured

    def start_events(self) -> None:
        pass  # a real network has no timed events of ours

    def down(self) -> None:
        self.restore()

    def __enter__(self) -> HostPaths:
        self.setup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def setup(self) -> None:
        if not self.specs:
            raise UserError("--interfaces: name at least one interface")
        self.server_addr, self.family = resolve_server(self.server)
        if self.specs[0].backup:
            raise UserError(f"--interfaces: the first interface ({self.specs[0].name}) carries "
                            "the initial subflow and cannot be a backup; list a backup later.")
        self.interfaces = [describe_interface(s, self.family) for s in self.specs]
        if not self.transport.kernel_mptcp or len(self.interfaces) < 2:
            return  # one path: nothing to set up, only its counters are read
        if not mptcp_enabled():
            raise UserError("MPTCP is off in this kernel: `sysctl -w net.mptcp.enabled=1` "
                            "(and a kernel of 5.15 or later with CONFIG_MPTCP).")
        self._state = StateFile(self.purpose)
        try:
            self._apply()
        except BaseException:
            self.restore()
            raise

    def _apply(self) -> None:
        state = self._state
        assert state is not None
        fam = family_flag(self.family)
        tables = _free_ints(_used_tables(self.family), FIRST_TABLE, len(self.interfaces))
        used_prio = {int(r.get("priority", 0)) for r in ip_json(fam, "rule", "show")}
        prios = _free_ints(used_prio, FIRST_PRIORITY, len(self.interfaces) + 1)
        # One table per interface: its connected prefixes and its default route, if any.
        for itf, table in zip(self.interfaces, tables, strict=True):
            state.apply(RouteTable(self.family, table, tuple(
                tuple(_route_argv(route, itf.name)) for route in itf.routes)))
        # The initial subflow leaves by the first interface; each address by its own.
        state.apply(Rule(self.family, prios[0], "to", self.server_addr, tables[0]))
        for itf, table, prio in zip(self.interfaces, tables, prios[1:], strict=True):
            state.apply(Rule(self.family, prio, "from", itf.address, table))
        self._add_endpoints(self.interfaces[1:])
        extra = len(self.interfaces) - 1
        self._raise_limits(subflows=extra, add_addr_accepted=extra)

    def _add_endpoints(self, extras: list[Interface]) -> None:
        state = self._state
        assert state is not None
        current = ip_json("mptcp", "endpoint", "show")
        by_addr = {e.get("address"): e for e in current}
        free_ids = _free_ints({int(e["id"]) for e in current}, 1, len(extras))
        for itf, ep_id in zip(extras, free_ids, strict=True):
            existing = by_addr.get(itf.address)
            if existing is not None:
                if not existing.get("subflow"):
                    raise UserError(
                        f"{itf.address} ({itf.name}) already has an MPTCP endpoint (id "
                        f"{existing['id']}) without the `subflow` flag, which mpstream did not "
                        "add and will not change: delete it (`ip mptcp endpoint delete id "
                        f"{existing['id']}`) or add `subflow` to it, then try again."
                    )
                continue  # someone's endpoint already does the job; leave it as it is
            flags = ("dev", itf.name, "subflow", *(["backup"] if itf.backup else []))
            state.apply(Endpoint(ep_id, itf.address, flags))

    def _raise_limits(self, **wanted: int) -> None:
        raise_limits(self._state, **wanted)

    def restore(self) -> None:
        if self._state is None:
            return
        state, self._state = self._state, None
        problems = state.undo_all()
        if problems:
            raise UserError(
                "could not undo every change to this host's network configuration ("
                + "; ".join(problems) + f"); the list is in {state.path}: run `mpstream clean`."
            )


def raise_limits(state: StateFile | None, **wanted: int) -> None:
    """Raise `ip mptcp limits` to at least `wanted` (capped at the kernel's maximum); the
    previous values are recorded first, and nothing changes when they already suffice."""
    assert state is not None
    before = read_limits()
    after = {k: max(before.get(k, 0), min(v, MAX_LIMIT)) for k, v in wanted.items()}
    if all(before.get(k) == v for k, v in after.items()):
        return
    merged = {"subflows": before.get("subflows", 0),
              "add_addr_accepted": before.get("add_addr_accepted", 0)}
    raised = {**merged, **after}
    state.apply(Limits(merged["subflows"], merged["add_addr_accepted"],
                       (raised["subflows"], raised["add_addr_accepted"])))


@contextlib.contextmanager
def announced(addresses: list[str], purpose: str = "mpstream serve") -> Iterator[list[int]]:
    """`signal` endpoints for `addresses` (local addresses of this host) while the block runs,
    so that MPTCP clients learn them; the server's subflow limit is raised to accept their
    joins. Yields the endpoint ids it added."""
    if not addresses:
        yield []
        return
    if not mptcp_enabled():
        raise UserError("MPTCP is off in this kernel: `sysctl -w net.mptcp.enabled=1`.")
    local = {a["local"] for entry in ip_json("addr", "show")
             for a in entry.get("addr_info", [])}
    for addr in addresses:
        try:
            ipaddress.ip_address(addr)
        except ValueError:
            raise UserError(f"--announce {addr!r}: give an IP address of this host") from None
        if addr not in local:
            raise UserError(f"--announce {addr}: not an address of this host (its addresses: "
                            f"{', '.join(sorted(local))})")
    state = StateFile(purpose)
    added: list[int] = []
    try:
        current = ip_json("mptcp", "endpoint", "show")
        by_addr = {e.get("address"): e for e in current}
        free_ids = _free_ints({int(e["id"]) for e in current}, 1, len(addresses))
        for addr, ep_id in zip(addresses, free_ids, strict=True):
            existing = by_addr.get(addr)
            if existing is not None:
                if not existing.get("signal"):
                    raise UserError(
                        f"{addr} already has an MPTCP endpoint (id {existing['id']}) without "
                        "the `signal` flag, which mpstream did not add and will not change: "
                        f"delete it (`ip mptcp endpoint delete id {existing['id']}`) and retry.")
                continue
            state.apply(Endpoint(ep_id, addr, ("signal",)))
            added.append(ep_id)
        raise_limits(state, subflows=MAX_LIMIT)
        yield added
    finally:
        problems = state.undo_all()
        if problems:
            raise UserError("could not undo the announced endpoints (" + "; ".join(problems)
                            + f"); run `mpstream clean` (state in {state.path}).")


def interface_bytes(names: list[str]) -> list[PathCounters]:
    """Received and sent bytes of each interface, from the kernel's counters."""
    links = {link["ifname"]: link for link in ip_json("-s", "link", "show")}
    out: list[PathCounters] = []
    for name in names:
        if name not in links:
            raise UserError(f"interface {name} disappeared during the session")
        stats = links[name].get("stats64", {})
        out.append({"rx_bytes": int(stats.get("rx", {}).get("bytes", 0)),
                    "tx_bytes": int(stats.get("tx", {}).get("bytes", 0))})
    return out
