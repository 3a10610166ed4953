"""MPTCP in the topology: each host's limits and the client's endpoints (one per extra path,
which the in-kernel path manager makes its subflows from), and mpstream's userspace path
manager in the client's namespace when the deployment asks for it (netem/pathmanager.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mpstream.errors import UserError
from mpstream.netem.emulators import READY_TIMEOUT_S
from mpstream.netem.profile import Profile
from mpstream.netem.steps import Step
from mpstream.netem.steps.addresses import ClientHost
from mpstream.netem.system import ip_batch, ip_batch_undo, kernel_has_mptcp, signals_deferred
from mpstream.network import Competitor, PathInfo, in_netns
from mpstream.transports.pathpolicy import mptcp_endpoint_id

MPTCP_MAX_SUBFLOWS = 8  # the kernel's MPTCP_PM_ADDR_MAX


@dataclass(frozen=True)
class MptcpHost:
    """One host's MPTCP configuration. A host that `speaks` MPTCP gets its limits and its
    `endpoints` (extra paths) whatever the kernel; the others get their limits only where the
    kernel has MPTCP."""

    ns: str
    speaks: bool
    subflows: int
    add_addr_accepted: int
    endpoints: tuple[PathInfo, ...] = ()
    fullmesh: bool = False


def mptcp_lines(host: MptcpHost, kernel_has_it: bool) -> list[str]:
    if not (host.speaks or kernel_has_it):
        return []
    lines = [f"mptcp limits set subflow {host.subflows} "
             f"add_addr_accepted {host.add_addr_accepted}"]
    for path in host.endpoints:
        flags = ["subflow"]
        if path.backup:
            flags.append("backup")
        if host.fullmesh:
            flags.append("fullmesh")
        lines.append(f"mptcp endpoint add {path.client_addr} dev {path.client_ifname} "
                     f"id {mptcp_endpoint_id(path.index)} {' '.join(flags)}")
    return lines


def _client(host: ClientHost, speaks: bool, *, subflows: int | None = None,
            add_addr_accepted: int | None = None, fullmesh: bool = False,
            endpoints: bool = True) -> MptcpHost:
    if not speaks:
        return MptcpHost(host.ns, False, 0, 0)
    extra = tuple(w.path for w in host.wires if w.path.index != host.primary)
    return MptcpHost(host.ns, True,
                     subflows if subflows is not None else len(extra),
                     add_addr_accepted if add_addr_accepted is not None else len(extra),
                     extra if endpoints else (), fullmesh)


def _server_subflows(profile: Profile, competitors: Sequence[Competitor],
                     userspace_pm: bool) -> int:
    mptcp = profile.mode == "mptcp"
    extra = [len(profile.paths) - 1 if mptcp else 0, profile.deployment.client.mptcp.subflows or 0]
    extra += [len(u.paths) - 1 for u in competitors if u.mptcp]
    if mptcp and userspace_pm:
        # A subflow the client's path manager adds again joins while the server may still
        # hold the old one (a server that only acks never times it out): the kernel's
        # largest limit, or the join is reset once its handshake is done.
        return MPTCP_MAX_SUBFLOWS
    return max(extra) if mptcp or any(u.mptcp for u in competitors) else 0


def mptcp_hosts(profile: Profile, clients: Sequence[ClientHost],
                competitors: Sequence[Competitor], server_ns: str,
                userspace_pm: bool) -> tuple[MptcpHost, ...]:
    """The client's, each competitor's (`clients` after the first, in the same order) and the
    server's MPTCP configuration."""
    own = profile.deployment.client.mptcp
    # Under the userspace path manager the subflows are its own, not the endpoints'.
    hosts = [_client(clients[0], profile.mode == "mptcp", subflows=own.subflows,
                     add_addr_accepted=own.add_addr_accepted, fullmesh=own.fullmesh,
                     endpoints=not userspace_pm)]
    hosts += [_client(host, user.mptcp) for host, user in zip(clients[1:], competitors,
                                                                  strict=True)]
    hosts.append(MptcpHost(server_ns, False, _server_subflows(profile, competitors,
                                                              userspace_pm), 0))
    return tuple(hosts)


@dataclass(frozen=True)
class Endpoints(Step):
    """Each host's MPTCP limits and endpoints. Undone, the endpoints are flushed; the limits,
    values like a namespace's settings, end with their namespace."""

    hosts: tuple[MptcpHost, ...]

    @property
    def within(self) -> frozenset[str]:
        return frozenset(host.ns for host in self.hosts)

    def up(self) -> None:
        kernel_has_it = kernel_has_mptcp()
        for host in self.hosts:
            ip_batch(host.ns, mptcp_lines(host, kernel_has_it))

    def undo(self) -> None:
        for host in reversed(self.hosts):
            if host.endpoints:
                ip_batch_undo(host.ns, ["mptcp endpoint flush"])


@dataclass
class PathManager(Step):
    """mpstream's userspace path manager in the client's namespace: it lives as long as the
    namespace, whose removal stops it with every process there."""

    client_ns: str
    state_dir: Path
    paths: tuple[PathInfo, ...]
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, compare=False)

    @property
    def within(self) -> frozenset[str]:
        return frozenset({self.client_ns})

    def up(self) -> None:
        args = [sys.executable, "-m", "mpstream.netem.pathmanager"]
        for path in self.paths:
            args += ["--path", f"{path.index},{path.client_addr},{path.client_ifname}"
                     + (",backup" if path.backup else "")]
        # Its events and actions go to a file, not a pipe: a topology `netem up` leaves
        # running outlives this process, and the path manager with it.
        events = self.state_dir / "pathmanager.jsonl"
        log = self.state_dir / "pathmanager.log"
        with events.open("wb") as out, log.open("wb") as err, signals_deferred():
            self._proc = subprocess.Popen(in_netns(self.client_ns, args),
                                          stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while b'"ready"' not in events.read_bytes():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                said = log.read_text(errors="replace").strip()
                raise UserError("the userspace path manager did not start: "
                                + (said.splitlines()[-1] if said else "no word from it"))
            time.sleep(0.01)

    def undo(self) -> None:
        # Only the one this process started: one of an earlier process goes with the namespace.
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
