"""Player figures, side by side in one run on the same topology: for each player, one session
over MPTCP and one over single-path TCP on two balanced 15 Mbit/s paths, with the startup
delay, the mean segment download rate, and how the bytes split over the paths; plus what the
page weighs per player (the libraries are separate chunks).

    .venv/bin/python bench/bench_player.py [--seconds 15] [--media DIR]

The machine's CPU is shared: startup delays in particular move with its load.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
from pathlib import Path

from mpstream.netem.topology import Topology
from mpstream.player.session import DIST_DIR, MANIFESTS, PlayRequest, play_session
from mpstream.proc import signals_interrupt
from mpstream.server.stack import ServerStack
from mpstream.transports.base import get_transport


def page_weight() -> dict[str, int]:
    """Bytes the page loads for each player: the entry, the shared chunk, the library chunk."""
    common = sum(p.stat().st_size for p in DIST_DIR.glob("*.js"))
    common += sum(p.stat().st_size for p in DIST_DIR.glob("chunks/chunk-*.js"))
    common += (DIST_DIR / "index.html").stat().st_size + (DIST_DIR / "hud.css").stat().st_size
    return {
        player: common + sum(p.stat().st_size for p in DIST_DIR.glob(f"chunks/{player}-*.js"))
        for player in MANIFESTS
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--media", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mps-bench-player-") as tmp:
        media = args.media
        if media is None:
            from mpstream.encoder.pipeline import encode_media

            media = Path(tmp) / "tiny"
            encode_media("synthetic", "tiny", 2.0, 30.0, media, progress=False)
        rows = []
        with Topology.up("thesis-bandwidth-balanced", name=f"bp{os.getpid() % 100000}") as topo, \
                ServerStack(media, netns=topo.server_ns, host=topo.server_addr) as stack:
            for player in MANIFESTS:
                for transport in ("mptcp", "tcp"):
                    r = play_session(topo, stack, PlayRequest(
                        player=player, transport=get_transport(transport),
                        duration_s=args.seconds,
                        session_id=f"bench-{player}-{transport}-{os.getpid()}")).as_json()
                    rows.append((player, transport, r))

    print("page weight (bytes loaded for the page itself):")
    for player, size in page_weight().items():
        print(f"  {player}: {size / 1024:.0f} KiB")
    print()
    header = (f"{'player':7} {'transport':9} {'startup ms':>10} {'mean dl Mbit/s':>14} "
              f"{'segments':>8} {'path0 MB':>8} {'path1 MB':>8} {'errors':>6}")
    print(header)
    by_key = {}
    for player, transport, r in rows:
        by_key[player, transport] = r
        p0, p1 = (p["rx_bytes"] / 1e6 for p in r["paths"])
        print(f"{player:7} {transport:9} {r['startup_delay_ms'] or 0:10.0f} "
              f"{(r['mean_download_rate_bps'] or 0) / 1e6:14.2f} {r['segments']:8d} "
              f"{p0:8.2f} {p1:8.2f} {r['errors']:6d}")
    print()
    for player in MANIFESTS:
        mp, tcp = by_key[player, "mptcp"], by_key[player, "tcp"]
        rate = (mp["mean_download_rate_bps"] or 0) / max(tcp["mean_download_rate_bps"] or 1, 1)
        startup = (mp["startup_delay_ms"] or 0) / max(tcp["startup_delay_ms"] or 1, 1)
        print(f"{player}: MPTCP/TCP mean segment download rate {rate:.2f}x, "
              f"startup delay {startup:.2f}x")


if __name__ == "__main__":
    # SIGTERM (a timeout, a scheduler) tears down what the benchmark built, as Ctrl-C does.
    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        main()
