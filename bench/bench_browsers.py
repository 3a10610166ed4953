"""Browsers and codecs side by side in one run on the same media and topology: dash.js in
Chromium (AVC) and in Firefox (AVC, then HEVC), over MPTCP on two balanced 15 Mbit/s paths,
with the startup delay, the CPU seconds the browser spent per minute of playback, and decoded /
dropped frames; then the ratios Firefox/Chromium (AVC) and HEVC/AVC (Firefox).

    .venv/bin/python bench/bench_browsers.py [--seconds 30] [--repeat 1] [--media DIR]
        [--summary docs/data/bench-browsers-DATE.json]

The media is one 720p rung at 4 Mbit/s in both codecs (encoded once, unless --media names a
tree with both), so the browsers and codecs decode the same picture at the same rate.

CPU time: every process in the client namespace (the browser and its child processes, but not
the drivers: Playwright's runs outside, the Firefox driver's node is left out) is read from
/proc twice a second; a process that exits keeps its last reading. The machine's CPU is shared:
startup delays and CPU times move with its load, so compare within one run. `--summary` writes
each case's sessions, and the ratios printed, as a run summary for the docs
(scripts/docsfigures.py).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

from mpstream.netem.teardown import netns_pids
from mpstream.netem.topology import Topology
from mpstream.player.session import PlayRequest, play_session
from mpstream.proc import signals_interrupt
from mpstream.runner.report.summary import BenchRecord
from mpstream.server.stack import ServerStack
from mpstream.transports.base import get_transport

CASES = (("chromium", "avc"), ("firefox", "avc"), ("firefox", "hevc"))
LADDER = """
name = "bench-browsers"
[encoding]
avc_preset = "ultrafast"
hevc_preset = "ultrafast"
[[rungs]]
name = "720p-4M"
width = 1280
height = 720
bitrate_kbps = 4000
codecs = ["avc", "hevc"]
"""
TICKS = os.sysconf("SC_CLK_TCK")


class NamespaceCpu:
    """CPU seconds used by the processes of a network namespace while it runs."""

    def __init__(self, netns: str, exclude: tuple[str, ...] = ("node",)):
        self.netns = netns
        self.exclude = exclude
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> None:
        for pid in netns_pids(self.netns):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if comm in self.exclude:
                continue
            # utime, stime, and the reaped children's cutime, cstime (fields 14-17).
            total = sum(int(x) for x in fields[11:15]) / TICKS
            self.seen[pid] = max(self.seen.get(pid, 0.0), total)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self._read()

    def __enter__(self) -> NamespaceCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def seconds(self) -> float:
        return sum(self.seen.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--media", type=Path, default=None)
    parser.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = parser.parse_args()
    record = BenchRecord()
    with tempfile.TemporaryDirectory(prefix="mps-bench-browsers-") as tmp:
        media = args.media
        if media is None:
            from mpstream.encoder.pipeline import encode_media

            ladder = Path(tmp) / "ladder.toml"
            ladder.write_text(LADDER)
            media = Path(tmp) / "media"
            print("encoding 720p AVC + HEVC …", flush=True)
            encode_media("sample", str(ladder), 2.0, args.seconds + 20, media, progress=False)
        rows = []
        with Topology.up("thesis-bandwidth-balanced", name=f"bb{os.getpid() % 100000}") as topo, \
                ServerStack(media, netns=topo.server_ns, host=topo.server_addr) as stack:
            for rep in range(args.repeat):
                for browser, codec in CASES:
                    with NamespaceCpu(topo.client_ns) as cpu:
                        r = play_session(topo, stack, PlayRequest(
                            player="dashjs", transport=get_transport("mptcp"),
                            duration_s=args.seconds, browser=browser, codec=codec,
                            session_id=f"bench-{browser}-{codec}-{rep}-{os.getpid()}")).as_json()
                    rows.append((browser, codec, r, cpu.seconds))
                    if r["failure"]:
                        print(f"{browser}/{codec}: {r['failure']}")

    print(f"{'browser':8} {'codec':5} {'decoded':16} {'startup ms':>10} {'CPU s/min':>9} "
          f"{'frames':>7} {'dropped':>7}")
    agg: dict[tuple[str, str], list[tuple[float, float]]] = {}
    rounds: dict[str, list[dict[str, float]]] = {}
    for browser, codec, r, cpu_s in rows:
        played = r.get("played_s") or args.seconds
        per_min = cpu_s / played * 60
        agg.setdefault((browser, codec), []).append((r.get("startup_delay_ms") or 0, per_min))
        rounds.setdefault(f"{browser}-{codec}", []).append({
            "startup_delay_ms": r.get("startup_delay_ms") or math.nan, "cpu_s_per_min": per_min,
            "frames": r.get("total_frames") or 0, "dropped_frames": r.get("dropped_frames") or 0})
        print(f"{browser:8} {codec:5} {r.get('codec')!s:16} "
              f"{r.get('startup_delay_ms') or 0:10.0f} {per_min:9.1f} "
              f"{r.get('total_frames') or 0:7d} {r.get('dropped_frames') or 0:7d}")

    def mean(case, i):
        values = [v[i] for v in agg[case]]
        return sum(values) / len(values)

    print()
    derived: dict[str, dict[str, float]] = {}
    for (a, b), label in ((((("firefox", "avc"), ("chromium", "avc"))), "Firefox/Chromium, AVC"),
                          ((("firefox", "hevc"), ("firefox", "avc")), "HEVC/AVC, Firefox")):
        startup, cpu = mean(a, 0) / max(mean(b, 0), 1), mean(a, 1) / max(mean(b, 1), 1e-9)
        print(f"{label}: startup delay {startup:.2f}x, CPU per minute {cpu:.2f}x")
        derived["-".join(a)] = {f"startup_vs_{'-'.join(b)}": startup,
                                f"cpu_vs_{'-'.join(b)}": cpu}
    if args.summary:
        units = {"startup_delay_ms": "ms", "cpu_s_per_min": "s/min", "frames": "",
                 "dropped_frames": ""}
        print(f"summary: {record.write(args.summary, sys.argv, rounds, units, derived)}")


if __name__ == "__main__":
    # SIGTERM (a timeout, a scheduler) tears down what the benchmark built, as Ctrl-C does.
    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        main()
