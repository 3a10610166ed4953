"""What `mpstream play` shows: a played session as one JSON object or as tables for people."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from mpstream.transports.base import TRANSPORTS

# What --json prints at least (issue: the player), in this order.
JSON_FIELDS = (
    "session", "player", "browser", "transport", "scheduler", "path_policy", "codec", "abr",
    "abr_decisions",
    "startup_delay_ms", "stall_count",
    "stall_ms", "segments", "mean_download_rate_bps", "mean_bitrate_bps", "dropped_frames",
    "total_frames", "errors", "paths", "metered_bytes", "metered_share", "metered_cost",
    "proof",
)  # fmt: skip


def print_session(result: dict[str, Any], as_json: bool) -> None:
    """A session's flat object (PlayResult.as_json, with what the trial adds): JSON_FIELDS
    first, then the rest in its own order; or the tables."""
    if as_json:
        ordered = {key: result.get(key) for key in JSON_FIELDS}
        ordered.update({k: v for k, v in result.items() if k not in ordered})
        click.echo(json.dumps(ordered, indent=2))
    else:
        _print_human(result, Console())


def _fmt_rate(bps: Any) -> str:
    return "–" if bps is None else f"{bps / 1e6:.2f} Mbit/s"


def _transport_label(name: object) -> str:
    """A transport's label for people (MPTCP, TCP); its name as given when none is known."""
    return TRANSPORTS.get(str(name)).label if str(name) in TRANSPORTS else str(name)


def _print_human(result: dict[str, Any], console: Console) -> None:
    table = Table(title=f"session {result.get('session')}", show_header=False)
    rows = [
        ("player", f"{result.get('player')} in {result.get('browser')} over "
                   f"{_transport_label(result.get('transport'))}"),
        ("codec", result.get("codec") or "–"),
        ("adaptation", f"{result.get('abr') or '–'}"
                       + (f" ({result['abr_decisions']} decisions)"
                          if result.get("abr_decisions") else "")),
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
    proof = result.get("proof")
    if isinstance(proof, dict) and proof:
        rows.append(("on the wire (client)",
                     ", ".join(f"{n} {name}" for name, n in proof.items())))
    if result.get("metered_share") is not None:
        cost = result.get("metered_cost")
        rows.append(("metered paths", f"{int(result.get('metered_bytes') or 0):,} bytes "
                     f"({float(result['metered_share']):.0%})"
                     + (f", cost {cost:.4f}" if cost is not None else "")
                     + f"; policy {result.get('path_policy')}, "
                     f"{len(result.get('path_policy_toggles') or [])} toggles"))
    if result.get("live_latency_samples"):
        rows.append(("latency to live", f"mean {result['live_latency_mean_s']:.2f} s,"
                     f" p95 {result['live_latency_p95_s']:.2f} s"))
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
