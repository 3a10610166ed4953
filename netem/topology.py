"""A multi-path topology in network namespaces.

    client ns (mps-N-client)        link ns (mps-N-link)                 server ns (mps-N-server)
    p0 10.1.0.2 ──veth── c0 ─► ta0 ═[emulator 0]═ tb0 ─┐
    p1 10.1.1.2 ──veth── c1 ─► ta1 ═[emulator 1]═ tb1 ─┼─ s0 ──veth── eth0 10.2.0.2
                                                        └ (optional shared server link: tsa ═ tsb)
    user1 ns (mps-N-user1), a competing client:
    p0 10.1.2.2 ──veth── c2 ─► (its own emulator 2, or `via` the client's emulator 0 or 1)

Each path's emulator (build/mpstream-linkem) sits between two TUN devices in the link
namespace: policy routing sends what arrives from client interface c<i> into ta<i> and what
arrives from the server for 10.1.<i>.0/24 into tb<i>; the emulator moves packets between the
two, each direction through its own link model. Nothing is created in the root namespace and no
namespace has a route off the machine: the only routes are to the topology's own subnets.

Every client path, the competitors' after the client's, has a slot: its subnet 10.1.<slot>.0/24
and its interface c<slot> in the link namespace. A path with a link of its own has the emulator
of its slot; a competitor's path `via` a client path is routed into that path's emulator, so the
two share its rate and queue.

A topology is built as steps (netem/steps/): namespaces, settings, links, addresses and routes,
MPTCP endpoints, caps, emulators, the path check and the path manager, each made by a small
object that also knows how to take itself away. `Topology` composes them: up in order, down in
reverse, also when one fails or Ctrl-C lands half-way.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mpstream.errors import UserError
from mpstream.netem import competitors, coupled, emulators, pathcaps, teardown
from mpstream.netem.emulators import Wire
from mpstream.netem.profile import Profile, load_profile
from mpstream.netem.steps import Step, Steps
from mpstream.netem.steps.addresses import SERVER_ADDR, Addresses, ClientHost
from mpstream.netem.steps.emulation import (
    Caps,
    EmulatorRouting,
    Emulators,
    VerifyPaths,
    path_caps,
)
from mpstream.netem.steps.mptcp import Endpoints, PathManager, mptcp_hosts
from mpstream.netem.steps.namespaces import Links, Namespaces
from mpstream.netem.steps.sysctls import CongestionControls, Sysctls
from mpstream.netem.system import (
    require_cc,
    require_mptcp,
    require_root,
    require_scheduler,
    require_tools,
    sh,
)
from mpstream.netem.teardown import NAME_RULE, competitor_role, netns_name, read_state
from mpstream.network import Competitor, Network, PathCounters, PathInfo


def _path_info(profile: Profile, index: int) -> PathInfo:
    return PathInfo(index=index, name=profile.path_label(index), client_addr=f"10.1.{index}.2",
                    client_ifname=f"p{index}", backup=profile.paths[index].backup)


def _competitors(profile: Profile, name: str) -> list[tuple[Competitor, list[Wire]]]:
    """The profile's competing clients and their wires, in slots after the client's paths."""
    out = []
    slot = len(profile.paths)
    for k, (spec, speaks) in enumerate(competitors.with_transports(profile)):
        host = competitor_role(k)
        ns = netns_name(name, host)
        wires = []
        for j, path in enumerate(spec.paths):
            info = PathInfo(index=j, name=f"{profile.competitor_name(k)}/p{j}",
                            client_addr=f"10.1.{slot}.2", client_ifname=f"p{j}")
            link = slot if path.via is None else profile.path_index(path.via)
            wires.append(Wire(host, ns, info, slot, link))
            slot += 1
        cross = (spec.start_s, spec.stop_s) if spec.traffic == "bulk" else None
        user = Competitor(host=host, name=profile.competitor_name(k), transport=spec.transport,
                          mptcp=speaks.network_mode == "mptcp",
                          paths=tuple(w.path for w in wires), cross_traffic=cross)
        out.append((user, wires))
    return out


class Topology(Network):
    """A running topology. Build it with `Topology.up(profile, name)`; use it as a context
    manager so that it is always torn down, or call `down()`."""

    def __init__(self, profile: Profile, name: str, *, emulated: bool,
                 emulator_pids: Sequence[int] = (), owner_pid: int | None = None):
        self.profile = profile
        self.name = name
        self.emulated = emulated
        self.emulator_pids = list(emulator_pids)
        self.owner_pid = owner_pid if owner_pid is not None else os.getpid()
        self.client_ns = netns_name(name, "client")
        self.server_ns = netns_name(name, "server")
        self.link_ns = netns_name(name, "link")
        self.server_addr = SERVER_ADDR
        self.single_path = profile.tcp_path
        self.cc = profile.cc
        self._paths = [_path_info(profile, i) for i in range(len(profile.paths))]
        users = _competitors(profile, name)
        self._competitors = [user for user, _ in users]
        self.wires = [Wire("client", self.client_ns, p, p.index, p.index) for p in self._paths]
        self.wires += [wire for _, wires in users for wire in wires]
        self.state_dir = teardown.state_dir() / name
        self._steps: Steps | None = None  # the steps this process brings up
        self._down = False
        self.detached = False

    # ---- life cycle -------------------------------------------------------------------------

    @classmethod
    def up(cls, profile: Profile | str | Path, name: str = "mps", *,
           emulate: bool = True) -> Topology:
        """Builds the namespaces, links, routes, MPTCP configuration and emulators.

        `emulate=False` gives plain, unshaped links (to tell the emulator's effect apart).
        A failure or Ctrl-C part-way tears down what was made.
        """
        profile = load_profile(profile)
        check_prerequisites(profile)
        if not NAME_RULE.match(name):
            raise UserError(
                f"topology name {name!r}: use 1 to 32 letters, digits or underscores, "
                "starting with a letter or digit"
            )
        if teardown.owner(name)[0] == "stale":
            # Left by a process that died without tearing down (kill -9): not anyone's.
            teardown.remove_topology(name)
        if teardown.topology_namespaces(name) or teardown.record_path(name):
            raise UserError(
                f"a topology named {name!r} already exists: remove it with "
                f"`mpstream netem down {name}` or choose another --name"
            )
        if emulate and not teardown.EMULATOR.exists():
            raise UserError(
                f"the link emulator is not built ({teardown.EMULATOR} is missing): "
                "run `make emulator`"
            )
        topo = cls(profile, name, emulated=emulate)
        try:
            topo._build()
        except BaseException:
            # Ctrl-C or an error half-way: nothing may stay behind.
            topo.down()
            raise
        return topo

    @classmethod
    def attach(cls, name: str) -> Topology:
        """A handle on a topology built earlier (e.g. by `mpstream netem up`)."""
        state = read_state(name)
        if state is None:
            if teardown.topology_namespaces(name):
                raise UserError(
                    f"topology {name!r} has namespaces but no state file (its tool was killed "
                    f"while building it): remove it with `mpstream netem down {name}`"
                )
            raise UserError(f"no topology named {name!r} is up (see `mpstream list topologies`)")
        profile = Profile.model_validate(state["profile"])
        topo = cls(profile, name, emulated=state["emulated"],
                   emulator_pids=state["emulator_pids"], owner_pid=state["owner_pid"])
        topo.detached = bool(state.get("detached"))
        # Where it was recorded: an older version's layout, or the root of another setting.
        record = teardown.record_path(name)
        if record is not None:
            topo.state_dir = record.with_suffix("")
        return topo

    def detach(self) -> None:
        """Marks the topology as meant to outlive this process (`mpstream netem up`), so that
        it is not taken for the leftover of a crashed program."""
        self.detached = True
        self._write_state()

    def down(self, keep: Path | None = None) -> dict[str, Any]:
        """Undoes the topology's steps, last first: stops every process in the namespaces,
        removes them; returns the emulators' stats (per path, per direction) when they wrote
        some. With `keep`, each emulator's queueing-delay windows are copied there first
        (`<label>.jsonl`, e.g. path0.jsonl)."""
        if self._down:
            return {}
        self._down = True
        # Built by another process (attached), or interrupted before its steps were planned:
        # every step counts as up, and undoing what is not there is fine.
        steps = self._steps if self._steps is not None else Steps(self._plan(), already_up=True)
        steps.down()
        stats = emulators.read_stats(self.state_dir)
        if keep is not None:
            emulators.keep_delay_logs(self.state_dir, keep)
        # The record goes last: until then `mpstream clean` finds whatever a failure left.
        teardown.remove_state(self.name)
        return stats

    def __enter__(self) -> Topology:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # ---- running programs on the hosts ------------------------------------------------------

    @property
    def paths(self) -> list[PathInfo]:
        return self._paths

    @property
    def competitors(self) -> list[Competitor]:
        return self._competitors

    @property
    def mptcp(self) -> bool:
        return self.profile.mode == "mptcp"

    @property
    def hosts(self) -> list[str]:
        return ["client", "server", "link", *(u.host for u in self.competitors)]

    def netns(self, host: str) -> str:
        if host not in self.hosts:
            raise UserError(f"host {host!r}: choose one of {', '.join(self.hosts)}")
        return netns_name(self.name, host)

    def path_bytes(self) -> list[PathCounters]:
        """Kernel byte counters of each client path interface (rx = towards the client)."""
        return interface_counters(self.client_ns, self.paths)

    def competitor_network(self, host: str) -> Network:
        """The network as competitor `host` sees it: that host is its client (for a player or
        a transfer of its own); its events and teardown stay the topology's."""
        user = next((u for u in self.competitors if u.host == host), None)
        if user is None:
            raise UserError(f"host {host!r} is no competing client of topology {self.name}")
        return CompetitorNetwork(self, user)


    def capacity_bps(self, paths: Sequence[int]) -> float | None:
        """The sum of the nominal downlink rates of `paths` (a trace's mean rate), capped by a
        shared server link's rate; None when one of them is unlimited."""
        total = 0.0
        for i in paths:
            rate = self.profile.link(i, "downlink").mean_bps()
            if not rate:
                return None
            total += float(rate)
        shared = self.profile.server_link_model("downlink")
        if shared is not None and shared.rate_bps:
            total = min(total, float(shared.rate_bps))
        return total

    def start_events(self) -> None:
        """Makes now the t=0 of the profile's timed events (path failures, changes)."""
        if not self.emulated:
            if self.profile.events:
                raise UserError("timed events need the link emulator (run `make emulator`)")
            return
        for pid in self.emulator_pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "profile": self.profile.name,
            "deployment": self.profile.deployment.name,
            "mode": self.profile.mode,
            "client_ns": self.client_ns,
            "server_ns": self.server_ns,
            "link_ns": self.link_ns,
            "server_addr": self.server_addr,
            "paths": [asdict(p) for p in self.paths],
            "competitors": [{**asdict(u), "ns": self.netns(u.host)} for u in self.competitors],
            "emulated": self.emulated,
        }

    # ---- building ---------------------------------------------------------------------------

    def _build(self) -> None:
        # The record first: a folder without one is a leftover to `mpstream clean`.
        self._write_state()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._steps = Steps(self._plan())
        self._steps.up()

    def _plan(self) -> list[Step]:
        """The topology's steps, in the order they come up (and in reverse, go down)."""
        p, ends = self.profile, self.profile.deployment
        userspace_pm = ends.client.mptcp.path_manager == "userspace"
        clients = self._client_hosts()
        ccs = tuple(dict.fromkeys(cc for cc in (ends.client.cc, ends.server.cc)
                                  if coupled.is_coupled(cc)))
        steps: list[Step] = [CongestionControls(self.name, ccs)] if ccs else []
        steps += [
            Namespaces(self.name, tuple(self.netns(host) for host in self.hosts)),
            Sysctls(ends, userspace_pm,
                    tuple((h, self.netns(h)) for h in self.hosts if h != "link"), self.link_ns),
            Links(self.link_ns, self.server_ns, tuple(self.wires)),
            Addresses(clients, self.server_ns),
            Endpoints(mptcp_hosts(p, clients, self.competitors, self.server_ns, userspace_pm)),
        ]
        if ends.server.caps_paths:
            steps.append(Caps(self.name, self.server_ns, self.path_caps))
        # Without the emulator the link namespace simply forwards over its connected routes.
        if self.emulated:
            steps += [
                EmulatorRouting(self.link_ns, tuple(self.wires), p.server_link is not None),
                Emulators(self.name, self.link_ns, self.state_dir,
                          lambda: emulators.configs(p, self.wires, self.competitors),
                          self.emulator_pids, self._write_state),
            ]
        starts_down = frozenset(p.path_index(e.path) for e in p.events
                                if e.action == "down" and e.at_s == 0)
        steps.append(VerifyPaths(tuple(self.wires), self.server_addr, starts_down))
        if p.mode == "mptcp" and userspace_pm:
            steps.append(PathManager(self.client_ns, self.state_dir, tuple(self.paths)))
        return steps

    def _client_hosts(self) -> tuple[ClientHost, ...]:
        """The client's host and each competitor's, with their wires and primary path."""
        def wires(host: str) -> tuple[Wire, ...]:
            return tuple(w for w in self.wires if w.host == host)

        hosts = [ClientHost(self.client_ns, wires("client"), self.profile.primary_path)]
        hosts += [ClientHost(self.netns(u.host), wires(u.host), 0) for u in self.competitors]
        return tuple(hosts)

    def path_caps(self) -> dict[str, pathcaps.PathCap]:
        """What the server may send towards each capped path's subnet, when the deployment
        sets `server.cwnd_clamp_bdp` (a window of that many of the path's bandwidth-delay
        products), `server.pacing_cap` (a pacing rate of that many times the path's rate) or
        `server.sndbuf_bdp` (a send buffer of that many bandwidth-delay products): the path's
        rate is its emulator's downlink rate, a trace's mean, over its round trip.
        A user's fastest path is left uncapped, and so is a single-path user's: capping the
        fast path's window too cost per-segment rate
        (docs/deployments.md#the-servers-window-cap-per-path); `server.cap_every_path` caps
        them too."""
        return path_caps(self.profile, tuple(self.wires), self.competitors)

    # ---- state ------------------------------------------------------------------------------

    def _write_state(self) -> None:
        folder = self.state_dir.parent
        folder.mkdir(parents=True, exist_ok=True)
        state = {**self.describe(), "owner_pid": self.owner_pid, "detached": self.detached,
                 "emulator_pids": self.emulator_pids, "created": time.time(),
                 "profile": self.profile.model_dump(mode="json", exclude_unset=True)}
        tmp = folder / f".{self.name}.json.tmp"
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(folder / f"{self.name}.json")

