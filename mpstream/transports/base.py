"""The transport interface and its registry, below every transport: `Transport` (what one
transport says and does), `Carrier` (how a session's client reaches the server), `register`,
and the look-ups the rest of the code uses (`get_transport`, `for_network_mode`). The
transports themselves are the other modules of this folder (mpstream/transports/), one module
or package each, which the registry imports on its first lookup.

The trial, the player session, the bulk transfer and the report never branch on a transport's
name: they ask its object how to wrap a program, which paths it may use, how an emulated network
must be configured for it and what proves on the wire that it was spoken.
"""

from __future__ import annotations

import contextlib
import copy
from abc import ABC
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import mpstream.transports as transports_folder
from mpstream.errors import UserError
from mpstream.network import Network
from mpstream.proof import Proof
from mpstream.registry import Registry
from mpstream.transports import pathpolicy

# Where a carrier beside the browser answers the page with its own per-path figures, in the
# collector's shape (mphttp's proxy, the QUIC hop's proxy): a name under /.well-known/ that no
# origin's media or collector uses.
PATHS_TARGET = "/.well-known/mpstream/paths"


class Carrier(Protocol):
    """How the client reaches the server for one session: `base_url` is what it asks instead of
    the server's own address; `problem` says why the way broke (None while it carries);
    `proof` is what the way itself counted (None: the transport's `prove` judges)."""

    base_url: str
    # What carries the session when it is not the transport's own name (e.g. the QUIC library
    # and its multipath draft).
    implementation: str | None

    def problem(self) -> str | None: ...

    @property
    def paths_url(self) -> str | None:
        """Where the page asks for the paths' figures when the carrier measures its own paths
        (the server sees only its connections); None: from the collector, if at all."""
        ...

    def proof(self) -> Proof | None: ...

    def redundant_bytes(self) -> int | None:
        """Bytes sent more than once on purpose (a scheduler's re-injected copies, a range
        asked again); None where the way never does."""
        ...


@dataclass
class Direct:
    """The client asks the server itself."""

    base_url: str
    implementation: str | None = None
    paths_url: str | None = None

    def problem(self) -> str | None:
        return None

    def proof(self) -> Proof | None:
        return None

    def redundant_bytes(self) -> int | None:
        return None


class Transport(ABC):
    """One transport. `kernel_mptcp`: the sockets of both ends are the kernel's MPTCP (programs
    run under `mptcpize run`, or nginx listens with `multipath`). `network_mode`: how an
    emulated topology is set up for it (MPTCP endpoints on every path, or one path)."""

    name: ClassVar[str]
    label: ClassVar[str]
    # One line on how it carries a session (`mpstream list transports`, `play --help`).
    summary: ClassVar[str]
    kernel_mptcp: ClassVar[bool]
    network_mode: ClassVar[Literal["mptcp", "tcp"]]
    # Only a client that speaks HTTP can use it (a player, not iperf3).
    carries_http_only: ClassVar[bool] = False
    # It runs a program of its own on the server host (which a real network's server is not).
    runs_on_server: ClassVar[bool] = False
    # The path policies it can carry out (pathpolicy.py beside this module): which of them can
    # hold a metered path back; `always` needs nothing of it.
    path_policies: ClassVar[tuple[str, ...]] = ("always",)
    # The path scheduler chosen for one use (None: the transport's default): set on a copy by
    # `with_scheduler`, never on the registered object.
    scheduler: str | None = None

    def schedulers(self) -> dict[str, str]:
        """The path schedulers this transport can run (which bytes go on which path), by name,
        each with what it does, the default first; {} when there is none to choose."""
        return {}

    @property
    def scheduler_name(self) -> str | None:
        """The scheduler this use runs: the one chosen, else the transport's default."""
        return self.scheduler or next(iter(self.schedulers()), None)

    def with_scheduler(self, name: str | None) -> Transport:
        """This transport running scheduler `name` (None: its default); a name it lacks is an
        error naming the ones it has."""
        chosen = self.scheduled(name)
        refusal = chosen.scheduler_refusal()
        if refusal:
            raise UserError(refusal)
        return chosen

    def scheduled(self, name: str | None) -> Transport:
        """This transport set to run scheduler `name` (None: its default), unchecked: which
        schedulers there are is this machine's to say (the kernel's, a program's that must be
        built), so a condition names one anywhere and `scheduler_refusal` tells where it runs."""
        if name is None:
            return self
        chosen = copy.copy(self)
        chosen.scheduler = name
        return chosen

    def scheduler_refusal(self) -> str | None:
        """Why this use's scheduler cannot run here (None: it can, or none was chosen)."""
        name = self.scheduler
        if name is None:
            return None
        try:
            known = self.schedulers()
        except UserError as exc:  # what lists them is missing here (the QUIC hop's program)
            return str(exc)
        if not known:
            return (f"scheduler {name!r}: transport {self.name} has no path scheduler to "
                    "choose (see `mpstream list schedulers`)")
        if name not in known:
            return (f"scheduler {name!r}: transport {self.name} has {', '.join(known)} (see "
                    "`mpstream list schedulers`)")
        return None

    def fit_profile(self, profile: Any) -> Any:
        """An emulated network's profile as this use needs it (by default unchanged)."""
        return profile

    def path_holder(self, network: Network, carried: Carrier) -> pathpolicy.PathHolder:
        """How a path policy holds a path of `network` back and releases it during a session
        carried by `carried` (only for the policies in `path_policies` beyond `always`)."""
        return pathpolicy.no_holder

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """A client or server program as it must run to speak this transport."""
        return list(argv)

    def paths_in_use(self, network: Network) -> list[int]:
        """The indexes of the network's paths this transport may carry data on: every path but
        a backup one in the MPTCP network mode, the single path otherwise."""
        if self.network_mode == "mptcp":
            return [p.index for p in network.paths if not p.backup] or [0]
        return [network.single_path]

    def before(self, network: Network) -> dict[str, int]:
        """Counters to compare with after the trial (none by default)."""
        return {}

    def prove(self, network: Network, before: dict[str, int], who: str) -> Proof:
        """What shows that `who` (a browser, iperf3) spoke this transport since `before`."""
        return Proof()

    def machine_refusals(self) -> list[str]:
        """What this machine lacks to run this transport, each with its fix."""
        return []

    def low_latency_refusal(self) -> str | None:
        """Why this transport cannot carry a low-latency live stream, or None. Such a stream's
        segment being written is sent as it grows (chunked, no Content-Length), and the player
        needs each chunk as it arrives; the kernel's transports do that, and the hop passes
        each chunk on as it comes (docs/quic.md)."""
        return None

    def cc_refusal(self, cc: str | None) -> str | None:
        """Why this transport cannot run congestion control `cc` (a profile's), or None."""
        return None

    @contextlib.contextmanager
    def carrier(self, network: Network, base_url: str, workdir: Path,
                cc: str | None = None) -> Iterator[Carrier]:
        """The way from the client to the server at `base_url` for one session (anything it
        writes goes to `workdir`); by default the client asks the server directly."""
        yield Direct(base_url)


# What a transport's name may be: it names sessions in the collector (a 16-character column) and
# the page's `transport` parameter (player/src/probe/params.js checks the same pattern).
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,15}$"
# The folder's modules are imported on the first lookup, but for this one and the path policies,
# which the transports share.
TRANSPORTS: Registry[Transport] = Registry(transports_folder.__name__, transports_folder.__path__,
                                           "transport", lambda t: t.name, NAME_PATTERN,
                                           not_plugins=("base", "pathpolicy"))
register = TRANSPORTS.register


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
