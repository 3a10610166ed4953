"""What a network kind is to the rest of the runner: a `Site` makes a condition's network for one
trial (and undoes it), runs the condition's transport on it, serves its video and watches it;
before any trial it resolves a condition of its kind (runner/resolved.py) and says what such a
condition must give, what this machine needs for it and whether its trials can move to a
cluster's host. The workloads call a site through this interface and nothing else."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from mpstream.network import Network
from mpstream.runner.record import TrialRecord
from mpstream.runner.resolved import PathRoles, PlayerSettings, ResolvedCondition
from mpstream.runner.scenario import Condition, Scenario, Trial
from mpstream.transports.base import Transport, get_transport
from mpstream.transports.pathpolicy import DeadlineMarks, policy_named

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
    def __init__(self, resolved: ResolvedCondition, trial: Trial, tdir: Path, topo_name: str,
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
    def resolve(cls, cond: Condition, base_dir: Path) -> ResolvedCondition:
        """What the condition resolves to on a network of this kind, the files it names read
        here (relative ones from `base_dir`, the scenario's folder). By default a network
        mpstream does not make: no profile, no deployment, the transport the condition names
        (MPTCP unless it names one)."""
        return resolution(cond, get_transport(cond.transport or "mptcp").scheduled(cond.scheduler))

    @classmethod
    def machine_refusals(cls) -> list[str]:
        """What this machine lacks for any condition of this kind, each with its fix."""
        return []

    @classmethod
    def refusals(cls, resolved: ResolvedCondition) -> list[str]:
        """Why the resolved condition cannot run here (empty: it can)."""
        return []

    @classmethod
    def other_transports(cls, resolved: ResolvedCondition) -> list[Transport]:
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


def resolution(cond: Condition, transport: Transport,
               network: Profile | None = None) -> ResolvedCondition:
    """`cond` resolved over `transport` and, on an emulated network, `network` (the profile as
    built for that transport, with its deployment): the path policy the condition names, else
    its deployment's, else the default; the paths that policy holds back; the metered paths;
    what the player is told."""
    deployment = network.deployment if network is not None else None
    policy = policy_named(cond.path_policy or (deployment.path_policy if deployment else None))
    paths = PathRoles() if network is None else \
        PathRoles(held=tuple(policy.held_paths(network)), metered=network.metered_paths())
    marks = DeadlineMarks(*cond.deadline_marks) if cond.deadline_marks else DeadlineMarks()
    return ResolvedCondition(
        label=cond.label, kind=cond.kind, network=network, deployment=deployment,
        transport=transport, path_policy=policy, paths=paths,
        player=PlayerSettings(deadline_marks=marks, collector_url=cond.collector))
