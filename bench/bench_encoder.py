"""Encoder benchmark: the one-decode pipeline against one ffmpeg process per rung.

    .venv/bin/python bench/bench_encoder.py [--duration 60] [--ladder standard]
        [--summary docs/data/bench-encoder-DATE.json]

Both variants produce the same renditions (every rung of the ladder in H.264 and HEVC, the
same rate control and GOPs) from the looped sample clip. The pipeline decodes the source once
and scales each rung once; the baseline runs one ffmpeg per rung, one after the other, each
decoding the source again. Each variant runs in its own child process so that its peak memory
(ru_maxrss of its largest ffmpeg) and its CPU time (user + system of its ffmpeg processes) are
measured separately. On a shared machine wall-clock time depends on what else runs; CPU time
much less so, which is why both are printed. `--summary` writes each variant's figures, and the
ratios printed, as a run summary for the docs (scripts/docsfigures.py).
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mpstream.encoder.commands import encode_command
from mpstream.encoder.ladder import load_ladder
from mpstream.encoder.pipeline import encode_media
from mpstream.encoder.runner import run_ffmpeg
from mpstream.encoder.sources import resolve_source
from mpstream.encoder.tools import require_tools
from mpstream.runner.report.summary import BenchRecord

SEGMENT = 4.0


def _variant(name: str, ladder_name: str, duration: float) -> dict:
    """Run one variant in this process and report wall time and children's peak RSS."""
    tools = require_tools()
    ladder = load_ladder(ladder_name)
    source = resolve_source("sample", duration, ladder.top.width, ladder.top.height)
    with tempfile.TemporaryDirectory(prefix="mpstream-bench-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        if name == "pipeline":
            run_ffmpeg(encode_command(tools.ffmpeg, source, ladder, SEGMENT, work),
                       label="pipeline", total_seconds=duration, show=False)
        elif name == "per-rung":
            for index, rung in enumerate(ladder.rungs):
                single = ladder.model_copy(update={"rungs": (rung,)})
                argv = encode_command(tools.ffmpeg, source, single, SEGMENT, work,
                                      with_audio=index == 0)
                run_ffmpeg(argv, label=rung.name, total_seconds=duration, show=False)
        elif name == "full":
            encode_media("sample", ladder_name, SEGMENT, duration, work / "tree", progress=False)
        wall = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"variant": name, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--ladder", default="standard")
    parser.add_argument("--skip-full", action="store_true",
                        help="leave out the full encode_media run (encode + package + validate)")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = parser.parse_args()
    # Stopping the benchmark stops its ffmpeg too (run_ffmpeg cleans up on any exception).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.variant:
        print(json.dumps(_variant(args.variant, args.ladder, args.duration)))
        return

    record = BenchRecord()
    ladder = load_ladder(args.ladder)
    renditions = sum(len(r.codecs) for r in ladder.rungs)
    print(f"{args.duration:g} s of the sample, ladder {args.ladder}: {len(ladder.rungs)} rungs,"
          f" {renditions} video renditions, {SEGMENT:g} s GOPs")
    results = {}
    variants = ["per-rung", "pipeline"] + ([] if args.skip_full else ["full"])
    for variant in variants:
        done = subprocess.run(
            [sys.executable, __file__, "--variant", variant, "--duration", str(args.duration),
             "--ladder", args.ladder],
            capture_output=True, text=True, check=True,
        )
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
        r = results[variant]
        r["realtime_x"] = args.duration / r["wall_s"]
        print(f"  {variant:9s} {r['wall_s']:7.1f} s wall  {args.duration / r['wall_s']:5.2f}x real"
              f" time  {r['cpu_s']:7.1f} s CPU  peak RSS {r['peak_rss_mib']:7.1f} MiB",
              flush=True)
    pipe, rung = results["pipeline"], results["per-rung"]
    print(f"per-rung / pipeline: wall time {rung['wall_s'] / pipe['wall_s']:.2f},"
          f" CPU time {rung['cpu_s'] / pipe['cpu_s']:.2f}")
    if "full" in results:
        print(f"full encode_media (encode + package + validate): real-time factor"
              f" {args.duration / results['full']['wall_s']:.2f}")
    if args.summary:
        rounds = {v: [{k: r[k] for k in UNITS if k in r}] for v, r in results.items()}
        derived = {"per-rung": {"wall_vs_pipeline": rung["wall_s"] / pipe["wall_s"],
                                "cpu_vs_pipeline": rung["cpu_s"] / pipe["cpu_s"]}}
        print(f"summary: {record.write(args.summary, sys.argv, rounds, UNITS, derived)}")


UNITS = {"wall_s": "s", "realtime_x": "x", "cpu_s": "s", "peak_rss_mib": "MiB",
         "wall_vs_pipeline": "", "cpu_vs_pipeline": ""}


if __name__ == "__main__":
    main()
