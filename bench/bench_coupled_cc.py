"""CPU cost of the coupled congestion controls (BPF) against cubic: one MPTCP download of a fixed
size (iperf3 -R -n) over two paths, per CC, the CCs interleaved round after round; per
transfer the sender's CPU seconds per GB (the iperf3 server's own time, which includes the
kernel's work in its system calls) and the whole machine's busy CPU seconds per GB (softirq
too, where most ACKs and so most congestion-control calls are handled; the link emulators'
share is the same for every CC). Prints the medians and each CC's ratio to cubic.

    .venv/bin/python bench/bench_coupled_cc.py [--rounds 3] [--rate 100mbit] [--size 250M]
        [--cc wvegas ...]

`--cc` times only the CCs named, beside cubic (the baseline of every ratio). `--summary PATH`
writes each CC's rounds and ratios as a run summary for the docs (scripts/docsfigures.py).

`--rate unshaped` uses plain links (no emulator): the transfer then runs as fast as the CPU
lets it, where a per-ACK cost shows most.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mpstream.netem import coupled
from mpstream.netem.profile import profile_from_dict
from mpstream.netem.topology import Topology
from mpstream.proc import machine_busy_seconds, process_cpu_seconds, signals_interrupt
from mpstream.runner.report.summary import BenchRecord
from mpstream.transports.base import get_transport

CCS = ("cubic", *coupled.COUPLED)
PORT = 5401


def transfer(cc: str, rate: str, size: str) -> dict[str, float]:
    path = {"rate": rate, "delay_ms": 5, "queue_packets": 200} if rate != "unshaped" else {}
    ends = {"cc": cc}
    profile = profile_from_dict({"mode": "mptcp", "paths": [path, path],
                                 "deployment": {"server": ends, "client": ends}})
    wrap = get_transport("mptcp").wrap
    with Topology.up(profile, f"bcc{os.getpid()}", emulate=rate != "unshaped") as topo:
        server = topo.popen("server", ["iperf3", "-s", "-1", "-p", str(PORT)], wrap=wrap,
                            stdout=subprocess.DEVNULL)
        topo.wait_listening("server", PORT, server=server)
        sender = _iperf3_pid(topo.server_ns)  # mptcpize execs it: its own pid, not a wrapper's
        cpu0, busy0, t0 = process_cpu_seconds(sender), machine_busy_seconds(), time.monotonic()
        done = topo.run("client", ["iperf3", "-c", topo.server_addr, "-R", "-n", size, "-p",
                                   str(PORT)], wrap=wrap, capture_output=True, text=True)
        wall = time.monotonic() - t0
        cpu1, busy1 = process_cpu_seconds(sender), machine_busy_seconds()
        server.wait(timeout=30)
    if done.returncode != 0:
        raise SystemExit(f"{cc}: iperf3 failed: {done.stdout[-300:]} {done.stderr[-300:]}")
    gigabytes = _bytes(size) / 1e9
    return {"sender_s_per_gb": (cpu1 - cpu0) / gigabytes,
            "busy_s_per_gb": (busy1 - busy0) / gigabytes,
            "mbit_s": _bytes(size) * 8 / wall / 1e6}


def _iperf3_pid(netns: str) -> int:
    pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True,
                          check=True).stdout.split()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "iperf3":
                return int(pid)
        except OSError:
            continue
    raise SystemExit(f"no iperf3 in {netns}")


def _bytes(size: str) -> int:
    units = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", default="100mbit")
    parser.add_argument("--size", default="250M")
    parser.add_argument("--cc", action="append", choices=CCS,
                        help="a CC to time beside cubic (repeatable; default: all)")
    parser.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = parser.parse_args()
    record = BenchRecord()
    ccs = ("cubic", *[cc for cc in CCS if cc in args.cc and cc != "cubic"]) if args.cc else CCS
    console = Console()
    results: dict[str, list[dict[str, float]]] = {cc: [] for cc in ccs}
    for round_ in range(args.rounds):
        for cc in ccs if round_ % 2 == 0 else reversed(ccs):
            results[cc].append(transfer(cc, args.rate, args.size))
            console.print(f"round {round_} {cc}: {results[cc][-1]}", highlight=False)
    table = Table(title=f"2 x {args.rate}, {args.size} per MPTCP download, {args.rounds} rounds "
                        "(medians)")
    for column in ("cc", "Mbit/s", "sender CPU s/GB", "ratio", "machine CPU s/GB", "ratio"):
        table.add_column(column)
    base = {k: statistics.median(r[k] for r in results["cubic"])
            for k in ("sender_s_per_gb", "busy_s_per_gb")}
    derived: dict[str, dict[str, float]] = {}
    for cc in ccs:
        med = {k: statistics.median(r[k] for r in results[cc]) for k in results[cc][0]}
        derived[cc] = {"sender_vs_cubic": med["sender_s_per_gb"] / base["sender_s_per_gb"],
                       "busy_vs_cubic": med["busy_s_per_gb"] / base["busy_s_per_gb"]}
        table.add_row(cc, f"{med['mbit_s']:.1f}", f"{med['sender_s_per_gb']:.2f}",
                      f"{med['sender_s_per_gb'] / base['sender_s_per_gb']:.3f}",
                      f"{med['busy_s_per_gb']:.2f}",
                      f"{med['busy_s_per_gb'] / base['busy_s_per_gb']:.3f}")
    console.print(table)
    if args.summary:
        units = {"mbit_s": "Mbit/s", "sender_s_per_gb": "s/GB", "busy_s_per_gb": "s/GB"}
        out = record.write(args.summary, sys.argv, results, units, derived)
        console.print(f"summary: {out}")


if __name__ == "__main__":
    # SIGTERM (a timeout, a scheduler) tears down what the benchmark built, as Ctrl-C does.
    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        main()
