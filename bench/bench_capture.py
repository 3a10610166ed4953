"""What `--pcap` costs each condition: the CPU its tcpdumps spend on one download, single-path TCP
on one 30 Mbit/s path beside MPTCP on two 15 Mbit/s paths, with the captures laid out the way
trials did it before and the way they do it now, side by side in one run (alternating rounds),
on two topologies kept up for the whole bench.

    .venv/bin/python bench/bench_capture.py [--rounds 6] [--seconds 5] [--summary FILE]

- `per-interface`: what a trial captured before: one tcpdump on each client path interface and
  one on the server's, so a two-path condition ran three captures where one path ran two.
- `per-namespace`: what a trial captures now (runner/samplers/capture.py `namespace_targets`):
  one tcpdump on all of the client's interfaces (`-i any`) and one on the server's, whatever
  the number of paths.

Each round downloads with iperf3 (`-R`, `--seconds` long) under a capture and reads each
tcpdump's CPU time (user and system, from /proc) before stopping it. Prints each condition's
median CPU seconds and packets captured, and per layout the ratio of the two-path condition's
CPU to the one path's (1.0 is a capture that costs both alike); `--summary` writes them as a run
summary (scripts/docsfigures.py)."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from mpstream.netem.topology import Topology
from mpstream.paths import REPO_ROOT
from mpstream.proc import signals_interrupt
from mpstream.runner.report.summary import BenchRecord
from mpstream.runner.samplers.capture import PacketCapture, namespace_targets
from mpstream.transports.base import get_transport

sys.path.insert(0, str(REPO_ROOT))
from tests.waiting import listening, wait_until

LAYOUTS = ("per-interface", "per-namespace")
NETWORKS = {"single": ("thesis-bandwidth-single", "tcp"),
            "balanced": ("thesis-bandwidth-balanced", "mptcp")}
PORT = 5311
TICKS = os.sysconf("SC_CLK_TCK")


def targets(layout: str, topo: Topology) -> list[tuple[str | None, str, str]]:
    if layout == "per-namespace":
        return namespace_targets(topo.client_ns, topo.server_ns)
    return [(topo.client_ns, p.client_ifname, f"client-{p.client_ifname}")
            for p in topo.paths] + [(topo.server_ns, "eth0", "server-eth0")]


def cpu_s(pid: int) -> float:
    """A process's user and system CPU seconds so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def one_round(layout: str, topo: Topology, transport: str, seconds: int,
              out: Path) -> dict[str, float]:
    wrap = get_transport(transport).wrap
    capture = PacketCapture(targets(layout, topo), out)
    with capture:
        pids = [proc.pid for proc, _ in capture._procs]
        done = topo.run("client", ["iperf3", "-c", topo.server_addr, "-p", str(PORT), "-R",
                                   "-t", str(seconds), "-J"], wrap=wrap, capture_output=True,
                        text=True, timeout=seconds + 30)
        spent = sum(cpu_s(pid) for pid in pids)
    if done.returncode != 0:
        raise SystemExit(f"iperf3 failed: {done.stderr.strip()[:300]}")
    packets = 0
    for f in capture.files:
        read = subprocess.run(["sh", "-c", f"zcat {f} | tcpdump -nr - 2>/dev/null | wc -l"],
                              capture_output=True, text=True, check=True)
        packets += int(read.stdout)
        f.unlink()
    return {"capture_cpu_s": spent, "captures": float(len(pids)), "packets": float(packets)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = parser.parse_args()
    record = BenchRecord()
    names = [f"{net}-{layout}" for net in NETWORKS for layout in LAYOUTS]
    rounds: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    tag = os.getpid() % 10000
    with signals_interrupt(), tempfile.TemporaryDirectory(prefix="mps-bench-capture-") as tmp, \
            Topology.up(NETWORKS["single"][0], name=f"bc1{tag}") as single, \
            Topology.up(NETWORKS["balanced"][0], name=f"bc2{tag}") as balanced:
        topos = {"single": single, "balanced": balanced}
        servers = []
        try:
            for net, topo in topos.items():
                servers.append(topo.popen("server", ["iperf3", "-s", "-p", str(PORT)],
                                          wrap=get_transport(NETWORKS[net][1]).wrap,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                wait_until(lambda t=topo: listening(t.server_ns, PORT), 10, "iperf3 listens")
            for r in range(args.rounds):
                # Alternate the order, so that no condition always follows another.
                for name in (names if r % 2 == 0 else names[::-1]):
                    net, layout = name.split("-", 1)
                    figures = one_round(layout, topos[net], NETWORKS[net][1], args.seconds,
                                        Path(tmp) / f"{name}-{r}")
                    rounds[name].append(figures)
                    print(f"round {r} {name:24} capture CPU {figures['capture_cpu_s']:.3f} s, "
                          f"{figures['packets']:.0f} packets", flush=True)
        finally:
            for server in servers:
                server.kill()
                server.wait()
    medians = {n: {k: statistics.median(x[k] for x in rounds[n]) for k in rounds[n][0]}
               for n in names}
    for n in names:
        print(f"{n:24} median capture CPU {medians[n]['capture_cpu_s']:.3f} s, "
              f"{medians[n]['packets']:.0f} packets, {medians[n]['captures']:.0f} captures")
    derived = {}
    for layout in LAYOUTS:
        ratio = (medians[f"balanced-{layout}"]["capture_cpu_s"]
                 / medians[f"single-{layout}"]["capture_cpu_s"])
        derived[f"balanced-{layout}"] = {"cpu_vs_single": ratio}
        print(f"{layout}: two paths' capture CPU / one path's {ratio:.2f}x")
    if args.summary:
        units = {"capture_cpu_s": "s", "captures": "", "packets": ""}
        print(f"summary: {record.write(args.summary, sys.argv, rounds, units, derived)}")


if __name__ == "__main__":
    main()
