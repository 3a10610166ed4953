"""`mpstream play`: one headless playback session over an emulated topology."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from mpstream.errors import UserError
from mpstream.player.session import MANIFESTS, play_session

# What --json prints at least (issue: the player), in this order.
JSON_FIELDS = (
    "session", "player", "transport", "codec", "startup_delay_ms", "stall_count", "stall_ms",
    "segments", "mean_download_rate_bps", "mean_bitrate_bps", "errors", "paths",
)  # fmt: skip


def _check_media(media: Path, player: str) -> None:
    manifest = media / MANIFESTS[player].removeprefix("/media/")
    if not manifest.is_file():
        raise UserError(f"--media {media}: {manifest} is missing; make the media tree with "
                        f"`mpstream encode ... --out {media}`")


def _fmt_rate(bps: Any) -> str:
    return "–" if bps is None else f"{bps / 1e6:.2f} Mbit/s"


def _print_human(result: dict[str, Any], console: Console) -> None:
    table = Table(title=f"session {result.get('session')}", show_header=False)
    rows = [
        ("player", f"{result.get('player')} over {result.get('transport')}"),
        ("codec", result.get("codec") or "–"),
        ("startup delay", f"{result.get('startup_delay_ms')} ms"),
        ("stalls", f"{result.get('stall_count')} ({result.get('stall_ms')} ms)"),
        ("rebuffer ratio", str(result.get("rebuffer_ratio"))),
        ("segments", str(result.get("segments"))),
        ("mean download rate", _fmt_rate(result.get("mean_download_rate_bps"))),
        ("mean bitrate", _fmt_rate(result.get("mean_bitrate_bps"))),
        ("quality switches", str(result.get("switches"))),
        ("dropped / total frames",
         f"{result.get('dropped_frames')} / {result.get('total_frames')}"),
        ("errors", str(result.get("errors"))),
        ("played", f"{result.get('played_s')} s"),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    paths = Table(title="bytes per client path (kernel counters)")
    for column in ("path", "address", "received", "sent", "share"):
        paths.add_column(column, justify="right" if column != "address" else "left")
    for p in result["paths"]:
        paths.add_row(str(p["index"]), p["address"], f"{p['rx_bytes']:,}", f"{p['tx_bytes']:,}",
                      f"{p['rx_share']:.0%}")
    console.print(paths)
    used = sum(1 for p in result["paths"] if p["rx_share"] >= 0.05)
    console.print(f"paths carrying media: {used} of {len(result['paths'])}")


@click.command()
@click.option("--media", "media", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Media tree made by `mpstream encode` (hls/ and dash/ inside).")
@click.option("--player", required=True, type=click.Choice(["dashjs", "hlsjs"]),
              help="dashjs plays the MPD, hlsjs the HLS master playlist.")
@click.option("--profile", required=True, help="Netem profile: a preset name or a file.")
@click.option("--transport", type=click.Choice(["mptcp", "tcp"]), default=None,
              help="Chromium's sockets: mptcp (under mptcpize) or plain tcp. "
                   "Default: the profile's mode.")
@click.option("--duration", "duration_s", type=click.FloatRange(min=1), default=30.0,
              show_default=True, help="Seconds to play, from the play request.")
@click.option("--buffer", "buffer_s", type=click.FloatRange(min=1), default=None,
              help="How far ahead the player may buffer, in seconds (default: the library's).")
@click.option("--session", "session_id", default=None, help="Session id (default: generated).")
@click.option("--scenario", default=None, help="Scenario label stored with the session.")
@click.option("--trial", type=click.IntRange(min=0), default=None, help="Trial number.")
@click.option("--name", default="play", show_default=True, help="Topology name.")
@click.option("--screenshot", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Save a screenshot of the page (with its HUD) during playback.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def play(media: Path, player: str, profile: str, transport: str | None, duration_s: float,
         buffer_s: float | None, session_id: str | None, scenario: str | None,
         trial: int | None, name: str, screenshot: Path | None, as_json: bool) -> None:
    """Play one session in headless Chromium over the PROFILE's emulated paths and print the
    collector's summary with the bytes each path carried."""
    from mpstream.netem.profile import load_profile
    from mpstream.netem.topology import Topology
    from mpstream.server.stack import ServerStack

    _check_media(media, player)
    prof = load_profile(profile)
    transport = transport or prof.mode
    session_id = session_id or f"play-{player}-{transport}-{time.strftime('%Y%m%dT%H%M%S')}"
    console = Console(stderr=True)
    with Topology.up(prof, name=name) as topo:
        if not as_json:
            console.print(f"topology {topo.name} up: {len(topo.paths)} path(s); serving {media}")
        with ServerStack(media.resolve(), netns=topo.server_ns, host=topo.server_addr,
                         mptcp=transport == "mptcp") as stack:
            topo.start_events()
            result = play_session(topo, stack, player=player, manifest_path=MANIFESTS[player],
                                  transport=transport, duration_s=duration_s,
                                  session_id=session_id, scenario=scenario, trial=trial,
                                  screenshot=screenshot, buffer_s=buffer_s)
    if as_json:
        ordered = {key: result.get(key) for key in JSON_FIELDS}
        ordered.update({k: v for k, v in result.items() if k not in ordered})
        click.echo(json.dumps(ordered, indent=2))
    else:
        _print_human(result, Console())
    if result["failure"]:
        raise UserError(f"session {session_id} failed: {result['failure']}", exit_code=1)
