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
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mpstream.errors import UserError
from mpstream.netem import competitors, coupled, emulators, pathcaps, teardown
from mpstream.netem.emulators import READY_TIMEOUT_S, Wire
from mpstream.netem.profile import Profile, load_profile
from mpstream.netem.system import (
    PROC_SYS,
    client_rmem,
    ip_batch,
    require_cc,
    require_mptcp,
    require_root,
    require_scheduler,
    require_tools,
    sh,
    signals_deferred,
    sysctl,
)
from mpstream.netem.teardown import NAME_RULE, competitor_role, netns_name, read_state
from mpstream.network import Competitor, Network, PathCounters, PathInfo
from mpstream.proc import stop_pids
from mpstream.transports.pathpolicy import mptcp_endpoint_id

SERVER_ADDR = "10.2.0.2"
SERVER_SUBNET = "10.2.0.0/24"
CLIENT_SUBNETS = "10.1.0.0/16"
MPTCP_MAX_SUBFLOWS = 8  # the kernel's MPTCP_PM_ADDR_MAX


def _path_info(profile: Profile, index: int) -> PathInfo:
    return PathInfo(index=index, name=profile.path_label(index), client_addr=f"10.1.{index}.2",
                    client_ifname=f"p{index}", backup=profile.paths[index].backup)


