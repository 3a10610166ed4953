"""Transports: how a trial's client and server speak, one object each, registered by name.

The trial, the player session, the bulk transfer and the report never branch on a transport's
name: they ask its object how to wrap a program, which paths it may use, how an emulated network
must be configured for it and what proves on the wire that it was spoken. Adding a transport is
one subclass here (or in a module of its own) and one `register` call.
"""

from __future__ import annotations

import re
import shutil
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from mpstream.errors import UserError
from mpstream.network import Network

# Client-side MPTCP counters (/proc/net/netstat, MPTcpExt) that prove MPTCP was spoken: the
# server's SYN/ACK carried MP_CAPABLE, and the server answered an MP_JOIN of an extra subflow.
MP_CAPABLE_COUNTER = "MPCapableSYNACKRX"
MP_JOIN_COUNTER = "MPJoinSynAckRx"


@dataclass
class Proof:
    """What a transport counted on the wire during a trial (e.g. MP_CAPABLE and MP_JOIN), and
    why that does not prove the transport was spoken (None when it does)."""

    counters: dict[str, int] = field(default_factory=dict)
    problem: str | None = None


class Transport(ABC):
    """One transport. `kernel_mptcp`: the sockets of both ends are the kernel's MPTCP (programs
    run under `mptcpize run`, or nginx listens with `multipath`). `network_mode`: how an
    emulated topology is set up for it (MPTCP endpoints on every path, or one path)."""

    name: ClassVar[str]
    label: ClassVar[str]
    kernel_mptcp: ClassVar[bool]
    network_mode: ClassVar[Literal["mptcp", "tcp"]]

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """A client or server program as it must run to speak this transport."""
        return list(argv)

    @abstractmethod
    def paths_in_use(self, network: Network) -> list[int]:
        """The indexes of the network's paths this transport may carry data on."""

    def before(self, network: Network) -> dict[str, int]:
        """Counters to compare with after the trial (none by default)."""
        return {}

    def prove(self, network: Network, before: dict[str, int], who: str) -> Proof:
        """What shows that `who` (a browser, iperf3) spoke this transport since `before`."""
        return Proof()

    def missing(self) -> list[str]:
        """What this machine lacks to run this transport, each with its fix."""
        return []


class MPTCP(Transport):
    name = "mptcp"
    label = "MPTCP"
    kernel_mptcp = True
    network_mode = "mptcp"

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return ["mptcpize", "run", *argv]

    def paths_in_use(self, network: Network) -> list[int]:
        return [p.index for p in network.paths if not p.backup] or [0]

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

    def paths_in_use(self, network: Network) -> list[int]:
        return [network.single_path]


def mptcp_counters(network: Network) -> dict[str, int]:
    """The client's MPTcpExt counters (/proc/net/netstat read on the client host)."""
    text = network.run("client", ["cat", "/proc/net/netstat"], capture_output=True, text=True,
                       check=True).stdout
    lines = text.splitlines()
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        if head.startswith("MPTcpExt:"):
            return dict(zip(head.split()[1:], map(int, values.split()[1:]), strict=True))
    return {}


def mptcp_enabled() -> bool:
    try:
        return Path("/proc/sys/net/mptcp/enabled").read_text().strip() == "1"
    except OSError:
        return False


TRANSPORTS: dict[str, Transport] = {}
# What a transport's name may be: it names sessions in the collector (a 16-character column) and
# the page's `transport` parameter (player/src/probe/params.js checks the same pattern).
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,15}$"


def register(transport: Transport) -> Transport:
    if not re.fullmatch(NAME_PATTERN, transport.name):
        raise ValueError(f"transport name {transport.name!r} does not match {NAME_PATTERN}")
    if transport.name in TRANSPORTS:
        raise ValueError(f"a transport named {transport.name!r} is registered already")
    TRANSPORTS[transport.name] = transport
    return transport


register(MPTCP())
register(TCP())


def get_transport(name: str) -> Transport:
    """The transport registered as `name`; a clear error naming the ones there are."""
    try:
        return TRANSPORTS[name]
    except KeyError:
        raise UserError(f"transport {name!r}: choose one of {', '.join(TRANSPORTS)}") from None


def for_network_mode(mode: str) -> Transport:
    """The transport an emulated profile's `mode` runs when a trial does not name one."""
    for transport in TRANSPORTS.values():
        if transport.network_mode == mode:
            return transport
    raise UserError(f"no transport runs a network in mode {mode!r}")
