"""Runner benchmarks: what one kernel sample costs, and how closely the 100 ms grid is kept,
during an MPTCP transfer (4 connections × 2 subflows) in a two-path topology; and how long the
report takes for a run of 25 trials built in memory. Prints figures; not a test."""

from __future__ import annotations

import signal
import statistics
import subprocess
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from mpstream.netem.topology import Topology
from mpstream.proc import signals_interrupt
from mpstream.runner.samplers.kernel import SubflowSampler, read_samples
from mpstream.transports.base import get_transport

MPTCP_WRAP = get_transport("mptcp").wrap


def sampler_figures() -> None:
    with tempfile.TemporaryDirectory() as tmp, \
            Topology.up("thesis-bandwidth-balanced", name="rbench") as topo:
        server = topo.popen("server", ["iperf3", "-s", "-1", "-p", "5212"], wrap=MPTCP_WRAP,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        client = topo.popen("client", ["iperf3", "-c", topo.server_addr, "-p", "5212", "-R",
                                       "-P", "4", "-b", "2M", "-t", "12"], wrap=MPTCP_WRAP,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        probe = SubflowSampler(topo.client_ns, "client", Path(tmp) / "x.csv",
                               {p.client_addr: p.index for p in topo.paths}.get)
        costs = []
        for _ in range(30):
            t = time.perf_counter()
            rows = probe.sample_once()
            costs.append((time.perf_counter() - t) * 1000)
        out = Path(tmp) / "grid.csv"
        with SubflowSampler(topo.client_ns, "client", out, probe.path_of):
            time.sleep(6)
        client.wait(timeout=30)
        server.wait(timeout=10)
        times = sorted({r["t_s"] for r in read_samples(out)})
    gaps = [(b - a) * 1000 for a, b in pairwise(times)]
    costs.sort()
    print(f"sockets per sample: {len(rows)}")
    print(f"one sample (ip netns exec ss -tinHe + parse): median {statistics.median(costs):.1f} "
          f"ms, 90th percentile {costs[int(0.9 * len(costs))]:.1f} ms")
    print(f"sample interval over 6 s: {len(times)} samples, median {statistics.median(gaps):.1f}"
          f" ms, max {max(gaps):.1f} ms (target 100 ms)")


def report_figures() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from mpstream.runner.layout import write_json
    from mpstream.runner.report.build import build_report
    from tests.unit.test_runner_report import make_events, write_samples  # synthetic raw data

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        conds = [{"label": c, "profile": "x", "set": {}} for c in ("a", "b", "c", "d", "e")]
        write_json(run / "run.json", {"scenario": "bench", "conditions": conds})
        for k in range(5):
            for order, cond in enumerate(conds):
                d = run / "trials" / f"r{k:02d}-{cond['label']}"
                d.mkdir(parents=True)
                write_json(d / "trial.json", {
                    "key": d.name, "round": k, "order": k * 5 + order, "condition": cond,
                    "status": "ok", "capacity_bps": 30e6, "started_at": "2026-11-01T10:00:00Z",
                    "paths": [{"index": 0, "name": "path0"}, {"index": 1, "name": "path1"}]})
                write_json(d / "events.json", make_events("balanced", k))
                write_samples(d / "samples-client.csv", "client", {0: 3e6, 1: 1e6}, {})
                write_samples(d / "samples-server.csv", "server", {}, {0: 2, 1: 1})
        t = time.perf_counter()
        build_report(run)
        print(f"report of 25 trials (5 conditions): {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    # SIGTERM (a timeout, a scheduler) tears down what the benchmark built, as Ctrl-C does.
    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        sampler_figures()
        report_figures()
