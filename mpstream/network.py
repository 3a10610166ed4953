"""What a trial needs of a network, whatever the network is: an emulated topology in namespaces
(`mpstream.netem.topology.Topology`) or a real host's own interfaces
(`mpstream.netem.hostnet.HostPaths`); both in netem/, the part of the networks.

A trial reads the client's paths (address and interface), the bytes each path carried, runs
programs on the client or the server host, and tears the network down; it never asks which kind
of network it has. Both kinds derive from `Network`; `PathInfo` is the one description of a
path.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TypedDict, Unpack

from mpstream.errors import UserError

# A host of a trial's network: "client" or "server" (an emulated one also has its "link").
Host = str
# How a transport wraps a program so that its sockets speak it (`Transport.wrap`).
Wrapper = Callable[[Sequence[str]], list[str]]


def in_netns(netns: str | None, argv: Sequence[str] = ()) -> list[str]:
    """argv as it runs inside the network namespace `netns` (as it is when None); without
    argv, the prefix that does it."""
    return ["ip", "netns", "exec", netns, *argv] if netns else list(argv)


@dataclass(frozen=True)
class PathInfo:
    """One client path."""

    index: int
    name: str  # a label for tables (the profile's path label, or the interface's name)
    client_addr: str  # the client's address on this path (bind to it to pin traffic here)
    client_ifname: str  # the client's interface of this path
    backup: bool = False  # an MPTCP backup path: used only when the others fail


@dataclass(frozen=True)
class Competitor:
    """Another user of an emulated network beside the measured client: a host of its own
    (`host`, e.g. "user1", for `Network.run`), its label, the transport it speaks (a registered
    name) and whether its host is set up for MPTCP (that transport's network mode), its paths
    (`PathInfo.index` counts its own paths from 0) and what it does."""

    host: Host
    name: str
    transport: str
    mptcp: bool
    paths: tuple[PathInfo, ...]
    # None: it does what the trial's client does (plays, or transfers); else cross traffic, a
    # bulk download from `start_s` to `stop_s` (None: the trial's end) of the trial's clock.
    cross_traffic: tuple[float, float | None] | None = None


# The kernel's counters of one client path interface (rx: towards the client): rx_bytes,
# tx_bytes, and rx_packets and tx_packets where the network has them.
PathCounters = dict[str, int]


Output = int | IO[str] | IO[bytes] | None  # subprocess.PIPE, DEVNULL, a file, or inherited


class PopenOptions(TypedDict, total=False):
    """The subprocess keywords programs on a network's hosts are started with."""

    stdin: Output
    stdout: Output
    stderr: Output
    text: bool
    env: dict[str, str]
    start_new_session: bool


class RunOptions(PopenOptions, total=False):
    capture_output: bool
    check: bool
    timeout: float | None
    input: str | None


class Network(ABC):
    """A trial's network: its client paths, the server's address, programs run on either host,
    per-path counters, timed events and teardown."""

    server_addr: str
    # The path a single-path transport uses.
    single_path: int = 0
    # The congestion control the network's senders run (None: each host's own default).
    cc: str | None = None

    @property
    def competitors(self) -> list[Competitor]:
        """The network's other users, who share its links (a real host's network has none)."""
        return []

    def competitor_network(self, host: Host) -> Network:
        """The network as competitor `host` sees it (its host is the client)."""
        raise UserError(f"this network has no competing client {host!r}")

    @property
    @abstractmethod
    def paths(self) -> list[PathInfo]: ...

    @abstractmethod
    def netns(self, host: Host) -> str | None:
        """The host's network namespace; None when it is the one this process runs in."""

    @abstractmethod
    def path_bytes(self) -> list[PathCounters]:
        """Each client path interface's counters now, in path order."""

    @abstractmethod
    def capacity_bps(self, paths: Sequence[int]) -> float | None:
        """The sum of the nominal downlink rates of `paths` (None: unknown or unlimited)."""

    @abstractmethod
    def start_events(self) -> None:
        """Makes now the t=0 of the network's timed events (path failures), if it has any."""

    @abstractmethod
    def down(self) -> object:
        """Removes everything the network added; safe to call twice."""

    def command(self, host: Host, argv: Sequence[str], *,
                wrap: Wrapper | None = None) -> list[str]:
        """argv as it runs on `host`, wrapped by a transport's `wrap` when given."""
        wrapped = wrap(argv) if wrap is not None else list(argv)
        return in_netns(self.netns(host), wrapped)

    def run(self, host: Host, argv: Sequence[str], *, wrap: Wrapper | None = None,
            **kw: Unpack[RunOptions]) -> subprocess.CompletedProcess[str]:
        """Runs `argv` on `host` and waits for it (subprocess.run's keywords; what it prints
        is read as text where it is read: pass text=True)."""
        return subprocess.run(self.command(host, argv, wrap=wrap), **kw)

    def popen(self, host: Host, argv: Sequence[str], *, wrap: Wrapper | None = None,
              **kw: Unpack[PopenOptions]) -> subprocess.Popen[str]:
        """Starts `argv` on `host` (subprocess.Popen's keywords)."""
        return subprocess.Popen(self.command(host, argv, wrap=wrap), **kw)

    def wait_listening(self, host: Host, port: int, *, timeout_s: float = 10.0,
                       server: subprocess.Popen[str] | None = None) -> None:
        """Until `host` has a TCP socket listening on `port` (a server that prints nothing when
        it is ready, as iperf3); an error with the server's own words if it exits first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if server is not None and server.poll() is not None:
                said = server.stderr.read() if server.stderr else ""
                said = said.decode(errors="replace") if isinstance(said, bytes) else said
                raise UserError(f"{_argv_text(server.args)} exited "
                                f"({server.returncode}) before listening on port {port}: "
                                f"{said.strip()[:300]}")
            listing = self.run(host, ["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                               text=True, check=False).stdout
            if listing.strip():
                return
            time.sleep(0.05)
        raise UserError(f"nothing listens on port {port} on the {host} host after "
                        f"{timeout_s:g} s")


def _argv_text(args: object) -> str:
    return shlex.join(str(a) for a in args) if isinstance(args, list | tuple) else str(args)
