"""Transports: how a trial's client and server speak, one object each, registered by name.

The trial, the player session, the bulk transfer and the report never branch on a transport's
name: they ask its object how to wrap a program, which paths it may use, how an emulated network
must be configured for it and what proves on the wire that it was spoken. Adding a transport is
one module in mpstream/transports/: a subclass and one `register` call.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from mpstream import pathpolicy
from mpstream.errors import UserError
from mpstream.hop import HopMode, HopOptions, QuicHop, hop_missing, quic_cc, quic_schedulers
from mpstream.network import Host, Network
from mpstream.proof import Proof

# The interface and the registry, in a module of their own that the transports in modules of
# their own (mpstream/transports/) import; imported from here by everyone else.
from mpstream.transportbase import (  # noqa: F401
    NAME_PATTERN,
    TRANSPORTS,
    Carrier,
    Direct,
    Transport,
    register,
)

# Client-side MPTCP counters (/proc/net/netstat, MPTcpExt) that prove MPTCP was spoken: the
# server's SYN/ACK carried MP_CAPABLE, and the server answered an MP_JOIN of an extra subflow.
MP_CAPABLE_COUNTER = "MPCapableSYNACKRX"
MP_JOIN_COUNTER = "MPJoinSynAckRx"


class MPTCP(Transport):
    name = "mptcp"
    label = "MPTCP"
    kernel_mptcp = True
    # The client's endpoint backup flag (MP_PRIO to the server) holds a metered path back.
    path_policies = ("always", "backup", "deadline", "fast-start")
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

    def missing(self) -> list[str]:
        out = []
        if shutil.which("mptcpize") is None:
            out.append("mptcpize is missing: install the mptcpd package (`make setup`)")
        if not mptcp_enabled():
            out.append("MPTCP is off in this kernel: `sysctl -w net.mptcp.enabled=1`")
        return out


class TCP(Transport):
    name = "tcp"
    label = "TCP"
    kernel_mptcp = False
    network_mode = "tcp"


class HopTransport(Transport):
    """A transport through the QUIC hop (mpstream/hop.py): the client's programs speak plain
    HTTP to a proxy on its own host, which carries it to a gateway in front of the server over
    (multipath) QUIC, or over TCP or MPTCP: the same hop without QUIC, which measures what the
    hop costs. The server listens on plain TCP (the gateway is its only client)."""

    kernel_mptcp = False
    carries_http_only = True
    runs_on_server = True
    hop_mode: ClassVar[HopMode]
    # The kernel transport the proxy speaks in the TCP and MPTCP modes (it proves them).
    kernel: ClassVar[Transport | None] = None

    def before(self, network: Network) -> dict[str, int]:
        return self.kernel.before(network) if self.kernel else {}

    def prove(self, network: Network, before: dict[str, int], who: str) -> Proof:
        return self.kernel.prove(network, before, f"{who} through the hop's proxy") \
            if self.kernel else Proof()

    def missing(self) -> list[str]:
        return hop_missing() + (self.kernel.missing() if self.kernel else [])

    def schedulers(self) -> dict[str, str]:
        # The hop's sender (the gateway; the proxy for uploads) chooses the path of each packet
        # of a multipath QUIC connection; the other modes have one path or the kernel's.
        return quic_schedulers() if self.hop_mode == "mpquic" else {}

    def refuses_cc(self, cc: str | None) -> str | None:
        if self.kernel is not None:
            return None  # the kernel's CC, as for the direct transports
        try:
            quic_cc(cc)
        except UserError as exc:
            return str(exc)
        return None

    @contextlib.contextmanager
    def carrier(self, network: Network, base_url: str, workdir: Path,
                cc: str | None = None) -> Iterator[Carrier]:
        url = urlsplit(base_url)
        if url.hostname != network.server_addr:
            raise UserError(f"transport {self.name}: the hop's gateway runs on the server host "
                            f"of the network ({network.server_addr}), not in front of {base_url}")
        options = HopOptions(self.hop_mode, cc=quic_cc(cc) if self.kernel is None else "cubic",
                             scheduler=self.scheduler_name or HopOptions.scheduler)
        with QuicHop(network, url.port or 80, options, workdir) as hop:
            yield hop

    def path_holder(self, network: Network, carried: Carrier) -> pathpolicy.PathHolder:
        if not isinstance(carried, QuicHop) or self.hop_mode != "mpquic":
            return pathpolicy.no_holder
        # The gateway knows a path by the client address it comes from.
        return lambda path, held: carried.hold(network.paths[path].client_addr, held)


class MPQUIC(HopTransport):
    name = "mpquic"
    label = "MPQUIC"
    # The gateway's path hold (its packet scheduler keeps data off a held path) holds a metered
    # path back; its control channel lifts and sets it while playing.
    path_policies = ("always", "backup", "deadline", "fast-start")
    network_mode = "mptcp"  # every path up, each pinned by its source address
    hop_mode = "mpquic"


class QUIC(HopTransport):
    name = "quic"
    label = "QUIC"
    network_mode = "tcp"
    hop_mode = "quic"


class MPTCPHop(HopTransport):
    name = "mptcp-hop"
    label = "MPTCP via hop"
    network_mode = "mptcp"
    hop_mode = "mptcp"
    kernel = MPTCP()


class TCPHop(HopTransport):
    name = "tcp-hop"
    label = "TCP via hop"
    network_mode = "tcp"
    hop_mode = "tcp"
    kernel = TCP()


def mptcp_counters(network: Network, host: Host = "client") -> dict[str, int]:
    """A host's MPTcpExt counters (/proc/net/netstat read on it)."""
    text = network.run(host, ["cat", "/proc/net/netstat"], capture_output=True, text=True,
                       check=True).stdout
    lines = text.splitlines()
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        if head.startswith("MPTcpExt:"):
            return dict(zip(head.split()[1:], map(int, values.split()[1:]), strict=True))
    return {}


# What the kernel's MPTCP schedulers do, for --list-schedulers.
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
register(MPQUIC())
register(QUIC())
register(MPTCPHop())
register(TCPHop())


def get_transport(name: str) -> Transport:
    """The transport registered as `name`; a clear error naming the ones there are."""
    try:
        return TRANSPORTS.get(name)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def for_network_mode(mode: str) -> Transport:
    """The transport an emulated profile's `mode` runs when a trial does not name one."""
    for transport in TRANSPORTS.values():
        if transport.network_mode == mode:
            return transport
    raise UserError(f"no transport runs a network in mode {mode!r}")
