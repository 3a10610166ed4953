"""What a workload is to the rest of the runner. The trial (runner/trial.py) hands a workload a
`TrialContext` (the network, the transport, the trial's folder, the site its video is served
from, the samplers to run meanwhile, what the condition resolved to) and gets back a
`WorkloadOutcome`; the run asks it what it needs and has it prepare its inputs; the report asks
it for its figures. None of them asks which workload it has."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel
from rich.console import Console

from mpstream.network import Network
from mpstream.runner.layout import TrialData
from mpstream.runner.metrics.metric import Metric
from mpstream.runner.record import MediaFacts
from mpstream.runner.resolved import ResolvedCondition
from mpstream.runner.scenario import Scenario, Trial
from mpstream.runner.sites.base import Site
from mpstream.transports.base import Transport

# Seconds a trial may take beyond its play duration (startup of servers and browser, teardown).
TRIAL_SLACK_S = 120


class TrialFailed(Exception):
    """The trial failed for a reason worth recording (not a bug)."""


@dataclass(frozen=True)
class SessionNames:
    """What a trial's video session is called: its id at the collector, the scenario label and
    trial number the page stores with it (None: none), and the file the page's screenshot goes
    to (None: none is taken). A run's trial is named after the run and itself
    (runner/trial.py); `mpstream play`'s after its options."""

    session_id: str
    scenario: str | None = None
    trial: int | None = None
    screenshot: Path | None = None


@dataclass
class TrialContext:
    network: Network
    transport: Transport
    scenario: Scenario
    trial: Trial
    tdir: Path
    session: SessionNames
    media_dir: Path | None
    site: Site
    watch: Callable[[], AbstractContextManager[object]]  # the samplers, for the workload's span
    # The condition as it resolved: its path policy, the paths it holds back, the metered paths
    # and their prices, what the player is told (`transport` is its transport).
    resolved: ResolvedCondition


class WorkloadOutcome(BaseModel):
    """`failure`: why the workload broke off (None: it did not). `started`: it got far enough
    for its data to be a result (a video session that showed a frame and then lost its only
    path is a result; one that never showed a frame is a failed trial)."""

    failure: str | None = None
    started: bool = True
    proof: dict[str, int] | None = None
    transport_implementation: str | None = None
    media: MediaFacts | None = None
    events_started_unix: float | None = None
    # The session's metered bytes, share and cost, and the path policy's toggles.
    metered: dict[str, float | None] | None = None
    path_policy_toggles: list[dict[str, Any]] = []
    # Bytes the transport sent more than once on purpose (None: it never does).
    redundant_bytes: int | None = None


class Workload(ABC):
    kind: ClassVar[str]  # the scenario kind that runs it
    actor: ClassVar[str]  # what failed, in a failed trial's reason ("player: …")
    # A player plays it: the scenario's players, browsers, codecs and adaptation rules are
    # crossed with its conditions, and each trial is a session of the collector's.
    plays_video: ClassVar[bool] = False
    # Programs each trial runs (checked before the first).
    tools: ClassVar[tuple[str, ...]] = ()
    # Its figures in the order the report shows them, before every other trial figure
    # (runner/metrics/metric.py).
    shown: ClassVar[tuple[Metric, ...]] = ()

    def check(self, scenario: Scenario) -> None:
        """ValueError when the scenario's fields do not fit this workload (as it loads)."""
        return None

    def check_inputs(self, scenario: Scenario) -> None:
        """UserError when an input the scenario names is unusable (before its run folder)."""
        return None

    def machine_refusals(self, scenario: Scenario) -> list[str]:
        """What this machine lacks for the scenario's trials, each with its fix."""
        return []

    def refusal(self, scenario: Scenario, resolved: ResolvedCondition) -> str | None:
        """Why this workload cannot run a condition of `scenario` as it resolved (its transport,
        its path policy, its network) (None: it can)."""
        return None

    def bound_here(self, scenario: Scenario) -> str | None:
        """Why the scenario's trials cannot move to another host (None: they can)."""
        return None

    def prepare(self, scenario: Scenario, out_dir: Path, todo: list[Trial], console: Console,
                progress: bool, resources: contextlib.ExitStack) -> Path | None:
        """The media the trials play (None: none), prepared now; what must run meanwhile (a
        live stream) goes on `resources`, which the run holds until its trials are done."""
        return None

    @abstractmethod
    def run(self, ctx: TrialContext) -> WorkloadOutcome: ...

    @abstractmethod
    def metrics(self, rec: TrialData) -> dict[str, float]:
        """The trial's own figures (the report adds the network's and the transport's)."""
