"""The transports through the QUIC hop (programs.py beside this module starts its proxy and
gateway): the client's programs speak plain HTTP to a proxy on its own host, which carries it to
a gateway in front of the server over (multipath) QUIC, or over TCP or MPTCP: the same hop
without QUIC, which measures what the hop costs. The server listens on plain TCP (the gateway is
its only client).

What differs between the two kinds of hop is each kind's own class: over QUIC (`mpquic`,
`quic`) the QUIC library's congestion control runs and nothing of the kernel proves the
transport; over the kernel's TCP or MPTCP (`mptcp-hop`, `tcp-hop`) that kernel transport
proves it and its congestion control runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from mpstream.errors import UserError
from mpstream.network import Network
from mpstream.proof import Proof
from mpstream.transports import pathpolicy
from mpstream.transports.base import Carrier, Transport, register
from mpstream.transports.direct import MPTCP, TCP
from mpstream.transports.hop.programs import (
    HopMode,
    HopOptions,
    QuicHop,
    hop_missing,
    quic_cc,
    quic_schedulers,
)


class HopTransport(Transport):
    """A transport through the hop, in mode `hop_mode`."""

    kernel_mptcp = False
    carries_http_only = True
    runs_on_server = True
    hop_mode: ClassVar[HopMode]

    def hop_cc(self, cc: str | None) -> str:
        """The congestion control the hop's connection runs for a profile's `cc`."""
        raise NotImplementedError

    def machine_refusals(self) -> list[str]:
        return hop_missing()

    @contextlib.contextmanager
    def carrier(self, network: Network, base_url: str, workdir: Path,
                cc: str | None = None) -> Iterator[Carrier]:
        url = urlsplit(base_url)
        if url.hostname != network.server_addr:
            raise UserError(f"transport {self.name}: the hop's gateway runs on the server host "
                            f"of the network ({network.server_addr}), not in front of {base_url}")
        options = HopOptions(self.hop_mode, cc=self.hop_cc(cc),
                             scheduler=self.scheduler_name or HopOptions.scheduler)
        with QuicHop(network, url.port or 80, options, workdir) as hop:
            yield hop


class QuicHopTransport(HopTransport):
    """The hop over QUIC: its library's congestion control, which must have the profile's."""

    def hop_cc(self, cc: str | None) -> str:
        return quic_cc(cc)

    def cc_refusal(self, cc: str | None) -> str | None:
        try:
            quic_cc(cc)
        except UserError as exc:
            return str(exc)
        return None


class KernelHopTransport(HopTransport):
    """The hop over the kernel's TCP or MPTCP (`kernel`), which proves it as it proves itself;
    the kernel's congestion control runs, as for the direct transports."""

    kernel: ClassVar[Transport]

    def hop_cc(self, cc: str | None) -> str:
        return HopOptions.cc  # the QUIC options go unused over the kernel's sockets

    def before(self, network: Network) -> dict[str, int]:
        return self.kernel.before(network)

    def prove(self, network: Network, before: dict[str, int], who: str) -> Proof:
        return self.kernel.prove(network, before, f"{who} through the hop's proxy")

    def machine_refusals(self) -> list[str]:
        return super().machine_refusals() + self.kernel.machine_refusals()


class MPQUIC(QuicHopTransport):
    name = "mpquic"
    label = "MPQUIC"
    summary = ("multipath QUIC over every path, through the QUIC hop (a proxy beside the "
               "client, a gateway in front of nginx)")
    # The gateway's path hold (its packet scheduler keeps data off a held path) holds a metered
    # path back; its control channel lifts and sets it while playing.
    path_policies = tuple(pathpolicy.POLICY_TYPES.names())  # every one
    network_mode = "mptcp"  # every path up, each pinned by its source address
    hop_mode = "mpquic"

    def schedulers(self) -> dict[str, str]:
        # The hop's sender (the gateway; the proxy for uploads) chooses the path of each packet
        # of the multipath QUIC connection.
        return quic_schedulers()

    def path_holder(self, network: Network, carried: Carrier) -> pathpolicy.PathHolder:
        if not isinstance(carried, QuicHop):
            return pathpolicy.no_holder
        # The gateway knows a path by the client address it comes from.
        return lambda path, held: carried.hold(network.paths[path].client_addr, held)


class QUIC(QuicHopTransport):
    name = "quic"
    label = "QUIC"
    summary = "QUIC over one path, through the QUIC hop"
    network_mode = "tcp"
    hop_mode = "quic"


class MPTCPHop(KernelHopTransport):
    name = "mptcp-hop"
    label = "MPTCP via hop"
    summary = "the QUIC hop's proxy and gateway speaking MPTCP: what the hop itself costs"
    network_mode = "mptcp"
    hop_mode = "mptcp"
    kernel = MPTCP()


class TCPHop(KernelHopTransport):
    name = "tcp-hop"
    label = "TCP via hop"
    summary = "the QUIC hop's proxy and gateway speaking TCP over one path"
    network_mode = "tcp"
    hop_mode = "tcp"
    kernel = TCP()


register(MPQUIC())
register(QUIC())
register(MPTCPHop())
register(TCPHop())
