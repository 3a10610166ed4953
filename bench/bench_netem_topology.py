"""What a topology costs to build and remove: the runner builds one per trial, so this is a
fixed cost on every trial of a comparison.

Run as root:  .venv/bin/python bench/bench_netem_topology.py [--repeat N]

Per preset: the median time of `Topology.up` (namespaces, veths, TUN devices, policy routes,
MPTCP endpoints, emulators started and `ready`, a ping over every path) and of `down()`
(SIGTERM to the emulators, their stats written, namespaces removed). Then several topologies
built one after another and kept up together, to show that coexisting ones do not slow each
other. Wall-clock times on a machine that may be shared: noisy.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import time

from mpstream.errors import UserError
from mpstream.netem.profile import load_profile, preset_names
from mpstream.netem.teardown import leftovers
from mpstream.netem.topology import Topology
from mpstream.proc import signals_interrupt


def timed_up_down(profile, name: str) -> tuple[float, float]:
    started = time.monotonic()
    topo = Topology.up(profile, name)
    try:
        built = time.monotonic()
    finally:
        topo.down()
    return built - started, time.monotonic() - built


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    name = f"bt{os.getpid()}"
    print(f"{'preset':32} {'paths':>5} {'up ms':>8} {'down ms':>8}   (median of {args.repeat})")
    for preset in preset_names():
        try:
            profile = load_profile(preset)
        except UserError as exc:  # e.g. a trace not fetched on this machine
            print(f"{preset:32} skipped: {exc}")
            continue
        ups, downs = zip(*(timed_up_down(profile, name) for _ in range(args.repeat)),
                         strict=True)
        print(f"{preset:32} {len(profile.paths):5d} {1000 * statistics.median(ups):8.0f} "
              f"{1000 * statistics.median(downs):8.0f}")
    count = 6
    profile = load_profile("thesis-bandwidth-balanced")
    topologies, times = [], []
    try:
        for index in range(count):
            started = time.monotonic()
            topologies.append(Topology.up(profile, f"{name}c{index}"))
            times.append(time.monotonic() - started)
    finally:
        started = time.monotonic()
        for topo in topologies:
            topo.down()
        removed = time.monotonic() - started
    print(f"{count} coexisting topologies: up {', '.join(f'{1000 * t:.0f}' for t in times)} ms "
          f"(first to last); all down in {1000 * removed:.0f} ms")
    assert not leftovers(f"{name}*"), leftovers(f"{name}*")
    return 0


if __name__ == "__main__":
    # SIGTERM (a timeout, a scheduler) tears down what the benchmark built, as Ctrl-C does.
    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        raise SystemExit(main())
