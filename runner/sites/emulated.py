"""Condition kind "emulated": a fresh topology in namespaces for each trial, built from the
condition's netem profile (its deployment, its `set` overrides and the transport's network mode
applied, once, as the condition resolves), nginx and the collector on its server host, the
kernel samplers on both ends."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mpstream.deployment import load_deployment
from mpstream.errors import UserError
from mpstream.network import Network
from mpstream.runner.layout import (
    LINK_STATS_JSON,
    QUEUE_DELAY_DIR,
    RUN_COLLECTOR_ENV,
    write_json,
)
from mpstream.runner.metrics.evidence import write_clock
from mpstream.runner.resolved import ResolvedCondition
from mpstream.runner.samplers.capture import (
    CounterSnapshots,
    PacketCapture,
    namespace_targets,
)
from mpstream.runner.samplers.kernel import SubflowSampler
from mpstream.runner.scenario import Condition, Trial
from mpstream.runner.sites import register
from mpstream.runner.sites.base import Site, resolution
from mpstream.transports import pathpolicy
from mpstream.transports.base import Transport, for_network_mode, get_transport

if TYPE_CHECKING:
    from mpstream.netem.profile import Profile
    from mpstream.server.stack import ServerStack


class EmulatedSite(Site):
    """A fresh topology in namespaces, built from the condition's resolved network (its
    overrides, its deployment and the transport's network mode applied); the profile as the
    topology builds it goes to profile.json."""

    kind = "emulated"

    def __init__(self, resolved: ResolvedCondition, trial: Trial, tdir: Path, topo_name: str,
                 pcap: bool):
        profile = resolved.topology_profile()
        assert profile is not None  # an emulated condition resolves to its network
        self.profile, self.transport = profile, resolved.transport
        self.tdir, self.topo_name, self.pcap = tdir, topo_name, pcap
        write_json(tdir / "profile.json", self.profile.model_dump(mode="json"))

    @classmethod
    def resolve(cls, cond: Condition, base_dir: Path) -> ResolvedCondition:
        """The condition's profile (a file beside the scenario, else a preset) with its
        deployment and `set` overrides, built for its transport: the transport it names sets
        the network's mode (one path, or MPTCP on all), else the profile's mode names it."""
        from mpstream.netem.competitors import with_transports
        from mpstream.netem.profile import load_profile

        assert cond.profile is not None  # check_fields
        # A single path (netem/singlepath.py) is played by a one-path transport, TCP unless named.
        transport_name = cond.transport or ("tcp" if cond.single_path else None)
        named = get_transport(transport_name) if transport_name is not None else None
        overrides = dict(cond.set)
        if named is not None:
            overrides["mode"] = named.network_mode
        deployment = None if cond.deployment is None else \
            load_deployment(cond.deployment, base_dir)
        local = base_dir / cond.profile
        profile = load_profile(local.resolve() if local.is_file() else cond.profile,
                               overrides or None, deployment=deployment)
        if cond.single_path is not None:
            profile = _on_single_path(profile, cond.single_path)
        with_transports(profile)  # a competitor's unknown transport is the profile's error
        transport = (named or for_network_mode(profile.mode)).scheduled(cond.scheduler)
        return resolution(cond, transport, transport.fit_profile(profile))

    @classmethod
    def check_fields(cls, cond: Condition) -> None:
        if cond.profile is None:
            raise ValueError("an emulated condition needs `profile` (or kind = \"real\" with "
                             "`url` and `interfaces`)")
        if cond.url is not None or cond.interfaces is not None:
            raise ValueError("`url` and `interfaces` go with kind = \"real\"")
        if cond.collector is not None:
            raise ValueError("`collector` goes with kind = \"real\": an emulated network's "
                             "server runs its own")

    @classmethod
    def machine_refusals(cls) -> list[str]:
        from mpstream.netem.teardown import EMULATOR

        if not EMULATOR.exists():
            return [f"the link emulator {EMULATOR} is not built: run `make emulator`"]
        return []

    @classmethod
    def refusals(cls, resolved: ResolvedCondition) -> list[str]:
        from mpstream.netem import coupled
        from mpstream.netem.competitors import with_transports
        from mpstream.netem.system import require_cc

        profile, transport = resolved.network, resolved.transport
        assert profile is not None
        problems = []
        try:
            pathpolicy.check_for(resolved.path_policy, transport, profile)
        except UserError as exc:
            problems.append(str(exc))
        refusal = transport.cc_refusal(profile.cc)
        if refusal:
            problems.append(refusal)
        elif not coupled.is_coupled(profile.cc):
            # Allowed now, from the machine's own namespace (as the topology would): the hosts
            # of a local cluster run in namespaces of their own, which may not widen the list.
            # A CC this kernel lacks stays that condition's failure, recorded per trial.
            with contextlib.suppress(UserError):
                require_cc(profile.cc)
        gateways = [t.name for t in [transport, *cls.other_transports(resolved)]
                     if t.runs_on_server]
        if len(gateways) > 1:
            # Each would start its gateway on the one server host, on the same ports.
            problems.append(f"{len(gateways)} users speak transports that run a gateway on the "
                            f"server host ({', '.join(gateways)}): one user at most may")
        for user, speaks in with_transports(profile):
            if user.traffic == "bulk" and speaks.carries_http_only:
                problems.append(f"competitor {user.name or user.transport}: cross traffic is a "
                                f"bulk download, which {speaks.name} cannot carry (it carries "
                                "a player's HTTP only): give it mptcp or tcp")
            problems += [f"competitor {user.name or user.transport}: {refused}"
                         for refused in [speaks.cc_refusal(profile.cc)] if refused]
        return problems

    @classmethod
    def other_transports(cls, resolved: ResolvedCondition) -> list[Transport]:
        from mpstream.netem.competitors import with_transports

        assert resolved.network is not None
        return [speaks for _, speaks in with_transports(resolved.network)]

    @contextlib.contextmanager
    def open(self) -> Iterator[Network]:
        from mpstream.netem.topology import Topology

        with Topology.up(self.profile, name=self.topo_name) as topo:
            try:
                yield topo
            finally:
                # The emulators write their counts when they stop: what each link dropped, so
                # that a loss can be placed on the link or on a host.
                write_json(self.tdir / LINK_STATS_JSON, topo.down(keep=self.tdir / QUEUE_DELAY_DIR))

    @contextlib.contextmanager
    def serve_video(self, network: Network, media_dir: Path | None, workdir: Path,
                    player: str) -> Iterator[tuple[ServerStack, str]]:
        from mpstream.player.session import MANIFESTS
        from mpstream.server.stack import ServerStack

        if media_dir is None:
            raise UserError("an emulated video trial needs media (the scenario's [media] or "
                            "[live])")
        # Two collector workers: a trial's players post a few events a second between them,
        # and the machine-sized default (five on two cores) spent 4-6 s of both cores booting
        # at every trial's start, then 2-5 s stopping.
        with ServerStack(media_dir, netns=network.netns("server"), host=network.server_addr,
                         workdir=workdir, mptcp=self.transport.kernel_mptcp,
                         send=self.profile.deployment.server.nginx,
                         collector_workers=2, one_trial=True,
                         shared_collector=os.environ.get(RUN_COLLECTOR_ENV) or None) as stack:
            yield stack, MANIFESTS[player]

    def watch(self, network: Network, tdir: Path) -> contextlib.AbstractContextManager[object]:
        return Samplers(network, tdir, pcap=self.pcap)


def _on_single_path(profile: Profile, name: str) -> Profile:
    """The network with its one path for the single path `name` chosen (and, for the sum, at
    the paths' summed rates)."""
    from mpstream.netem.profile import load_profile
    from mpstream.netem.singlepath import single_path_named

    try:
        return load_profile(profile, single_path_named(name).overrides(profile))
    except ValueError as exc:
        raise UserError(str(exc)) from None


class Samplers:
    """What watches a trial on an emulated network: both ends' kernel samplers sharing one time
    origin (the events' t=0), the MPTcpExt counters of both namespaces before and after, and
    with `pcap` the packet headers of the client's namespace (every path) and the server's."""

    def __init__(self, network: Network, tdir: Path, *, pcap: bool = False):
        t0 = time.monotonic()
        write_clock(tdir, t0, time.time())
        self.tdir = tdir
        path_of = {p.client_addr: p.index for p in network.paths}.get
        hosts = {"client": network.netns("client"), "server": network.netns("server")}
        self.samplers = [
            SubflowSampler(ns, host, tdir / f"samples-{host}.csv", path_of, t0=t0,
                           mptcp_out=tdir / f"samples-{host}-mptcp.csv")
            for host, ns in hosts.items()
        ]
        self.counters = CounterSnapshots(hosts)
        self.capture = None
        if pcap:
            # One capture a namespace, whatever the number of paths (capture.py says why).
            self.capture = PacketCapture(namespace_targets(hosts["client"], hosts["server"]),
                                         tdir / "pcap")

    def __enter__(self) -> Samplers:
        self.counters.take_before()
        started: list[SubflowSampler | PacketCapture] = []
        try:
            if self.capture is not None:
                self.capture.start()
                started.append(self.capture)
            for s in self.samplers:
                s.start()
                started.append(s)
        except BaseException:
            for thing in reversed(started):
                thing.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for s in self.samplers:
            s.stop()
        if self.capture is not None:
            self.capture.stop()
        try:
            self.counters.take_after()
        finally:
            write_json(self.tdir / "mptcp-counters.json", self.counters.as_json())


register(EmulatedSite)
