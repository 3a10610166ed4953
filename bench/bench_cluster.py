"""Cluster dispatch against a local run: one iperf scenario (balanced MPTCP and single-path TCP,
--rounds rounds of --seconds each) run here, one trial after another, then with
`--cluster local:N` for each N of --hosts; per run the makespan (the trials' first start to
their last end, and the whole command with the cluster's start and stop), the ideal (trials x
the trials' median length / hosts) and the gap between one trial's end and the next one's start
on the same host (its median: the per-trial dispatch cost), and every trial ok.

    .venv/bin/python bench/bench_cluster.py [--rounds 4] [--seconds 8] [--hosts 2]
        [--summary docs/data/bench-cluster-DATE.json]

`--summary` writes the figures as a run summary, each place (here, local:N) a condition, for
the docs to quote (scripts/docsfigures.py).

The local cluster's hosts share this machine's cores, so this measures what dispatch costs,
not how much faster a real cluster is: with two cores, two hosts running trials side by side
also slow each other down.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from rich.console import Console

from mpstream.runner.layout import TrialData, load_trials
from mpstream.runner.report.summary import BenchRecord
from mpstream.runner.run import run_scenario
from mpstream.runner.scenario import parse_scenario

UNITS = {"trials": "", "ok": "", "makespan_s": "s", "wall_s": "s", "ideal_s": "s", "trial_s": "s",
         "gap_s": "s", "over_ideal": ""}


def scenario(rounds: int, seconds: float):
    return parse_scenario({
        "name": "bench-cluster", "kind": "iperf", "trials": rounds, "seed": 9,
        "duration_s": seconds,
        "conditions": [
            {"label": "balanced", "profile": "thesis-bandwidth-balanced"},
            {"label": "single", "profile": "thesis-bandwidth-single", "transport": "tcp"}]},
        base_dir=Path.cwd())


def figures(trials: list[TrialData], hosts: int, wall_s: float) -> dict[str, float]:
    spans = {t.key: (datetime.fromisoformat(t.record.started_at),
                     datetime.fromisoformat(t.record.finished_at or t.record.started_at))
             for t in trials}
    first = min(s for s, _ in spans.values())
    last = max(e for _, e in spans.values())
    lengths = [(e - s).total_seconds() for s, e in spans.values()]
    gaps = []
    for host in {t.record.host for t in trials}:
        mine = sorted(spans[t.key] for t in trials if t.record.host == host)
        gaps += [(b[0] - a[1]).total_seconds() for a, b in itertools.pairwise(mine)]
    return {"trials": len(trials), "ok": sum(t.ok for t in trials),
            "makespan_s": (last - first).total_seconds(), "wall_s": wall_s,
            "ideal_s": len(trials) * statistics.median(lengths) / hosts,
            "trial_s": statistics.median(lengths),
            "gap_s": statistics.median(gaps) if gaps else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--hosts", type=int, nargs="+", default=[2])
    parser.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = parser.parse_args()
    record = BenchRecord()
    sc = scenario(args.rounds, args.seconds)
    quiet = Console(quiet=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        for hosts in [1, *args.hosts]:
            out = Path(tmp) / f"run-{hosts}"
            cluster = None if hosts == 1 else f"local:{hosts}"
            t0 = time.monotonic()
            run_scenario(sc, out, console=quiet, progress=False, cluster=cluster)
            rows.append((cluster or "here", figures(load_trials(out), hosts,
                                                    time.monotonic() - t0)))
    print(f"{'where':<9} {'trials':>6} {'ok':>3} {'trial s':>8} {'makespan s':>11} "
          f"{'ideal s':>8} {'vs ideal':>9} {'command s':>10} {'gap s':>6}")
    for where, f in rows:
        print(f"{where:<9} {f['trials']:>6} {f['ok']:>3} {f['trial_s']:>8.1f} "
              f"{f['makespan_s']:>11.1f} {f['ideal_s']:>8.1f} "
              f"{f['makespan_s'] / f['ideal_s'] - 1:>+9.0%} {f['wall_s']:>10.1f} "
              f"{f['gap_s']:>6.2f}")
    if args.summary:
        rounds = {where: [{**f, "over_ideal": f["makespan_s"] / f["ideal_s"] - 1}]
                  for where, f in rows}
        out = record.write(args.summary, sys.argv, rounds, UNITS)
        print(f"summary: {out}")


if __name__ == "__main__":
    main()
