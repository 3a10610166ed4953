"""A bare clone to the demo's report, timed step by step as `make demo` runs them: each round
clones this repository afresh (its committed HEAD) into a folder of its own under /tmp and
runs, one after another, `make system-demo` (the Debian packages: already there on a machine
that has run it once), `make venv-demo` (uv, mpstream, Playwright, the sample video),
`make build-demo` (npm ci, the player bundle, the link emulator), then what `make demo` runs
after them, `mpstream doctor` and `mpstream demo` (its three trials, and the time before the
first, mostly the sample's encoding, from its run folder). The caches outside the clone
(uv's, npm's, /var/cache/mpstream) are used as a second clone on the same machine uses them;
`make demo` itself runs the venv and the build side by side, so its whole time is at most the
steps' sum.

    .venv/bin/python bench/bench_first_hour.py [--rounds 2]
        [--summary docs/data/bench-first-hour-DATE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mpstream.paths import REPO_ROOT
from mpstream.proc import signals_interrupt
from mpstream.runner.report.summary import BenchRecord

STEPS = (("system_demo_s", ["make", "-s", "system-demo"]),
         ("venv_demo_s", ["make", "-s", "venv-demo"]),
         ("build_demo_s", ["make", "-s", "build-demo"]),
         ("doctor_s", [".venv/bin/mpstream", "doctor"]),
         ("demo_s", [".venv/bin/mpstream", "demo"]))


def timed(clone: Path, name: str, argv: list[str]) -> float:
    log = clone.parent / f"{name}.log"
    t0 = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(argv, cwd=clone, stdout=out, stderr=subprocess.STDOUT)
    took = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed in {clone}:\n{log.read_text()[-2000:]}")
    return took


def demo_parts(clone: Path, demo_started: datetime) -> dict[str, float]:
    """From the demo's run folder: its trials' mean time, and the time before the first (the
    sample's encoding, the run's set-up)."""
    [run] = (clone / "results").glob("demo-*")
    records = [json.loads(p.read_text()) for p in (run / "trials").glob("*/trial.json")]
    first = min(datetime.fromisoformat(r["started_at"]) for r in records)
    return {"demo_trial_s": statistics.mean(r["elapsed_s"] for r in records),
            "demo_before_trials_s": (first - demo_started).total_seconds()}


def one_round(n: int) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="bench-first-hour-"))
    folder.chmod(0o755)
    try:
        clone = folder / "mpstream"
        subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
        figures, started = {}, {}
        for name, argv in STEPS:
            started[name] = datetime.now(UTC)
            figures[name] = timed(clone, name, argv)
        figures["total_s"] = sum(figures.values())
        figures.update(demo_parts(clone, started["demo_s"]))
        return figures
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the demo runs as root (network namespaces): run it with sudo")
    record = BenchRecord()
    console = Console()
    rounds = []
    for n in range(args.rounds):
        rounds.append(one_round(n))
        console.print(f"round {n}: " + ", ".join(f"{k} {v:.1f}" for k, v in rounds[-1].items()),
                      highlight=False)
    table = Table(title=f"a bare clone to the demo's report, {args.rounds} rounds (s)")
    for column in ("step", "min", "median", "max"):
        table.add_column(column)
    for name in rounds[0]:
        values = [r[name] for r in rounds]
        table.add_row(name, *(f"{f(values):.1f}" for f in (min, statistics.median, max)))
    console.print(table)
    if args.summary:
        out = record.write(args.summary, sys.argv, {"bare-clone": rounds},
                           {name: "s" for name in rounds[0]})
        console.print(f"summary: {out}")


if __name__ == "__main__":
    # SIGTERM (a timeout, a scheduler) stops the round's make as Ctrl-C does.
    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        main()