def interface_counters(ns: str, paths: Sequence[PathInfo]) -> list[PathCounters]:
    """Kernel counters of the interfaces of `paths` in namespace `ns` (rx: towards it)."""
    out = sh(["ip", "-n", ns, "-s", "-j", "link", "show"]).stdout
    by_name = {link["ifname"]: link.get("stats64", link.get("stats", {}))
               for link in json.loads(out)}
    result: list[PathCounters] = []
    for path in paths:
        stats = by_name[path.client_ifname]
        result.append({"rx_bytes": int(stats["rx"]["bytes"]),
                       "tx_bytes": int(stats["tx"]["bytes"]),
                       "rx_packets": int(stats["rx"]["packets"]),
                       "tx_packets": int(stats["tx"]["packets"])})
    return result


class CompetitorNetwork(Network):
    """A topology seen from one of its competing clients: "client" is that user's namespace,
    its paths are the user's; the server and the link are the topology's."""

    def __init__(self, topo: Topology, user: Competitor):
        self.topo, self.user = topo, user
        self.server_addr = topo.server_addr
        self.cc = topo.cc

    @property
    def paths(self) -> list[PathInfo]:
        return list(self.user.paths)

    def netns(self, host: str) -> str:
        return self.topo.netns(self.user.host if host == "client" else host)

    def path_bytes(self) -> list[PathCounters]:
        return interface_counters(self.netns("client"), self.paths)

    def capacity_bps(self, paths: Sequence[int]) -> float | None:
        return None  # shared with the other users: no rate of its own to compare with

    def start_events(self) -> None:
        """The topology's events start with the trial's client, not with each user."""

    def down(self) -> None:
        """The topology's owner tears it down."""


