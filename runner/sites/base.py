"""What a network kind is to the rest of the runner: a `Site` makes a condition's network for one
trial (and undoes it), runs the condition's transport on it, serves its video and watches it;
before any trial it says what a condition of its kind must give, what this machine needs for it
and whether its trials can move to a cluster's host. The workloads call a site through this
interface and nothing else."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from mpstream.deployment import Deployment
from mpstream.network import Network
from mpstream.runner.record import TrialRecord
from mpstream.runner.scenario import Condition, Scenario, Trial
from mpstream.transports.base import Transport, for_network_mode, get_transport

if TYPE_CHECKING:
    from mpstream.netem.profile import Profile
    from mpstream.server.stack import ServerStack


class Site(ABC):
    """How a condition's network is made for one trial (and undone), which transport it runs,
    where its video is served from, what watches it and what is checked around it."""

    kind: ClassVar[str]  # the condition kind that selects it
    # Its trials can run on another host of a cluster (else: why not, for the refusal).
    movable: ClassVar[bool] = True
    bound_because: ClassVar[str] = ""
    # Its conditions bring their media (a real server's manifest): a video scenario whose
    # conditions all do needs no [media] or [live].
    brings_media: ClassVar[bool] = False

    transport: Transport

    @abstractmethod
    def __init__(self, scenario: Scenario, trial: Trial, tdir: Path, topo_name: str,
                 pcap: bool): ...

    # --- a condition of this kind, before any trial --------------------------------------------

    @classmethod
    def check_fields(cls, cond: Condition) -> None:
        """ValueError when the condition's own fields do not fit this kind."""
        return None

    @classmethod
    def check_condition(cls, scenario: Scenario, cond: Condition) -> None:
        """UserError when the condition cannot run in this scenario (checked when it loads)."""
        return None

    @classmethod
    def profile_of(cls, scenario: Scenario, cond: Condition) -> Profile | None:
        """The emulated network's profile (None: the network is no emulated one)."""
        return None

    @classmethod
    def transport_of(cls, scenario: Scenario, cond: Condition) -> Transport:
        profile = cls.profile_of(scenario, cond)
        return transport_for(cond, profile.mode if profile else None)

    @classmethod
    def needs(cls) -> list[str]:
        """What this machine lacks for any condition of this kind, each with its fix."""
        return []

    @classmethod
    def problems(cls, scenario: Scenario, cond: Condition, transport: Transport) -> list[str]:
        """Why the condition cannot run here over `transport` (empty: it can)."""
        return []

    @classmethod
    def other_transports(cls, scenario: Scenario, cond: Condition) -> list[Transport]:
        """The transports the condition's other users speak (competitors)."""
        return []

    # --- one trial -------------------------------------------------------------------------

    @abstractmethod
    def open(self) -> AbstractContextManager[Network]: ...

    @abstractmethod
    def serve_video(self, network: Network, media_dir: Path | None, workdir: Path,
                    player: str) -> AbstractContextManager[tuple[ServerStack, str]]:
        """The server of a video session and the manifest to play (a path on it, or a URL)."""

    def watch(self, network: Network, tdir: Path) -> AbstractContextManager[object]:
        return contextlib.nullcontext()

    def around(self, record: TrialRecord) -> AbstractContextManager[object]:
        return contextlib.nullcontext()

    def metered_paths(self) -> dict[int, float | None] | None:
        """The network's metered paths and their prices per GB (None: it does not say)."""
        return None

    def held_paths(self) -> list[int] | None:
        """The paths the condition's path policy holds back (None: the metered ones)."""
        return None

    def deployment(self) -> Deployment | None:
        """What the trial's server and client run, where mpstream sets it (None: a real host's
        own settings, which mpstream does not change)."""
        return None


def transport_for(cond: Condition, profile_mode: str | None = None) -> Transport:
    """The condition's transport: the one it names, else what its profile's mode runs
    (`profile_mode`; a network without a profile: MPTCP), running the condition's scheduler."""
    if cond.transport is not None:
        transport = get_transport(cond.transport)
    elif profile_mode is None:
        transport = get_transport("mptcp")
    else:
        transport = for_network_mode(profile_mode)
    return transport.with_scheduler(cond.scheduler)
