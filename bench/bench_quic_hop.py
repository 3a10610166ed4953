"""What the QUIC hop costs: one download of a fixed size from nginx over two emulated paths, by
curl in the client namespace, directly (TCP on one path, MPTCP on both) and through the hop
(tcp-hop, mptcp-hop, quic, mpquic), the six interleaved round after round.

Per download: its rate (a download that ends short is counted as failed and left out), the
CPU seconds per GB of the hop's two processes (proxy and gateway) and of nginx, and the whole
machine's busy CPU seconds per GB (the link emulators' share is the same for every mode).
Prints the medians, each hop mode's rate against the direct transport it stands beside (tcp-hop
and quic against tcp; mptcp-hop and mpquic against mptcp), and the hop's CPU per GB against
nginx's own in the direct download.

    .venv/bin/python bench/bench_quic_hop.py [--rounds 3] [--rate 100mbit] [--size 200M]
        [--summary docs/data/bench-quic-hop-DATE.json]

`--summary` writes each mode's rounds, and the ratios printed, as a run summary for the docs
(scripts/docsfigures.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mpstream.netem.profile import profile_from_dict
from mpstream.netem.teardown import netns_pids
from mpstream.netem.topology import Topology
from mpstream.network import Network
from mpstream.proc import machine_busy_seconds, process_cpu_seconds, signals_interrupt
from mpstream.runner.report.summary import BenchRecord
from mpstream.server.stack import ServerStack
from mpstream.transports.base import get_transport
from mpstream.transports.hop.programs import HopOptions, QuicHop

PORT = 8080
MODES = ("tcp", "tcp-hop", "quic", "mptcp", "mptcp-hop", "mpquic")
BESIDE = {"tcp-hop": "tcp", "quic": "tcp", "mptcp-hop": "mptcp", "mpquic": "mptcp"}


def cpu_of(netns: str, comm: str) -> float:
    """CPU seconds used so far by the processes named `comm` in `netns`."""
    total = 0.0
    for pid in netns_pids(netns):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                total += process_cpu_seconds(pid)
        except OSError:
            continue
    return total


class Failed(Exception):
    """A download that did not complete (the benchmark counts it and goes on)."""


def download(topo: Network, mode: str, base_url: str, size: int) -> float:
    """Seconds curl took to fetch the file."""
    wrap = get_transport("mptcp").wrap if mode == "mptcp" else None
    argv = ["curl", "-sSf", "-o", "/dev/null", "-w", "%{size_download}"]
    if mode == "tcp":
        argv += ["--interface", topo.paths[0].client_addr]
    t0 = time.monotonic()
    done = topo.run("client", [*argv, f"{base_url}/media/big.bin"], wrap=wrap,
                    capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    if done.returncode != 0 or int(done.stdout or 0) != size:
        raise Failed(f"{mode}: curl exit {done.returncode} after {done.stdout or 0} of {size} "
                     f"bytes: {done.stderr.strip()[-300:]}")
    return wall


def measure(topo: Topology, mode: str, size: int, workdir: Path, direct_url: str) -> dict:
    client, server = topo.netns("client"), topo.netns("server")

    def hop_cpu() -> float:
        return cpu_of(client, "mpstream-quic") + cpu_of(server, "mpstream-quic")

    if mode in BESIDE:
        hop_mode = mode.removesuffix("-hop")  # the transport tcp-hop is the hop's tcp mode
        with QuicHop(topo, PORT, HopOptions(hop_mode, qlog=False),  # type: ignore[arg-type]
                     workdir / mode) as hop:
            hop0, nginx0, busy0 = hop_cpu(), cpu_of(server, "nginx"), machine_busy_seconds()
            wall = download(topo, mode, hop.base_url, size)
            hop1, nginx1, busy1 = hop_cpu(), cpu_of(server, "nginx"), machine_busy_seconds()
    else:
        hop0 = hop1 = 0.0
        nginx0, busy0 = cpu_of(server, "nginx"), machine_busy_seconds()
        wall = download(topo, mode, direct_url, size)
        nginx1, busy1 = cpu_of(server, "nginx"), machine_busy_seconds()
    gb = size / 1e9
    return {"mbit_s": size * 8 / wall / 1e6, "hop_s_per_gb": (hop1 - hop0) / gb,
            "nginx_s_per_gb": (nginx1 - nginx0) / gb, "busy_s_per_gb": (busy1 - busy0) / gb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", default="100mbit")
    parser.add_argument("--size", default="200M", help="bytes to download (K, M, G suffixes)")
    parser.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = parser.parse_args()
    record = BenchRecord()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    size = int(args.size[:-1]) * units[args.size[-1]] if args.size[-1] in units else int(args.size)
    path = {"rate": args.rate, "delay_ms": 5, "queue_packets": 200}
    profile = profile_from_dict({"mode": "mptcp", "paths": [path, path]}, name="bench-hop")
    console = Console()
    results: dict[str, list[dict]] = {m: [] for m in MODES}
    failures: dict[str, list[str]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="mps-bench-hop-") as tmp:
        media = Path(tmp) / "media"
        media.mkdir()
        with (media / "big.bin").open("wb") as fh:
            for _ in range(size // (1 << 20)):
                fh.write(os.urandom(1 << 20))
            fh.write(os.urandom(size % (1 << 20)))
        with (
            Topology.up(profile, f"bh{os.getpid()}") as topo,
            ServerStack(media, netns=topo.server_ns, host=topo.server_addr, port=PORT) as stack,
        ):
            for round_ in range(args.rounds):
                for mode in MODES if round_ % 2 == 0 else reversed(MODES):
                    try:
                        results[mode].append(measure(topo, mode, size, Path(tmp),
                                                     stack.base_url))
                    except Failed as exc:
                        failures[mode].append(str(exc))
                        console.print(f"round {round_} FAILED {exc}", highlight=False)
                        continue
                    console.print(f"round {round_} {mode}: {results[mode][-1]}", highlight=False)
    if not all(results.values()):
        raise SystemExit(f"no download completed in some mode: {failures}")
    med = {m: {k: statistics.median(r[k] for r in results[m]) for k in results[m][0]}
           for m in MODES}
    table = Table(title=f"2 x {args.rate}, {args.size} per download, {args.rounds} rounds "
                        "(medians)")
    for column in ("mode", "done", "Mbit/s", "rate / direct", "hop CPU s/GB", "nginx CPU s/GB",
                   "hop / direct nginx", "machine CPU s/GB"):
        table.add_column(column)
    for mode in MODES:
        m, base = med[mode], med[BESIDE.get(mode, mode)]
        done = f"{len(results[mode])}/{len(results[mode]) + len(failures[mode])}"
        table.add_row(mode, done, f"{m['mbit_s']:.1f}", f"{m['mbit_s'] / base['mbit_s']:.3f}",
                      f"{m['hop_s_per_gb']:.2f}", f"{m['nginx_s_per_gb']:.2f}",
                      f"{m['hop_s_per_gb'] / base['nginx_s_per_gb']:.1f}x"
                      if mode in BESIDE and base["nginx_s_per_gb"] else "",
                      f"{m['busy_s_per_gb']:.2f}")
    console.print(table)
    if args.summary:
        # A download that ended short is in no round's figures: the summary counts them.
        derived = {mode: {"rate_vs_direct": med[mode]["mbit_s"]
                          / med[BESIDE.get(mode, mode)]["mbit_s"],
                          "failed_downloads": len(failures[mode])} for mode in MODES}
        units = {"mbit_s": "Mbit/s", "hop_s_per_gb": "s/GB", "nginx_s_per_gb": "s/GB",
                 "busy_s_per_gb": "s/GB", "rate_vs_direct": "", "failed_downloads": ""}
        out = record.write(args.summary, sys.argv, results, units, derived)
        console.print(f"summary: {out}")


if __name__ == "__main__":
    # SIGTERM (a timeout, a scheduler) tears down what the benchmark built, as Ctrl-C does.
    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        main()
