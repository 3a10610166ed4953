"""A video trial's set-up and tear-down around its playback, the way trials did it before and the
way they do it now, side by side in one run (alternating rounds), on a topology kept up for the
whole bench: the servers (nginx and the collector) and a Chromium page up, the player page
loaded, then all of it down again. No playback: this is the part of a trial that is overhead.

    .venv/bin/python bench/bench_trial_setup.py [--rounds 8] [--summary FILE]

- `sequential`: what a trial did before: the collector (its two workers each importing the
  app) and then nginx, then the browser; on the way out the browser, nginx, and the collector
  stopped gracefully (SIGTERM, about a second of gunicorn's own).
- `side-by-side`: what a trial of a local run did before its trials shared a worker process
  (runner/workloads/video.py): nginx boots in a thread while the browser starts, reaching the
  collector the run started once for all its trials (`shared_collector`, started here before
  the first round); each browser comes with a Playwright driver of its own.
- `kept-driver`: what a trial of a local run does now: the same, with the Playwright driver
  the worker process keeps for all its trials (player/browsers.py `KeptPlaywright`, started
  here before the first round); each round still launches a browser of its own.

Both start nginx while the collector (when there is one to start) boots. Prints each mode's
median and the ratio; `--summary` writes them as a run summary (scripts/docsfigures.py)."""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mpstream.netem.topology import Topology
from mpstream.player.browsers import KeptPlaywright, open_page, using
from mpstream.proc import side_by_side, signals_interrupt
from mpstream.runner.report.summary import BenchRecord
from mpstream.server.stack import ServerStack, shared_collector
from mpstream.transports.base import get_transport

MODES = ("sequential", "side-by-side", "kept-driver")


def one_round(mode: str, topo: Topology, media: Path, workdir: Path, collector: Path,
              driver: KeptPlaywright) -> dict[str, float]:
    """Seconds to have servers and a page up with the player loaded, and to take them down."""
    wrap = get_transport("mptcp").wrap
    now = mode != "sequential"
    stack = ServerStack(media, netns=topo.server_ns, host=topo.server_addr, workdir=workdir,
                        collector_workers=2, one_trial=now,
                        shared_collector=collector if now else None)
    browser = open_page("chromium", topo.client_ns, wrap=wrap)
    t0 = time.monotonic()
    with contextlib.ExitStack() as held:
        if mode == "kept-driver":
            held.enter_context(using(driver))
        if mode == "sequential":
            held.enter_context(stack)
            page = held.enter_context(browser)
        else:
            _, page = held.enter_context(side_by_side(stack, browser))
        page.goto(f"{stack.base_url}/player/index.html", 30)
        t1 = time.monotonic()
    t2 = time.monotonic()
    return {"up_s": t1 - t0, "down_s": t2 - t1, "overhead_s": t2 - t0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = parser.parse_args()
    record = BenchRecord()
    rounds: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    with signals_interrupt(), tempfile.TemporaryDirectory(prefix="mps-bench-setup-") as tmp, \
            Topology.up("thesis-bandwidth-balanced", name=f"bs{os.getpid() % 100000}") as topo, \
            shared_collector(Path(tmp) / "collector") as collector, \
            ThreadPoolExecutor(max_workers=1) as kept_thread:
        # The kept driver's rounds run in a thread of their own: Playwright's sync API lets
        # no other driver start in the thread where one runs.
        driver = kept_thread.submit(KeptPlaywright).result()
        kept_thread.submit(driver.driver).result()  # started before the first round
        try:
            media = Path(tmp) / "media"
            (media / "dash").mkdir(parents=True)  # the page is all a round loads
            for r in range(args.rounds):
                # Alternate which goes first, so that neither always follows the other.
                for mode in (MODES if r % 2 == 0 else MODES[::-1]):
                    args_of = (mode, topo, media, Path(tmp) / f"{mode}-{r}", collector, driver)
                    figures = (kept_thread.submit(one_round, *args_of).result()
                               if mode == "kept-driver" else one_round(*args_of))
                    rounds[mode].append(figures)
                    print(f"round {r} {mode:12} up {figures['up_s']:.2f} s, down "
                          f"{figures['down_s']:.2f} s", flush=True)
        finally:
            kept_thread.submit(driver.stop).result()
    medians = {m: {k: statistics.median(x[k] for x in rounds[m]) for k in rounds[m][0]}
               for m in MODES}
    for m in MODES:
        print(f"{m:12} median up {medians[m]['up_s']:.2f} s, down {medians[m]['down_s']:.2f} s, "
              f"both {medians[m]['overhead_s']:.2f} s")
    ratio = medians["side-by-side"]["overhead_s"] / medians["sequential"]["overhead_s"]
    kept = medians["kept-driver"]["overhead_s"] / medians["side-by-side"]["overhead_s"]
    print(f"side-by-side / sequential: {ratio:.2f}x; kept-driver / side-by-side: {kept:.2f}x")
    if args.summary:
        derived = {"side-by-side": {"overhead_vs_sequential": ratio},
                   "kept-driver": {"overhead_vs_side_by_side": kept}}
        units = {"up_s": "s", "down_s": "s", "overhead_s": "s"}
        print(f"summary: {record.write(args.summary, sys.argv, rounds, units, derived)}")


if __name__ == "__main__":
    main()
