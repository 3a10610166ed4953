"""`mpstream netem ...`: bring emulated multi-path topologies up and down, run commands on their
hosts, and measure that they behave as configured."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Column, Table

from mpstream.errors import EXIT_FAILED, UserError, warn
from mpstream.output import json_option, print_json
from mpstream.proc import signals_interrupt

# Wide enough for the check table when the output is a file or a pipe.
console = Console(width=None if sys.stdout.isatty() else 140)


def _overrides(values: tuple[str, ...]) -> dict[str, Any]:
    from mpstream.netem.profile import parse_override

    return dict(parse_override(v) for v in values)


deployment_option = click.option(
    "--deployment", default=None, metavar="NAME|FILE",
    help="What the server and client namespaces run (congestion control, kernel settings, "
         "MPTCP limits and path manager): a preset of `mpstream list deployments` or a TOML file "
         "[default: kernel-default].")

set_option = click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE",
    help="Change a profile field, e.g. --set 'paths.*.queue_bytes=1MB' --set paths.1.loss=0.05",
)


@click.group()
def netem() -> None:
    """Emulated multi-path networks in namespaces: up, down, clean, exec, check."""


@netem.command()
@click.argument("profile")
@click.option("--name", default="mps", show_default=True, help="Topology name (namespaces "
              "are mps-NAME-client, mps-NAME-link, mps-NAME-server).")
@set_option
@deployment_option
@click.option("--foreground", is_flag=True,
              help="Stay in the foreground and tear the topology down on Ctrl-C.")
@click.option("--start-events/--no-start-events", default=True, show_default=True,
              help="Start the profile's event clock (path failures etc.) once the topology is up.")
def up(profile: str, name: str, overrides: tuple[str, ...], deployment: str | None,
       foreground: bool, start_events: bool) -> None:
    """Build the topology of PROFILE (a preset name or a TOML file) and leave it running."""
    from mpstream.netem.profile import load_profile
    from mpstream.netem.topology import Topology

    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        prof = load_profile(profile, _overrides(overrides), deployment=deployment)
        topo = Topology.up(prof, name)
        try:
            if start_events:
                topo.start_events()
            _print_topology(topo)
            if not foreground:
                topo.detach()
                console.print(f"left running; run commands with `mpstream netem exec {name} client "
                              f"-- CMD`, remove with `mpstream netem down {name}`")
                return
            console.print("up; Ctrl-C tears it down", highlight=False)
            print("ready", flush=True)  # a line scripts can wait for
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            foreground = True
        finally:
            if foreground:
                _print_stats(topo.down())
                console.print(f"topology {name} removed")


def _print_topology(topo: Any) -> None:
    table = Table(title=f"topology {topo.name} ({topo.profile.name}, {topo.profile.mode}, "
                        f"deployment {topo.profile.deployment.name}, cc {topo.profile.cc})")
    for column in ("path", "client interface", "client address", "uplink", "downlink"):
        table.add_column(column)
    for path in topo.paths:
        table.add_row(f"{path.index} {path.name}", path.client_ifname, path.client_addr,
                      topo.profile.link(path.index, "uplink").describe(),
                      topo.profile.link(path.index, "downlink").describe())
    for wire in topo.wires:
        if wire.host == "client":
            continue
        if wire.own_link:
            k = next(k for k, u in enumerate(topo.competitors) if u.host == wire.host)
            up = topo.profile.competitor_link(k, wire.path.index, "uplink").describe()
            down = topo.profile.competitor_link(k, wire.path.index, "downlink").describe()
        else:
            up = down = f"via path {wire.link} {topo.paths[wire.link].name}"
        table.add_row(f"{wire.host}: {wire.path.name}", wire.path.client_ifname,
                      wire.path.client_addr, up, down)
    console.print(table)
    server = topo.profile.server_link_model("downlink")
    if server is not None:
        console.print(f"server link (shared by every user): {server.describe()}",
                      highlight=False)
    for event in topo.profile.events:
        change = "" if event.set is None else " " + ", ".join(
            f"{k}={v}" for k, v in event.set.model_dump(exclude_unset=True).items())
        console.print(f"event: at {event.at_s:g} s path {event.path} {event.action}"
                      f" ({event.dir}){change}", highlight=False)
    console.print(f"client namespace {topo.client_ns} · server namespace {topo.server_ns} "
                  f"({topo.server_addr}) · links in {topo.link_ns}"
                  + ("" if topo.emulated else " · links NOT emulated"), highlight=False)


def _only_topology() -> str:
    from mpstream.netem.topology import live_topologies

    live = [t["name"] for t in live_topologies()]
    if len(live) == 1:
        return live[0]
    if not live:
        raise UserError("no topology is up (see `mpstream list topologies`)")
    raise UserError(f"several topologies are up ({', '.join(live)}): name one")


@netem.command()
@click.argument("name", required=False)
def down(name: str | None) -> None:
    """Remove topology NAME (the only one up, when NAME is left out)."""
    from mpstream.netem import teardown
    from mpstream.netem.system import require_root
    from mpstream.netem.topology import Topology

    require_root()
    name = name or _only_topology()
    if teardown.read_state(name) is not None:
        _print_stats(Topology.attach(name).down())
    elif teardown.topology_namespaces(name):
        teardown.remove_topology(name)  # killed while building: no record, no stats
    else:
        raise UserError(f"no topology named {name!r} is up (see `mpstream list topologies`)")
    console.print(f"topology {name} removed")


def _print_stats(stats: dict[str, Any]) -> None:
    """What each emulated link did while it ran (the emulators' own counters)."""
    if not stats:
        return
    table = Table(title="emulated links")
    for column in ("link", "direction", "packets out", "MB out", "dropped: queue", "loss",
                   "down"):
        table.add_column(column, justify="right" if column != "link" else "left")
    for label, link in stats.items():
        for key, direction in (("a_to_b", "uplink"), ("b_to_a", "downlink")):
            d = link.get(key, {})
            table.add_row(label, direction, str(d.get("packets_out", "?")),
                          f"{d.get('bytes_out', 0) / 1e6:.2f}",
                          str(d.get("dropped_queue_packets", "?")),
                          str(d.get("dropped_loss_packets", "?")),
                          str(d.get("dropped_down_packets", "?")))
    console.print(table)


@netem.command()
@click.argument("pattern", default="*")
def clean(pattern: str) -> None:
    """Remove what killed programs left of topologies (those whose name matches PATTERN,
    shell-style): namespaces, the processes in them, emulators and state. The topology part of
    `mpstream clean`; topologies whose owner runs, or that `netem up` left up, stay."""
    from mpstream.netem import coupled
    from mpstream.netem.system import require_root
    from mpstream.netem.teardown import clean_stale

    require_root()
    sweep = clean_stale(pattern)
    unloaded = coupled.clean_stale()
    for line in sweep.lines() + unloaded + coupled.awaiting_kernel():
        console.print(line, highlight=False, soft_wrap=True)
    if not sweep.removed:
        console.print("no topology left behind", highlight=False)


# Kept for scripts that list this way; every kind is listed by `mpstream list KIND` now.
@netem.command(name="list", hidden=True)
def list_() -> None:
    """Show the preset profiles and the topologies that are up."""
    from mpstream.netem.profile import load_profile, preset_names
    from mpstream.netem.topology import live_topologies

    warn("`mpstream netem list` is now `mpstream list profiles` and `mpstream list topologies`")

    presets = Table(title="presets (netem/profiles/)")
    for column in ("name", "mode", "paths (downlink)", "description"):
        presets.add_column(column)
    unavailable = []
    for name in preset_names():
        try:
            prof = load_profile(name)
        except UserError as exc:
            # A preset whose trace is not on this machine is listed, marked, never fatal.
            presets.add_row(name, "-", "[red]unavailable[/red] (see below)", "")
            unavailable.append((name, str(exc)))
            continue
        links = "; ".join(prof.link(i, "downlink").describe() for i in range(len(prof.paths)))
        presets.add_row(name, prof.mode, links, prof.description)
    console.print(presets)
    for name, reason in unavailable:
        console.print(f"{name}: unavailable: {reason}", markup=False, highlight=False,
                      soft_wrap=True)
    live = live_topologies()
    if not live:
        console.print("no topology is up")
        return
    table = Table(title="topologies up")
    for column in ("name", "profile", "namespaces", "emulators", "state"):
        table.add_column(column)
    for topo in live:
        table.add_row(topo["name"], str(topo.get("profile")), " ".join(topo["namespaces"]),
                      f"{topo['emulators_running']}/{len(topo.get('emulator_pids', []))} running",
                      "up" if topo["healthy"] else "broken: remove it with `netem down`")
    console.print(table)


@netem.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("host")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--mptcp", is_flag=True, help="Run under `mptcpize run` (in mptcp mode).")
def exec_(name: str, host: str, argv: tuple[str, ...], mptcp: bool) -> None:
    """Run a command on HOST of topology NAME (client, server, link, or a competing client:
    user1, user2, …): `mpstream netem exec t1 client -- curl ...`."""
    from mpstream.netem.system import require_root
    from mpstream.netem.topology import Topology
    from mpstream.transports.base import get_transport

    require_root()
    topo = Topology.attach(name)
    # Wrapped only when the host runs MPTCP: in tcp mode programs stay plain TCP.
    users = {u.host: u.mptcp for u in topo.competitors}
    speaks_mptcp = users.get(host, topo.mptcp)
    wrap = get_transport("mptcp").wrap if mptcp and speaks_mptcp else None
    command = topo.command(host, list(argv), wrap=wrap)
    sys.stdout.flush()
    os.execvp(command[0], command)


@netem.command()
@click.argument("profile")
@click.option("--name", default=None, help="Topology name (default: chk<pid>).")
@set_option
@deployment_option
@click.option("--duration", default=3.0, show_default=True,
              help="Seconds of each throughput run (one more second is measured and dropped).")
@json_option
def check(profile: str, name: str | None, overrides: tuple[str, ...], deployment: str | None,
          duration: float, as_json: bool) -> None:
    """Build PROFILE, measure RTT and loss per path (ping), throughput per path (iperf3 TCP
    pinned to the path) and the MPTCP aggregate, compare with the profile, tear down. Exits 1
    when a figure is outside its tolerance."""
    from mpstream.netem.check import CHECK_STEPS, print_report, run_check
    from mpstream.netem.profile import load_profile
    from mpstream.progress import working

    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        prof = load_profile(profile, _overrides(overrides), deployment=deployment)
        with working("netem check", steps=CHECK_STEPS) as progress:
            report = run_check(prof, name=name or f"chk{os.getpid()}", duration_s=duration,
                               step=progress.step)
        print_report(report, Console(stderr=True) if as_json else console)
        if as_json:
            with contextlib.suppress(BrokenPipeError):
                print_json(report.as_dict())
        if not report.ok:
            raise SystemExit(EXIT_FAILED)


@click.group()
def traces() -> None:
    """Link traces for profiles: fetch the published ones, make one up
    (`mpstream list traces` lists them)."""


# Kept for scripts that list this way: `mpstream list traces` now.
@traces.command(name="list", hidden=True)
def traces_list() -> None:
    """The published traces, and whether each is on this machine (and where)."""
    from mpstream.netem import traces as store

    warn("`mpstream traces list` is now `mpstream list traces`")
    # Plain lines, never wrapped: paths are long, and scripts grep this.
    for name, trace in store.PUBLISHED.items():
        folder = trace.folder()
        here = f"in {folder}" if folder else f"not here: `mpstream traces fetch {name}`"
        console.print(f"{name:<22} {here}  ({trace.description})", markup=False,
                      highlight=False, soft_wrap=True)
    console.print("looked in: " + ", ".join(str(d) for d in store.search_dirs())
                  + " (MPSTREAM_TRACES overrides the cache)", markup=False, highlight=False,
                  soft_wrap=True)


@traces.command(name="fetch")
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every published trace.")
def traces_fetch(names: tuple[str, ...], all_: bool) -> None:
    """Download published traces NAMES (checked against pinned SHA-256s) into the cache."""
    from mpstream.netem import traces as store

    if all_:
        names = tuple(store.PUBLISHED)
    if not names:
        raise UserError("name the traces to fetch (`mpstream list traces`), or give --all")
    for path in store.fetch(list(names)):
        console.print(f"{path}", markup=False, highlight=False)


@traces.command(name="synth")
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--mean-rate", required=True, help="Mean capacity: bit/s or e.g. 10mbit.")
@click.option("--seconds", type=float, default=60, show_default=True)
@click.option("--swing", type=float, default=0.5, show_default=True,
              help="How far the rate swings around its mean (a fraction; the sine model).")
@click.option("--cov", type=float, default=None,
              help="Cellular-like model: the coefficient of variation of each second's rate.")
@click.option("--autocorr", type=float, default=None,
              help="Cellular-like model: the correlation of successive seconds' rates.")
@click.option("--like", "like", default=None, metavar="TRACE",
              help="Cellular-like model with TRACE's --cov and --autocorr (a trace name or "
                   "file, e.g. a fetched TMobile-LTE-short), at --mean-rate.")
@click.option("--shape", type=click.Choice(["steady", "fade", "walk", "outages"]), default=None,
              help="WiFi model: a link of good rate --mean-rate (its mean is what the shape "
                   "leaves of it) that stays in range, fades, walks out of range and back, or "
                   "drops out for a few seconds; the timing drawn from --seed.")
@click.option("--seed", type=int, default=0, show_default=True)
def traces_synth(out: Path, mean_rate: str, seconds: float, swing: float, cov: float | None,
                 autocorr: float | None, like: str | None, shape: str | None, seed: int) -> None:
    """Write a made-up varying trace of known mean to OUT.up and OUT.down: a sine swing with
    noise, (--cov and --autocorr, or --like) a cellular-like one with a measured trace's
    second-scale statistics, or (--shape) a WiFi link's fade, walk or outages."""
    from mpstream.netem import traces as store
    from mpstream.netem.profile import parse_rate

    try:
        rate = parse_rate(mean_rate)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--mean-rate") from None
    if rate is None:
        raise click.BadParameter("a trace needs a finite rate", param_hint="--mean-rate")
    if shape is not None:
        if like is not None or cov is not None or autocorr is not None:
            raise UserError("--shape is the WiFi model: give it without --like, --cov and "
                            "--autocorr")
        # One walk (or fade) both ways, each direction with fading of its own.
        _write_both(out, lambda offset: store.wifi_like(shape, rate, seconds, seed,
                                                        fading=offset))
        return
    if like is not None:
        if cov is not None or autocorr is not None:
            raise UserError("--like takes --cov and --autocorr from the trace: give one or the "
                            "other")
        found = store.find(like, "down")
        if found is None:
            raise UserError(store.not_found_message(like))
        stats = store.rate_statistics([int(x) for x in found.read_text().split()])
        cov, autocorr = stats["cov"], stats["autocorr"]
        console.print(f"{found}: per second cov {cov:.2f}, lag-1 autocorrelation "
                      f"{autocorr:.2f}", markup=False, highlight=False, soft_wrap=True)
    elif (cov is None) != (autocorr is None):
        raise UserError("the cellular-like model needs both --cov and --autocorr")
    _write_both(out, lambda offset: (
        store.synthetic(rate, seconds, seed + offset, swing) if cov is None
        else store.cellular_like(rate, seconds, cov, autocorr or 0.0, seed + offset)))


def _write_both(out: Path, stamps_of: Callable[[int], list[int]]) -> None:
    """OUT.down and OUT.up, each from `stamps_of(seed offset)` (0 down, 1 up)."""
    from mpstream.netem import traces as store

    for direction, offset in (("down", 0), ("up", 1)):
        path = out.with_name(f"{out.name}.{direction}")
        store.write(path, stamps_of(offset))
        console.print(f"{path}: {store.mean_bps(path) / 1e6:.2f} Mbit/s mean",
                      markup=False, highlight=False)


@traces.command(name="pairs")
@click.argument("pair_set", metavar="SET", default="mobile-24")
@click.option("--pair", "only", default=None, metavar="NAME", help="Only this pair.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --pair: write its traces into this folder (wifi, cellular and their "
                   "sum, each .down and .up), to look at or to play in a profile of your own.")
@json_option
def traces_pairs(pair_set: str, only: str | None, out: Path | None, as_json: bool) -> None:
    """The WiFi x cellular trace pairs of SET (netem/pairs/SET.toml or a file): each pair's
    name and what makes it, and (its cellular trace here) each downlink trace's mean, the
    variation of its rate second by second and its outage time."""
    from mpstream.netem import tracepairs

    found = tracepairs.load_pair_set(pair_set)
    pairs = [found.named(only)] if only else list(found.pairs)
    if out is not None:
        if not only:
            raise UserError("--out writes one pair's traces: give --pair NAME too")
        out.mkdir(parents=True, exist_ok=True)
        for path in pairs[0].write(out):
            console.print(f"{path}.down, {path}.up", markup=False, highlight=False)
    rows = [_pair_row(pair) for pair in pairs]
    if as_json:
        print_json({"set": found.name, "window_s": found.window_s, "pairs": rows})
        return
    table = Table("WiFi", "cellular", "WiFi Mbit/s", "cov", "outage s", "cell Mbit/s", "cov",
                  "outage s", "sum Mbit/s", title=f"pair set {found.name}: {found.window_s:g} s "
                  "a pair, downlink (cov: of the rate second by second; outage: in gaps of "
                  "0.5 s or more)")
    table.columns.insert(0, Column("pair", no_wrap=True))
    for row in rows:
        st = row.get("statistics") or {}
        table.add_row(row["name"], f"{row['wifi']['shape']} {row['wifi']['rate_bps'] / 1e6:g}M",
                      f"{tracepairs.short_name(row['cellular']['trace'])} "
                      f"+{row['cellular']['offset_s']}s",
                      *[f"{st[k]:.2f}" if k in st else "" for k in (
                          "wifi_mean_mbps", "wifi_cov", "wifi_outage_s", "cellular_mean_mbps",
                          "cellular_cov", "cellular_outage_s", "sum_mean_mbps")])
    console.print(table)
    missing = next((row["unavailable"] for row in rows if "unavailable" in row), None)
    if missing:
        console.print(f"no statistics: {missing}", markup=False, highlight=False)


def _pair_row(pair: Any) -> dict[str, Any]:
    """A pair as `traces pairs` shows it: its definition, and its traces' statistics when its
    cellular trace is here (else why not)."""
    row: dict[str, Any] = pair.model_dump(mode="json")
    try:
        row["statistics"] = pair.statistics()
    except UserError as exc:
        row["unavailable"] = str(exc)
    return row