def router_addr(slot: int) -> str:
    """The next hop from a client over the path in `slot` (the client's path `slot`)."""
    return f"10.1.{slot}.1"


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
        """Stops every process in the namespaces, removes them; returns the emulators' stats
        (per path, per direction) when they wrote some. With `keep`, each emulator's
        queueing-delay windows are copied there first (`<label>.jsonl`, e.g. path0.jsonl)."""
        if self._down:
            return {}
        self._down = True
        teardown.remove_namespaces(teardown.topology_namespaces(self.name))
        stop_pids(teardown.orphan_emulator_pids(self.name))
        stats = emulators.read_stats(self.state_dir)
        if keep is not None:
            emulators.keep_delay_logs(self.state_dir, keep)
        teardown.remove_state(self.name)
        ends = self.profile.deployment
        for cc in {ends.server.cc, ends.client.cc}:
            if coupled.is_coupled(cc):
                coupled.release(cc, self.name)
        if ends.server.caps_paths:
            pathcaps.release(self.name)
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
        for host in self.hosts:
            sh(["ip", "netns", "add", self.netns(host)])
        self._configure_sysctls()
        self._create_links()
        self._configure_client()
        self._configure_server()
        self._cap_paths()
        # Without the emulator the link namespace simply forwards over its connected routes.
        if self.emulated:
            ip_batch(self.link_ns,
                     emulators.routing(self.wires, self.profile.server_link is not None))
            self._start_emulators()
        self._write_state()
        self._verify_paths()
        if self.profile.mode == "mptcp" and self._userspace_pm:
            self._start_path_manager()

    def _congestion_control(self, cc: str) -> str:
        """The kernel's name of an end's CC; a coupled one is loaded first, and its use
        recorded so that the last topology using it unloads it (netem/coupled.py)."""
        if not coupled.is_coupled(cc):
            return cc
        return coupled.acquire(cc, self.name)

    def _host_sysctls(self, host: str) -> dict[str, str | int]:
        """The settings of one end's namespace: the deployment's for that end over the ones
        every trial needs."""
        end = self.profile.deployment.end(host)
        server = self.profile.deployment.server
        values: dict[str, str | int] = {
            "net.mptcp.enabled": 1,
            # The deployment's path manager is the client's; competing users keep the kernel's.
            "net.mptcp.path_manager": "userspace" if host == "client" and self._userspace_pm
            else "kernel",
            # The sender's scheduler decides; every end runs the server's, as before.
            "net.mptcp.scheduler": server.mptcp.scheduler,
            "net.mptcp.checksum_enabled": int(end.mptcp.checksum),
            "net.ipv4.tcp_congestion_control": self._congestion_control(end.cc),
            # Each connection starts from scratch, not from metrics cached by an earlier trial.
            "net.ipv4.tcp_no_metrics_save": 1,
        }
        if host != "server":
            # A client's sockets start with a receive buffer that does not bound a young
            # connection's window, unless the deployment sets its own: with the kernel's
            # 128 KB, 6.18's MPTCP can stop a connection for good
            # (docs/netem.md#the-clients-receive-buffer).
            values["net.ipv4.tcp_rmem"] = client_rmem()
        values.update(end.sysctls)
        if not Path("/proc/sys/net/mptcp/path_manager").exists():
            values.pop("net.mptcp.path_manager")  # kernels before 6.15: pm_type 0 is the default
        if not kernel_has_mptcp():  # mode tcp on a kernel without MPTCP
            values = {k: v for k, v in values.items() if not k.startswith("net.mptcp.")}
        return values

    @property
    def _userspace_pm(self) -> bool:
        return self.profile.deployment.client.mptcp.path_manager == "userspace"

    def _start_path_manager(self) -> None:
        """mpstream's userspace path manager in the client's namespace (netem/pathmanager.py):
        it lives as long as the namespace, whose teardown stops it with every process there."""
        args = [sys.executable, "-m", "mpstream.netem.pathmanager"]
        for path in self.paths:
            args += ["--path", f"{path.index},{path.client_addr},{path.client_ifname}"
                     + (",backup" if path.backup else "")]
        # Its events and actions go to a file, not a pipe: a topology `netem up` leaves
        # running outlives this process, and the path manager with it.
        out = (self.state_dir / "pathmanager.jsonl").open("wb")
        err = (self.state_dir / "pathmanager.log").open("wb")
        with signals_deferred():
            proc = self.popen("client", args, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                              start_new_session=True)
        out.close()
        err.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while b'"ready"' not in (self.state_dir / "pathmanager.jsonl").read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                said = (self.state_dir / "pathmanager.log").read_text(errors="replace").strip()
                raise UserError("the userspace path manager did not start: "
                                + (said.splitlines()[-1] if said else "no word from it"))
            time.sleep(0.01)

    def _configure_sysctls(self) -> None:
        common = {
            # No IPv6 chatter (router solicitations) in the path byte counters.
            "net.ipv6.conf.all.disable_ipv6": 1,
            "net.ipv6.conf.default.disable_ipv6": 1,
        }
        for name in self.hosts:
            if name != "link":
                sysctl(self.netns(name), {**common, **self._host_sysctls(name)})
        sysctl(self.link_ns, {
            **common,
            "net.ipv4.ip_forward": 1,
            # Packets come back out of the emulator on a TUN device that is not the route
            # back to their source: reverse-path filtering would drop them.
            "net.ipv4.conf.all.rp_filter": 0,
            "net.ipv4.conf.default.rp_filter": 0,
        })

    def _create_links(self) -> None:
        lines = ["link set lo up", "link add s0 type veth peer name eth0 netns " + self.server_ns,
                 "addr add 10.2.0.1/24 dev s0", "link set s0 up"]
        for wire in self.wires:
            c = f"c{wire.slot}"
            lines += [f"link add {c} type veth peer name {wire.path.client_ifname} "
                      f"netns {wire.ns}",
                      f"addr add {router_addr(wire.slot)}/24 dev {c}", f"link set {c} up"]
        ip_batch(self.link_ns, lines)

    def _configure_client(self) -> None:
        p = self.profile
        mptcp = p.deployment.client.mptcp
        self._configure_client_host("client", p.mode == "mptcp", p.primary_path,
                                    subflows=mptcp.subflows,
                                    add_addr_accepted=mptcp.add_addr_accepted,
                                    fullmesh=mptcp.fullmesh)
        for user in self.competitors:
            self._configure_client_host(user.host, user.mptcp, 0)

    def _configure_client_host(self, host: str, mptcp: bool, primary: int, *,
                               subflows: int | None = None,
                               add_addr_accepted: int | None = None,
                               fullmesh: bool = False) -> None:
        wires = [w for w in self.wires if w.host == host]
        lines = ["link set lo up"]
        for wire in wires:
            path, table = wire.path, 100 + wire.path.index
            lines += [
                f"addr add {path.client_addr}/24 dev {path.client_ifname}",
                f"link set {path.client_ifname} up",
                # Traffic from this path's address leaves by this path (pins subflows, -B binds).
                f"route add {SERVER_SUBNET} via {router_addr(wire.slot)} dev {path.client_ifname} "
                f"table {table}",
                f"rule add from {path.client_addr} lookup {table} pref {table}",
            ]
        first = wires[primary]
        lines.append(f"route add {SERVER_SUBNET} via {router_addr(first.slot)} "
                     f"dev {first.path.client_ifname}")
        extra = [w.path for w in wires if w.path.index != primary]
        if mptcp:
            subflows = subflows if subflows is not None else len(extra)
            accepted = add_addr_accepted if add_addr_accepted is not None else len(extra)
            lines.append(f"mptcp limits set subflow {subflows} add_addr_accepted {accepted}")
            # Under the userspace path manager the subflows are its own, not the endpoints'.
            for path in [] if host == "client" and self._userspace_pm else extra:
                flags = ["subflow"]
                if path.backup:
                    flags.append("backup")
                if fullmesh:
                    flags.append("fullmesh")
                lines.append(f"mptcp endpoint add {path.client_addr} dev {path.client_ifname} "
                             f"id {mptcp_endpoint_id(path.index)} {' '.join(flags)}")
        elif kernel_has_mptcp():
            lines.append("mptcp limits set subflow 0 add_addr_accepted 0")
        ip_batch(self.netns(host), lines)

    def _configure_server(self) -> None:
        p = self.profile
        extra = [len(self.paths) - 1 if p.mode == "mptcp" else 0,
                 p.deployment.client.mptcp.subflows or 0]
        extra += [len(u.paths) - 1 for u in self.competitors if u.mptcp]
        subflows = max(extra) if p.mode == "mptcp" or any(u.mptcp for u in self.competitors) \
            else 0
        if p.mode == "mptcp" and self._userspace_pm:
            # A subflow the client's path manager adds again joins while the server may still
            # hold the old one (a server that only acks never times it out): the kernel's
            # largest limit, or the join is reset once its handshake is done.
            subflows = MPTCP_MAX_SUBFLOWS
        lines = [
            "link set lo up",
            f"addr add {SERVER_ADDR}/24 dev eth0",
            "link set eth0 up",
            f"route add {CLIENT_SUBNETS} via 10.2.0.1 dev eth0",
        ]
        if kernel_has_mptcp():
            lines.append(f"mptcp limits set subflow {subflows} add_addr_accepted 0")
        ip_batch(self.server_ns, lines)

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
        server = self.profile.deployment.server
        if not server.caps_paths:
            return {}
        own = {w.slot: w for w in self.wires if w.own_link}
        shared = [self.profile.server_link_model("uplink"),
                  self.profile.server_link_model("downlink")]
        found: dict[str, list[tuple[Wire, float, float]]] = {}
        for wire in self.wires:
            up, down, _ = emulators.wire_links(self.profile, self.competitors, own[wire.link])
            rate = down.mean_bps()
            if not rate:
                raise UserError(
                    f"deployment {self.profile.deployment.name}: server.cwnd_clamp_bdp, "
                    f"pacing_cap and sndbuf_bdp need a rate on path {wire.path.name}; give the "
                    "path a rate or drop the setting")
            rtt_ms = up.delay_ms + down.delay_ms + sum(s.delay_ms for s in shared if s)
            found.setdefault(wire.host, []).append((wire, float(rate), rtt_ms))
        caps = {}
        for paths in found.values():
            fastest = max(rate for _, rate, _ in paths)
            for wire, rate, rtt_ms in paths:
                if rate < fastest or server.cap_every_path:
                    caps[f"10.1.{wire.slot}.0"] = pathcaps.PathCap(
                        pathcaps.clamp_packets(rate, rtt_ms, server.cwnd_clamp_bdp)
                        if server.cwnd_clamp_bdp is not None else None,
                        pathcaps.pacing_bytes(rate, server.pacing_cap)
                        if server.pacing_cap is not None else None,
                        pathcaps.sndbuf_bytes(rate, rtt_ms, server.sndbuf_bdp)
                        if server.sndbuf_bdp is not None else None)
        return caps

    def _cap_paths(self) -> None:
        caps = self.path_caps()
        if caps:
            pathcaps.acquire(self.name, self.server_ns, caps)

    def _start_emulators(self) -> None:
        configs = emulators.configs(self.profile, self.wires, self.competitors)
        started = emulators.start(self.link_ns, self.state_dir, configs, self.emulator_pids)
        self._write_state()
        for label, proc in started:
            emulators.wait_ready(self.state_dir, label, proc)

    def _verify_paths(self) -> None:
        """Fails early when a path does not carry packets (unless it starts failed)."""
        starts_down = {self.profile.path_index(e.path) for e in self.profile.events
                       if e.action == "down" and e.at_s == 0}
        for wire in self.wires:
            path = wire.path
            if wire.link in starts_down:
                continue
            # With -w, -c counts replies: the first reply ends the probe; lossy profiles
            # drop some on purpose.
            probe = self.run(wire.host, ["ping", "-n", "-q", "-c", "1", "-i", "0.05", "-w", "5",
                                         "-I", path.client_addr, self.server_addr],
                             capture_output=True, text=True)
            if probe.returncode != 0:
                where = "path" if wire.host == "client" else f"{wire.host}'s path"
                raise UserError(
                    f"{where} {path.index} ({path.name}) carries no packets after setup: "
                    f"{(probe.stdout + probe.stderr).strip()}")

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
            reason = coupled.missing(settings.cc)
            if reason:
                raise UserError(f"deployment {end}.cc: {reason}")
        else:
            require_cc(settings.cc)
    if profile.deployment.server.caps_paths:
        reason = pathcaps.missing()
        if reason:
            raise UserError(f"deployment {profile.deployment.name}: {reason}")


def kernel_has_mptcp() -> bool:
    return (PROC_SYS / "net" / "mptcp" / "enabled").exists()
