"""Condition kind "real": this host's own interfaces towards a real server, whose manifest the
condition names by URL. The page and a collector run on loopback; `paths check` measures the
interfaces before and after each trial. Bound to this machine: its trials never move to a
cluster's host."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mpstream.errors import UserError
from mpstream.network import Network
from mpstream.runner.record import PathCheck, TrialRecord
from mpstream.runner.resolved import ResolvedCondition
from mpstream.runner.scenario import Condition, Scenario, Trial
from mpstream.runner.sites import register
from mpstream.runner.sites.base import Site
from mpstream.runner.workloads import workload_for

if TYPE_CHECKING:
    from mpstream.server.stack import ServerStack


class RealSite(Site):
    """This host's own interfaces towards the condition's server: the page and a collector on
    loopback, the media from the condition's URL, `paths check` before and after the trial."""

    kind = "real"
    movable = False
    bound_because = "bound to this machine's own interfaces"
    brings_media = True

    def __init__(self, resolved: ResolvedCondition, trial: Trial, tdir: Path, topo_name: str,
                 pcap: bool):
        from mpstream.player.real import interface_specs

        self.cond = trial.condition
        self.url = self.cond.url_for(trial.player or "dashjs")
        self.transport = resolved.transport
        self.specs = interface_specs(self.url, self.cond.interfaces)

    @classmethod
    def check_fields(cls, cond: Condition) -> None:
        if cond.url is None:
            raise ValueError("a real condition needs `url` (the server's manifest)")
        if cond.profile is not None or cond.set:
            raise ValueError("a real condition has no `profile` or `set`: its paths are the "
                             "host's interfaces")

    @classmethod
    def check_condition(cls, scenario: Scenario, cond: Condition) -> None:
        from mpstream.netem.hostnet import parse_interfaces

        if not workload_for(scenario.kind).plays_video:
            raise UserError(f"real conditions play video; a {scenario.kind} scenario runs on "
                            "emulated paths only")
        try:
            for player in scenario.players:
                cond.url_for(player)
            if cond.interfaces:
                parse_interfaces(cond.interfaces)
        except ValueError as exc:
            raise UserError(str(exc)) from None

    @classmethod
    def refusals(cls, resolved: ResolvedCondition) -> list[str]:
        problems = []
        transport = resolved.transport
        if transport.scheduler is not None and transport.kernel_mptcp:
            problems.append(f"scheduler {transport.scheduler}: on a real host the kernel's MPTCP "
                            "scheduler is the host's own setting")
        policy = resolved.path_policy
        if policy.acts:
            problems.append(f"path policy {policy.name}: a real host's interfaces say nothing "
                            "of which is metered: give the condition an emulated profile")
        if transport.runs_on_server:
            problems.append(f"transport {transport.name} runs a gateway on the server host, "
                            "which mpstream does not run on a real network's server: use an "
                            "emulated profile")
        return problems

    def open(self) -> contextlib.AbstractContextManager[Network]:
        from mpstream.player.real import real_network

        return real_network(self.url, self.specs, self.transport)

    @contextlib.contextmanager
    def serve_video(self, network: Network, media_dir: Path | None, workdir: Path,
                    player: str) -> Iterator[tuple[ServerStack, str]]:
        from mpstream.player.real import page_server

        with page_server() as stack:
            yield stack, self.url

    @contextlib.contextmanager
    def around(self, record: TrialRecord) -> Iterator[None]:
        from mpstream.netem.pathcheck import check_paths

        def check() -> PathCheck:
            return PathCheck.model_validate(check_paths(
                self.url, self.specs, seconds=self.cond.check_s, transport=self.transport))

        record.url = self.url
        if not self.cond.check_s:
            yield
            return
        checks = record.path_checks = {"before": check()}
        try:
            yield
        finally:
            checks["after"] = check()


register(RealSite)
