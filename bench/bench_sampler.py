"""How exactly the kernel sampler counts a path's bytes: one 12 MB MPTCP download over the
balanced preset's two 15 Mbit/s paths a round, sampled at both ends as a trial is
(tests/sampledload.py); per round and path, the bytes its client interface received beyond
the payload the sampler counted, a packet (the headers: Ethernet, IPv4, TCP and its options),
and the sampled bytes against iperf3's count. A sampler that lost a poll's bytes would show as
more than the 94 bytes of the largest header a packet (100 ms of a path is thousands of bytes
a packet of that second); bytes counted twice, as fewer than the 42 of the smallest frame.

    .venv/bin/python bench/bench_sampler.py [--rounds 10]
        [--summary docs/data/bench-sampler-DATE.json]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mpstream.paths import REPO_ROOT
from mpstream.proc import signals_interrupt
from mpstream.runner.report.summary import BenchRecord

# The download the sampler's integration test checks (tests/sampledload.py).
sys.path.insert(0, str(REPO_ROOT))
from tests.sampledload import sampled_download


def one_round(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-sampler-") as folder:
        got = sampled_download(Path(folder), f"bsmp{n}")
    if got.errors:
        raise SystemExit(f"round {n}: the sampler failed: {got.errors}")
    per_packet = got.bytes_a_packet()
    counted = got.iperf["end"]["sum_received"]["bytes"]
    return {**{f"path{p}_bytes_a_packet": v for p, v in sorted(per_packet.items())},
            "sampled_over_iperf": sum(got.sampled_bytes().values()) / counted,
            **{f"path{p}_retrans_bytes": float(v) for p, v in sorted(got.retransmitted().items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = parser.parse_args()
    record = BenchRecord()
    console = Console()
    rounds = []
    for n in range(args.rounds):
        rounds.append(one_round(n))
        console.print(f"round {n}: {rounds[-1]}", highlight=False)
    table = Table(title=f"12 MB MPTCP download, 2 x 15 Mbit/s, {args.rounds} rounds")
    for column in ("figure", "min", "median", "max"):
        table.add_column(column)
    for name in rounds[0]:
        values = [r[name] for r in rounds if name in r]
        table.add_row(name, *(f"{f(values):.4f}" for f in (min, statistics.median, max)))
    console.print(table)
    if args.summary:
        units = {k: "B" for k in rounds[0] if k.endswith(("_a_packet", "_bytes"))}
        out = record.write(args.summary, sys.argv, {"balanced": rounds}, units)
        console.print(f"summary: {out}")


if __name__ == "__main__":
    # SIGTERM (a timeout, a scheduler) tears down what the benchmark built, as Ctrl-C does.
    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        main()
