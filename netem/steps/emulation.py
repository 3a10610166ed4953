"""The paths' link emulators (netem/emulators.py) in the link namespace, the routing that leads
each path's packets into its emulator, the server's per-path caps (netem/pathcaps.py), and the
check that every path carries packets once all is up."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpstream.errors import UserError
from mpstream.netem import emulators, pathcaps, teardown
from mpstream.netem.emulators import Wire
from mpstream.netem.profile import Profile
from mpstream.netem.steps import Step
from mpstream.netem.system import ip_batch, ip_batch_undo
from mpstream.network import Competitor, in_netns
from mpstream.proc import stop_pids


def path_caps(profile: Profile, wires: tuple[Wire, ...],
              competitors: list[Competitor]) -> dict[str, pathcaps.PathCap]:
    """What the server may send towards each capped path's subnet (Topology.path_caps)."""
    server = profile.deployment.server
    if not server.caps_paths:
        return {}
    own = {w.slot: w for w in wires if w.own_link}
    shared = [profile.server_link_model("uplink"), profile.server_link_model("downlink")]
    found: dict[str, list[tuple[Wire, float, float]]] = {}
    for wire in wires:
        up, down, _ = emulators.wire_links(profile, competitors, own[wire.link])
        rate = down.mean_bps()
        if not rate:
            raise UserError(
                f"deployment {profile.deployment.name}: server.cwnd_clamp_bdp, "
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


@dataclass(frozen=True)
class Caps(Step):
    """The server's caps on what it sends over each capped path: entries of a BPF map shared by
    every topology, recorded (pathcaps' `.use` files) before they are added."""

    topology: str
    server_ns: str
    caps: Callable[[], dict[str, pathcaps.PathCap]]

    def up(self) -> None:
        caps = self.caps()
        if caps:
            pathcaps.acquire(self.topology, self.server_ns, caps)

    def undo(self) -> None:
        pathcaps.release(self.topology)


def routing_undo_lines(wires: tuple[Wire, ...], server_link: bool) -> list[str]:
    """Takes `emulators.routing`'s rules and TUN devices away again (each device's routes go
    with it)."""
    lines = []
    for wire in reversed(wires):
        lines += [f"rule del pref {100 + wire.slot}", f"rule del pref {200 + wire.slot}"]
        if wire.own_link and server_link:
            lines.append(f"rule del pref {300 + wire.link}")
        if wire.own_link:
            lines += [f"link del ta{wire.link}", f"link del tb{wire.link}"]
    if server_link:
        lines += ["rule del pref 399", "link del tsa", "link del tsb"]
    return lines


@dataclass(frozen=True)
class EmulatorRouting(Step):
    """The emulators' TUN devices and the policy routing that sends each path's packets, both
    ways, into the emulator of its link."""

    link_ns: str
    wires: tuple[Wire, ...]
    server_link: bool

    @property
    def within(self) -> frozenset[str]:
        return frozenset({self.link_ns})

    def up(self) -> None:
        ip_batch(self.link_ns, emulators.routing(list(self.wires), self.server_link))

    def undo(self) -> None:
        ip_batch_undo(self.link_ns, routing_undo_lines(self.wires, self.server_link))


@dataclass(frozen=True)
class Emulators(Step):
    """One emulator process per link, in the link namespace, each in a session of its own.
    Their pids go into `pids` (the topology's record, written by `recorded`) as they start.

    Undone, every emulator of the topology is stopped wherever it runs (found by its
    configuration in the topology's state folder), its namespace gone or not."""

    topology: str
    link_ns: str
    state_dir: Path
    configs: Callable[[], list[tuple[str, dict[str, Any]]]]
    pids: list[int]
    recorded: Callable[[], None]

    def up(self) -> None:
        started = emulators.start(self.link_ns, self.state_dir, self.configs(), self.pids)
        self.recorded()
        for label, proc in started:
            emulators.wait_ready(self.state_dir, label, proc)

    def undo(self) -> None:
        stop_pids(teardown.orphan_emulator_pids(self.topology))


@dataclass(frozen=True)
class VerifyPaths(Step):
    """Fails early when a path does not carry packets (unless it starts failed). It makes
    nothing, so there is nothing to undo."""

    wires: tuple[Wire, ...]
    server_addr: str
    starts_down: frozenset[int]

    def up(self) -> None:
        for wire in self.wires:
            path = wire.path
            if wire.link in self.starts_down:
                continue
            # With -w, -c counts replies: the first reply ends the probe; lossy profiles
            # drop some on purpose.
            probe = subprocess.run(
                in_netns(wire.ns, ["ping", "-n", "-q", "-c", "1", "-i", "0.05", "-w", "5",
                                   "-I", path.client_addr, self.server_addr]),
                capture_output=True, text=True)
            if probe.returncode != 0:
                where = "path" if wire.host == "client" else f"{wire.host}'s path"
                raise UserError(
                    f"{where} {path.index} ({path.name}) carries no packets after setup: "
                    f"{(probe.stdout + probe.stderr).strip()}")

    def undo(self) -> None:
        pass
