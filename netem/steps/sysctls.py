"""The kernel settings of the topology's namespaces, and the coupled congestion controls they
name (BPF programs registered machine-wide, netem/coupled.py)."""

from __future__ import annotations

from dataclasses import dataclass

from mpstream.deployment import Deployment
from mpstream.netem import coupled
from mpstream.netem.steps import Step
from mpstream.netem.system import PROC_SYS, client_rmem, kernel_has_mptcp, sysctl

COMMON = {
    # No IPv6 chatter (router solicitations) in the path byte counters.
    "net.ipv6.conf.all.disable_ipv6": 1,
    "net.ipv6.conf.default.disable_ipv6": 1,
}
LINK = {
    "net.ipv4.ip_forward": 1,
    # Packets come back out of the emulator on a TUN device that is not the route back to
    # their source: reverse-path filtering would drop them.
    "net.ipv4.conf.all.rp_filter": 0,
    "net.ipv4.conf.default.rp_filter": 0,
}


def kernel_cc(cc: str) -> str:
    """The kernel's name of an end's congestion control."""
    return coupled.kernel_name(cc) if coupled.is_coupled(cc) else cc


@dataclass(frozen=True)
class CongestionControls(Step):
    """The coupled congestion controls `topology`'s ends run (`ccs`), registered and allowed
    for its namespaces; each use is recorded, so that the last topology using one unregisters
    it. Brought up before the namespaces and so undone after them: a CC is let go only once
    no process of the topology has a socket left that runs it."""

    topology: str
    ccs: tuple[str, ...]

    def up(self) -> None:
        for cc in self.ccs:
            coupled.acquire(cc, self.topology)

    def undo(self) -> None:
        for cc in reversed(self.ccs):
            coupled.release(cc, self.topology)


def host_sysctls(deployment: Deployment, host: str, userspace_pm: bool) -> dict[str, str | int]:
    """The settings of one end's namespace: the deployment's for that end over the ones every
    trial needs."""
    end = deployment.end(host)
    values: dict[str, str | int] = {
        "net.mptcp.enabled": 1,
        # The deployment's path manager is the client's; competing users keep the kernel's.
        "net.mptcp.path_manager": "userspace" if host == "client" and userspace_pm
        else "kernel",
        # The sender's scheduler decides; every end runs the server's, as before.
        "net.mptcp.scheduler": deployment.server.mptcp.scheduler,
        "net.mptcp.checksum_enabled": int(end.mptcp.checksum),
        "net.ipv4.tcp_congestion_control": kernel_cc(end.cc),
        # Each connection starts from scratch, not from metrics cached by an earlier trial.
        "net.ipv4.tcp_no_metrics_save": 1,
    }
    if host != "server":
        # A client's sockets start with a receive buffer that does not bound a young
        # connection's window, unless the deployment sets its own: with the kernel's
        # 128 KB, 6.18's MPTCP can stop a connection for good
        # (docs/netem.md#the-clients-receive-buffer).
        values["net.ipv4.tcp_rmem"] = client_rmem()
    values.update(end.sysctls)
    if not (PROC_SYS / "net/mptcp/path_manager").exists():
        values.pop("net.mptcp.path_manager")  # kernels before 6.15: pm_type 0 is the default
    if not kernel_has_mptcp():  # mode tcp on a kernel without MPTCP
        values = {k: v for k, v in values.items() if not k.startswith("net.mptcp.")}
    return values


@dataclass(frozen=True)
class Sysctls(Step):
    """Each end's namespace settings (`ends`: host and namespace) and the link namespace's.

    Undone, nothing is set back: a namespace is only ever set up fresh, so there is no earlier
    value to restore, and its settings end with it."""

    deployment: Deployment
    userspace_pm: bool
    ends: tuple[tuple[str, str], ...]
    link_ns: str

    @property
    def within(self) -> frozenset[str]:
        return frozenset({*(ns for _, ns in self.ends), self.link_ns})

    def up(self) -> None:
        for host, ns in self.ends:
            sysctl(ns, {**COMMON, **host_sysctls(self.deployment, host, self.userspace_pm)})
        sysctl(self.link_ns, {**COMMON, **LINK})

    def undo(self) -> None:
        pass
