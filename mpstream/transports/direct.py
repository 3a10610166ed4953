"""The kernel's transports, whose client asks the server directly: `mptcp` (both ends' sockets
are the kernel's MPTCP, programs run under `mptcpize run`) and `tcp` (single-path TCP); and the
MPTCP counters that prove the first was spoken.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mpstream.network import Host, Network
from mpstream.proof import Proof
from mpstream.transports import pathpolicy
from mpstream.transports.base import Carrier, Transport, register

# Client-side MPTCP counters (/proc/net/netstat, MPTcpExt) that prove MPTCP was spoken: the
# server's SYN/ACK carried MP_CAPABLE, and the server answered an MP_JOIN of an extra subflow.
MP_CAPABLE_COUNTER = "MPCapableSYNACKRX"
MP_JOIN_COUNTER = "MPJoinSynAckRx"


class MPTCP(Transport):
    name = "mptcp"
    label = "MPTCP"
    summary = "the kernel's Multipath TCP over every path (programs under mptcpize)"
    kernel_mptcp = True
    # The client's endpoint backup flag (MP_PRIO to the server) holds a metered path back.
    path_policies = tuple(pathpolicy.POLICY_TYPES.names())  # every one
    network_mode = "mptcp"

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return ["mptcpize", "run", *argv]

    def schedulers(self) -> dict[str, str]:
        # The kernel's registered schedulers (upstream Linux has only `default`; a kernel with
        # BPF or out-of-tree schedulers lists more). The emulated network sets it per namespace.
        listed = _proc_sys("net/mptcp/available_schedulers").split() or ["default"]
        return {name: KERNEL_SCHEDULERS.get(name, "registered with this kernel")
                for name in sorted(listed, key=lambda n: n != "default")}

    def path_holder(self, network: Network, carried: Carrier) -> pathpolicy.PathHolder:
        return pathpolicy.mptcp_holder(network.netns("client"))

    def fit_profile(self, profile: Any) -> Any:
        if self.scheduler is None:
            return profile
        # The sender's scheduler: the server end of the profile's deployment.
        dep = profile.deployment
        server = dep.server.model_copy(update={
            "mptcp": dep.server.mptcp.model_copy(update={"scheduler": self.scheduler})})
        return profile.model_copy(update={"deployment": dep.model_copy(update={
            "server": server})})

    def before(self, network: Network) -> dict[str, int]:
        return mptcp_counters(network)

    def prove(self, network: Network, before: dict[str, int], who: str) -> Proof:
        after = mptcp_counters(network)
        counters = {
            "mp_capable": after.get(MP_CAPABLE_COUNTER, 0) - before.get(MP_CAPABLE_COUNTER, 0),
            "mp_join": after.get(MP_JOIN_COUNTER, 0) - before.get(MP_JOIN_COUNTER, 0),
        }
        n_paths = len(network.paths)
        if counters["mp_capable"] <= 0:
            return Proof(counters, (
                f"transport mptcp, but {who} opened no MPTCP connection (no MP_CAPABLE SYN/ACK "
                f"counted in the client namespace): its sockets were plain TCP, so mptcpize did "
                f"not reach the process that opens them"))
        if n_paths > 1 and counters["mp_join"] <= 0:
            return Proof(counters, (f"transport mptcp, but no MP_JOIN subflow was opened over "
                                    f"the {n_paths} paths during the session ({who})"))
        return Proof(counters)

    def machine_refusals(self) -> list[str]:
        out = []
        if shutil.which("mptcpize") is None:
            out.append("mptcpize is missing: install the mptcpd package (`make setup`)")
        if not mptcp_enabled():
            out.append("MPTCP is off in this kernel: `sysctl -w net.mptcp.enabled=1`")
        return out


class TCP(Transport):
    name = "tcp"
    label = "TCP"
    summary = "the kernel's TCP over one path"
    kernel_mptcp = False
    network_mode = "tcp"


def mptcp_counters(network: Network, host: Host = "client") -> dict[str, int]:
    """A host's MPTcpExt counters (/proc/net/netstat read on it)."""
    text = network.run(host, ["cat", "/proc/net/netstat"], capture_output=True, text=True,
                       check=True).stdout
    lines = text.splitlines()
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        if head.startswith("MPTcpExt:"):
            return dict(zip(head.split()[1:], map(int, values.split()[1:]), strict=True))
    return {}


# What the kernel's MPTCP schedulers do, for `mpstream list schedulers`.
KERNEL_SCHEDULERS = {
    "default": "the kernel's own: the subflow with the lowest RTT that has window room; a backup "
               "subflow only when no other can send",
}


def _proc_sys(key: str) -> str:
    try:
        return Path("/proc/sys", key).read_text().strip()
    except OSError:
        return ""


def mptcp_enabled() -> bool:
    return _proc_sys("net/mptcp/enabled") == "1"


register(MPTCP())
register(TCP())