def live_topologies() -> list[dict[str, Any]]:
    """Recorded topologies plus namespaces without a record (a killed build)."""
    found = []
    names = sorted(set(teardown.topology_names()) | set(teardown.recorded_names()))
    for name in names:
        state = read_state(name) or {"name": name, "profile": None}
        namespaces = teardown.topology_namespaces(name)
        if isinstance(state.get("profile"), dict):
            state = {**state, "profile": state["profile"].get("name")}
        running = teardown.orphan_emulator_pids(name)
        complete = bool(read_state(name)) \
            and len(namespaces) == 3 + len(state.get("competitors") or [])
        # Up as built: every namespace there and every emulator it started still running.
        healthy = complete and len(running) == len(state.get("emulator_pids", []))
        found.append({**state, "namespaces": namespaces, "emulators_running": len(running),
                      "complete": complete, "healthy": healthy})
    return found


def check_prerequisites(profile: Profile) -> None:
    require_root()
    require_tools("ip", "sysctl", "ping")
    if profile.mode == "mptcp":
        require_mptcp()
        require_scheduler(profile.deployment.server.mptcp.scheduler)
    for end, settings in (("server", profile.deployment.server),
                          ("client", profile.deployment.client)):
        if coupled.is_coupled(settings.cc):
            reason = coupled.machine_refusal(settings.cc)
            if reason:
                raise UserError(f"deployment {end}.cc: {reason}")
        else:
            require_cc(settings.cc)
    if profile.deployment.server.caps_paths:
        reason = pathcaps.machine_refusal()
        if reason:
            raise UserError(f"deployment {profile.deployment.name}: {reason}")

