"""A topology's link emulators (build/mpstream-linkem) and the client paths wired through them.

Each path's wire (`Wire`) has a slot, its subnet 10.1.<slot>.0/24 and its interface c<slot> in
the link namespace, and names the emulator its packets cross: the one of its own slot, or the
one of the client path it goes `via`. An emulator sits between two TUN devices, ta<slot> and
tb<slot> (tsa and tsb for a shared server link); `routing` gives the `ip` lines that lead each
path's packets into its emulator. `configs` are the emulators' configurations from the profile;
`start` runs them in the link namespace, each writing its stats and queueing-delay windows beside
its configuration in the topology's state folder (`read_stats`, `keep_delay_logs`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpstream.errors import UserError
from mpstream.netem import teardown
from mpstream.netem.profile import Link, Profile
from mpstream.netem.system import signals_deferred
from mpstream.network import Competitor, PathInfo, in_netns

READY_TIMEOUT_S = 10.0  # for an emulator (and the path manager) to report ready
# Where an emulator writes its queueing-delay windows, beside its stats (netem/linkem/qdelay.h).
DELAY_LOG_SUFFIX = ".delay.jsonl"


@dataclass(frozen=True)
class Wire:
    """One client path as it is wired: the host it belongs to, the path, its slot (subnet and
    link-namespace interface) and the emulator its packets cross (`link`: a slot)."""

    host: str
    ns: str
    path: PathInfo
    slot: int
    link: int

    @property
    def own_link(self) -> bool:
        return self.link == self.slot


def routing(wires: list[Wire], server_link: bool) -> list[str]:
    """`ip -batch` lines for the link namespace: the TUN devices of each emulator and the rules
    that send each path's packets, both ways, into the emulator of its link."""
    # Downlink packets for a path enter its emulator from the server side; with a shared
    # server link they first pass that link's emulator and come out of tsa.
    downlink_iif = "tsa" if server_link else "s0"
    lines = []
    for wire in wires:
        i, e = wire.slot, wire.link
        if wire.own_link:
            lines += [
                f"tuntap add dev ta{e} mode tun", f"tuntap add dev tb{e} mode tun",
                f"link set ta{e} up", f"link set tb{e} up",
                f"route add default dev ta{e} table {100 + e}",
                f"route add default dev tb{e} table {200 + e}",
            ]
            if server_link:
                lines.append(f"rule add iif tb{e} lookup 300 pref {300 + e}")
        # Into the emulator of the path's link (its own, or the one it goes via).
        lines += [
            f"rule add iif c{i} lookup {100 + e} pref {100 + i}",
            f"rule add iif {downlink_iif} to 10.1.{i}.0/24 lookup {200 + e} pref {200 + i}",
        ]
    if server_link:
        lines += [
            "tuntap add dev tsa mode tun", "tuntap add dev tsb mode tun",
            "link set tsa up", "link set tsb up",
            "route add default dev tsa table 300",
            "route add default dev tsb table 301",
            "rule add iif s0 lookup 301 pref 399",
        ]
    return lines


def wire_links(profile: Profile, competitors: list[Competitor], wire: Wire
               ) -> tuple[Link, Link, list[dict[str, Any]]]:
    """The uplink and downlink of a path with a link of its own, and its timed events."""
    if wire.host == "client":
        i = wire.path.index
        return profile.link(i, "uplink"), profile.link(i, "downlink"), profile.emulator_events(i)
    k = next(k for k, u in enumerate(competitors) if u.host == wire.host)
    j = wire.path.index
    return (profile.competitor_link(k, j, "uplink"), profile.competitor_link(k, j, "downlink"),
            [])


def configs(profile: Profile, wires: list[Wire], competitors: list[Competitor]
            ) -> list[tuple[str, dict[str, Any]]]:
    """(label, configuration) of each emulator: one per path with a link of its own
    (path<slot>), and one for a shared server link (server)."""
    out = []
    for wire in wires:
        if not wire.own_link:
            continue
        i = wire.slot
        up, down, events = wire_links(profile, competitors, wire)
        out.append((f"path{i}", {
            "tun_a": f"ta{i}", "tun_b": f"tb{i}", "seed": profile.seed + i,
            "a_to_b": up.emulator_config(), "b_to_a": down.emulator_config(),
            "events": events,
        }))
    shared_up = profile.server_link_model("uplink")
    shared_down = profile.server_link_model("downlink")
    if shared_up is not None and shared_down is not None:
        out.append(("server", {
            "tun_a": "tsa", "tun_b": "tsb", "seed": profile.seed + 100,
            "a_to_b": shared_up.emulator_config(), "b_to_a": shared_down.emulator_config(),
            "events": [],
        }))
    return out


def start(link_ns: str, state_dir: Path, emulators: list[tuple[str, dict[str, Any]]],
          pids: list[int]) -> list[tuple[str, subprocess.Popen]]:
    """Start each emulator in the link namespace, its configuration, output and log in
    `state_dir`; each one's pid goes into `pids` as it starts (teardown stops them)."""
    started = []
    for label, config in emulators:
        config["stats_path"] = str(state_dir / f"{label}.stats.json")
        # Each packet's queueing delay and the link's capacity, per 100 ms window.
        config["delay_log"] = str(state_dir / f"{label}{DELAY_LOG_SUFFIX}")
        config_path = state_dir / f"{label}.json"
        config_path.write_text(json.dumps(config, indent=2))
        out = (state_dir / f"{label}.out").open("wb")
        err = (state_dir / f"{label}.log").open("wb")
        # A session of its own: the emulators outlive `mpstream netem up` and do not get
        # the terminal's Ctrl-C (teardown stops them, in order).
        with signals_deferred():
            proc = subprocess.Popen(
                in_netns(link_ns, [str(teardown.EMULATOR), "--config", str(config_path)]),
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
            pids.append(proc.pid)
        out.close()
        err.close()
        started.append((label, proc))
    return started


def wait_ready(state_dir: Path, label: str, proc: subprocess.Popen) -> None:
    out = state_dir / f"{label}.out"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if b"ready" in out.read_bytes():
            return
        if proc.poll() is not None:
            log = (state_dir / f"{label}.log").read_text(errors="replace").strip()
            raise UserError(f"the link emulator for {label} exited with {proc.returncode}: "
                            f"{log or '(no message)'}")
        time.sleep(0.01)
    raise UserError(f"the link emulator for {label} did not report ready within "
                    f"{READY_TIMEOUT_S:g} s (log: {state_dir / (label + '.log')})")


def keep_delay_logs(state_dir: Path, folder: Path) -> None:
    """Each emulator's queueing-delay windows copied to `folder` as <label>.jsonl."""
    for log in sorted(state_dir.glob(f"*{DELAY_LOG_SUFFIX}")):
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            shutil.copyfile(log, folder / (log.name.removesuffix(DELAY_LOG_SUFFIX) + ".jsonl"))


def read_stats(state_dir: Path) -> dict[str, Any]:
    """The stats each emulator wrote, by label."""
    stats = {}
    for path in sorted(state_dir.glob("*.stats.json")):
        with contextlib.suppress(OSError, ValueError):
            stats[path.name.removesuffix(".stats.json")] = json.loads(path.read_text())
    return stats
