"""The figures of the penalty pages (docs/penalties/) that the report does not print, from run
folders.

    .venv/bin/python scripts/penalty_figures.py first-segment RUN_DIR [RUN_DIR ...]
    .venv/bin/python scripts/penalty_figures.py late-segments RUN_DIR [--from-index 5]
    .venv/bin/python scripts/penalty_figures.py ratio RUN_DIR CONDITION_A CONDITION_B
    .venv/bin/python scripts/penalty_figures.py peak-notsent RUN_DIR [--conditions A,B]
    .venv/bin/python scripts/penalty_figures.py path-return RUN_DIR [--conditions A,B]
    .venv/bin/python scripts/penalty_figures.py link-losses RUN_DIR [--conditions A,B] [--path 0]
    .venv/bin/python scripts/penalty_figures.py sender-windows RUN_DIR [--conditions A,B] [--path 0]
    .venv/bin/python scripts/penalty_figures.py restart-losses RUN_DIR [--conditions A,B] [--path 0]
    .venv/bin/python scripts/penalty_figures.py rung-rates RUN_DIR

first-segment (first-split.md, startup.md): per trial of the unbalanced conditions
(--conditions), the first video and audio downloads' times at the page (and the video one's
first byte after its request), the slow path's (path 1's) share of the bytes during the video
one, and the time that share needs at the slow path's rate, with their correlation.
late-segments (tail.md): per unbalanced condition, the downloads from --from-index on (after the
buffer filled): time, slow path's share, peak RTT of the slow path.
ratio (startup.md, negatives.md): startup delay of A over B, with a bootstrap 95% interval of
the ratio of the means.
peak-notsent (negatives.md): per trial, the most bytes one of the server's subflows held written
and not sent at a poll (`notsent` in samples-server.csv).
path-return (results.md, path failure): per trial of a profile whose path goes down and comes
back, the seconds from its return to the first poll that saw it deliver more than 5 kB (the
report's path<i>_return_s); under
the QUIC hop also when the proxy abandoned the path after the failure and opened it again after
the return (its path events).
link-losses (results.md, QUIC on one path): per trial, what the sender counted lost on a path
(the kernel's retransmissions, or the packets the QUIC hop's gateway declared lost) beside what
the path's link dropped in the data direction (link-stats.json), and the sender's window on that
path in packets (10th, 50th, 90th percentile and largest, over its polls).
sender-windows (results.md and coupled-cc.md, the MPCC sweep's wVegas): per trial of an iperf
run, its throughput and, over the polls that found a sender's socket on the path sending, the
window in packets and the smoothed RTT (10th, 50th, 90th percentile) and the least smoothed RTT.
restart-losses (results.md, QUIC on one path): per trial, the sender's downloads that start after
a pause of a second or more (a player's segment after its buffer filled; not the session's first
download): the share of all the losses on the path that fell in their first second, the window
at the last poll before each (what the sender kept through the pause) and the largest in that
first second, in packets (medians over the downloads).
rung-rates (results.md, adaptation rules): per trial, for each rung of the ladder (by its
nominal bitrate), the median download rate and size of the video segments played at that rung;
per group of the report (condition and rule), so that a rate can be set beside the segments'
size.

Each takes `--summary docs/data/NAME.json` (one run folder): it also writes the figures it
prints as a summary the docs cite (scripts/docsfigures.py), per condition each figure over the
trials and each trial's own, with the run's provenance and this command.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any

from mpstream.errors import UserError
from mpstream.jsonlines import read_json_lines
from mpstream.qoe.metrics import video_segments
from mpstream.runner.layout import load_trials
from mpstream.runner.metrics.common import (
    data_link,
    link_drops,
    sending_polls,
    socket_increments,
    trial_metrics,
)
from mpstream.runner.metrics.evidence import path_returns, return_s, trial_evidence
from mpstream.runner.report.analysis import group_of, varying_factors
from mpstream.runner.report.summary import write_analysis
from mpstream.runner.workloads.bulk import iperf_metrics

SLOW_PATH = 1
Rows = dict[str, list[dict[str, Any]]]  # a condition -> one dict of figures per trial
Derived = dict[str, dict[str, float]]  # a condition (or "all") -> figures over its trials
UNITS = {"first_video_ms": "ms", "first_audio_ms": "ms", "first_byte_ms": "ms",
         "slow_share": "", "predicted_ms": "ms", "over_prediction_ms": "ms", "correlation": "",
         "trials": "",
         "startup_delay_ms": "ms", "startup_ratio": "", "ratio_lo": "", "ratio_hi": "",
         "peak_notsent_kb": "KB", "return_s": "s", "abandoned_after_s": "s",
         "reopened_after_s": "s", "counted_lost": "packets", "dropped": "packets",
         "packets_in": "packets", "drop_share": "", "cwnd_p10": "packets",
         "cwnd_p50": "packets", "cwnd_p90": "packets", "cwnd_max": "packets",
         "throughput_mbps": "Mbit/s", "srtt_p10_ms": "ms", "srtt_p50_ms": "ms",
         "srtt_p90_ms": "ms", "srtt_min_ms": "ms", "restarts": "", "restart_loss_share": "",
         "cwnd_before_restart": "packets", "cwnd_restart_peak": "packets"}


UNBALANCED = "unbalanced,unbalanced-bbr,unbalanced-queue20"  # nginx without the cork


def _trials(run_dirs: list[Path], conditions: str):
    wanted = set(conditions.split(","))
    for run_dir in run_dirs:
        for rec in load_trials(run_dir):
            if rec.ok and rec.condition in wanted:
                yield rec


def _add(rows: Rows, rec, **figures: Any) -> None:
    rows.setdefault(rec.condition, []).append({"key": rec.key, **figures})


def first_segment(run_dirs: list[Path], conditions: str) -> tuple[Rows, Derived]:
    predicted, observed = [], []
    rows: Rows = {}
    for rec in _trials(run_dirs, conditions):
        first = {}
        for e in sorted((e for e in rec.events if e.get("type") == "segment"),
                        key=lambda e: e["data"]["t_request"]):
            kind = {"video": "video", "muxed": "video", "audio": "audio"}.get(e["data"]["kind"])
            if kind:  # not an init segment
                first.setdefault(kind, e["data"])
        took = {k: d["t_done"] - d["t_request"] for k, d in first.items()}
        audio = took.get("audio", float("nan"))
        line = f"{rec.dir.parent.parent.name:14} {rec.key:32} video {took['video']:4.0f} ms  " \
               f"audio {audio:4.0f} ms"
        n_paths = len(rec.profile["paths"])
        share = trial_evidence(rec, n_paths).metrics.get(f"path{SLOW_PATH}_first_segment_share")
        figures = {"first_video_ms": took["video"], "first_audio_ms": audio,
                   "first_byte_ms": first["video"]["t_first_byte"] - first["video"]["t_request"]}
        if share is not None:  # two paths: what the slow path's part needs at its rate
            slow_bps = float(rec.profile["paths"][SLOW_PATH]["rate"])
            predicted.append(1000 * share * first["video"]["bytes"] * 8 / slow_bps)
            observed.append(took["video"])
            line += f"  slow share {share:.2f}  predicted {predicted[-1]:4.0f} ms"
            figures |= {"slow_share": share, "predicted_ms": predicted[-1],
                        "over_prediction_ms": took["video"] - predicted[-1]}
        print(line)
        _add(rows, rec, **figures)
    derived: Derived = {}
    if len(observed) > 2:
        correlation = statistics.correlation(predicted, observed)
        print(f"correlation {correlation:.2f} over {len(observed)} trials")
        over = statistics.mean(o - p for p, o in zip(predicted, observed, strict=True))
        derived["all"] = {"correlation": correlation, "trials": len(observed),
                          "over_prediction_ms": over}
    return rows, derived


def late_segments(run_dirs: list[Path], conditions: str, from_index: int) -> None:
    by_condition: dict[str, list[tuple[float, float, float]]] = {}
    for rec in _trials(run_dirs, conditions):
        ev = trial_evidence(rec, 2)
        for row in ev.segments:
            if row["segment_index"] < from_index or row["request_page_s"] is None:
                continue
            a, b = row["request_page_s"], row["last_byte_s"]
            total = sum(row[f"bytes_path{p}"] or 0 for p in (0, 1))
            rtts = [r["rtt_ms"] for r in ev.server
                    if r["path"] == SLOW_PATH and a < r["t_s"] <= b and r["rtt_ms"]]
            by_condition.setdefault(rec.condition, []).append(
                (b - a, (row[f"bytes_path{SLOW_PATH}"] or 0) / total if total else 0.0,
                 max(rtts, default=float("nan"))))
    for condition, rows in by_condition.items():
        cols = list(zip(*rows, strict=True))
        print(f"{condition:24} n={len(rows):3}  time {min(cols[0]):.2f}-{max(cols[0]):.2f} s "
              f"(median {statistics.median(cols[0]):.2f})  slow share median "
              f"{statistics.median(cols[1]):.2f} (max {max(cols[1]):.2f})  slow RTT peak "
              f"median {statistics.median(cols[2]):.0f} ms")


def bootstrap_ratio(xs: list[float], ys: list[float], resamples: int = 10_000,
                    seed: int = 1) -> tuple[float, float, float]:
    """mean(xs) / mean(ys), and the 2.5th and 97.5th percentiles of that ratio over resamples
    of each sample with replacement."""
    rng = random.Random(seed)
    boot = sorted(statistics.mean(rng.choices(xs, k=len(xs)))
                  / statistics.mean(rng.choices(ys, k=len(ys))) for _ in range(resamples))
    return (statistics.mean(xs) / statistics.mean(ys), boot[int(0.025 * resamples)],
            boot[int(0.975 * resamples)])


def ratio(run_dir: Path, a: str, b: str) -> tuple[Rows, Derived]:
    rows: Rows = {a: [], b: []}
    for rec in load_trials(run_dir):
        if rec.ok and rec.condition in rows:
            _add(rows, rec, startup_delay_ms=trial_metrics(rec, 2)["startup_delay_ms"])
    xs, ys = ([r["startup_delay_ms"] for r in rows[c]] for c in (a, b))
    if len(xs) < 2 or len(ys) < 2:
        raise SystemExit(f"ratio: need two or more ok trials of each; {a} has {len(xs)}, "
                         f"{b} has {len(ys)} in {run_dir}")
    value, low, high = bootstrap_ratio(xs, ys)
    print(f"{a} {statistics.mean(xs):.0f} ms (n={len(xs)}) / {b} {statistics.mean(ys):.0f} ms "
          f"(n={len(ys)}) = {value:.3f}; bootstrap 95% [{low:.2f}, {high:.2f}]")
    return rows, {a: {"startup_ratio": value, "ratio_lo": low, "ratio_hi": high}}


def peak_notsent(run_dirs: list[Path], conditions: str) -> tuple[Rows, Derived]:
    rows: Rows = {}
    for rec in _trials(run_dirs, conditions):
        peak = max((r["notsent"] or 0 for r in trial_evidence(rec, 2).server), default=0)
        _add(rows, rec, peak_notsent_kb=peak // 1024)
    for condition, trials in rows.items():
        peaks = [t["peak_notsent_kb"] for t in trials]
        print(f"{condition:24} n={len(peaks):3}  peak subflow notsent per trial "
              f"{min(peaks)}-{max(peaks)} KB: {', '.join(str(p) for p in peaks)}")
    return rows, {}


def path_return(run_dirs: list[Path], conditions: str) -> tuple[Rows, Derived]:
    rows: Rows = {}
    for rec in _trials(run_dirs, conditions):
        events = {e["action"]: e for e in rec.profile.get("events", []) if e.get("action")
                  in ("down", "up")}
        returns = path_returns(rec)
        if not returns:
            continue
        path, up = returns[0]
        down = up - events["up"]["at_s"] + events["down"]["at_s"]
        incs = socket_increments(rec.path_samples("client"), "bytes_received")
        after = return_s(incs, path, up)  # the report's path<i>_return_s
        back = None if math.isnan(after) else up + after
        line = f"{rec.key:28} path {path} carries data again {_after(back, up)}"
        figures = {"return_s": after}
        proxy = read_json_lines(rec.dir / "quic-proxy.jsonl")
        if proxy:
            local = rec.record.paths[path].client_addr
            abandoned = min((x["t"] - rec.t0_unix for x in proxy
                             if x.get("event") == "abandoned" and x["t"] - rec.t0_unix > down),
                            default=None)
            opened = min((x["t"] - rec.t0_unix for x in proxy if x.get("event") == "opened"
                          and x.get("local") == local and x["t"] - rec.t0_unix > up),
                         default=None)
            line += (f"; abandoned {_after(abandoned, down)} the failure, opened again "
                     f"{_after(opened, up)}")
            figures |= {"abandoned_after_s": math.nan if abandoned is None else abandoned - down,
                        "reopened_after_s": math.nan if opened is None else opened - up}
        print(line)
        _add(rows, rec, **figures)
    return rows, {}


def link_losses(run_dirs: list[Path], conditions: str, path: int) -> tuple[Rows, Derived]:
    rows: Rows = {}
    for rec in _trials(run_dirs, conditions):
        sender = [r for r in rec.sender_samples if r["path"] == path]
        counted = sum(inc for _, _, inc in socket_increments(sender, "retrans_total"))
        link = data_link(rec, path)
        if link is None:
            print(f"{rec.key:28} no link counts (a trial from before link-stats.json)")
            continue
        dropped = link_drops(link)
        windows = sorted(r["cwnd"] for r in sender if r["state"] == "ESTAB" and r["cwnd"])
        spread = _deciles(windows, "{}") if windows else "-"
        print(f"{rec.key:28} sender counted {counted} lost, the link dropped {dropped} of "
              f"{link['packets_in']} ({dropped / max(link['packets_in'], 1):.2%}); window "
              f"p10/p50/p90 {spread}, at most "
              f"{windows[-1] if windows else '-'} packets")
        _add(rows, rec, counted_lost=counted, dropped=dropped, packets_in=link["packets_in"],
             drop_share=dropped / max(link["packets_in"], 1), **_spread("cwnd_p", windows),
             cwnd_max=windows[-1] if windows else math.nan)
    return rows, {}


def sender_windows(run_dirs: list[Path], conditions: str, path: int) -> tuple[Rows, Derived]:
    rows: Rows = {}
    for rec in _trials(run_dirs, conditions):
        polls = [r for r, _ in sending_polls(rec.sender_samples, path)
                 if r["cwnd"] and r["rtt_ms"] is not None]
        if not polls:
            print(f"{rec.key:28} no poll found a sender on path {path} sending")
            continue
        windows = sorted(r["cwnd"] for r in polls)
        rtts = sorted(r["rtt_ms"] for r in polls)
        print(f"{rec.key:28} {iperf_metrics(rec)['throughput_mbps']:6.1f} Mbit/s; while sending "
              f"({len(polls)} polls): window p10/p50/p90 {_deciles(windows, '{}')} packets, "
              f"smoothed RTT {_deciles(rtts, '{:.1f}')} ms, least {rtts[0]:.1f} ms")
        _add(rows, rec, throughput_mbps=iperf_metrics(rec)["throughput_mbps"],
             **_spread("cwnd_p", windows),
             **{f"srtt_{k[5:]}_ms": v for k, v in _spread("srtt_p", rtts).items()},
             srtt_min_ms=rtts[0])
    return rows, {}


# A poll that carried fewer bytes than this (about ten packets) is a pause: keep-alive pings and
# acknowledgements, not a download.
SENDING_BYTES = 15_000
PAUSE_S = 1.0  # what counts as a pause before a download
FIRST_S = 1.0  # the part of a download after a pause whose losses and window are read


def _per_poll(increments: list[tuple[float, int | None, int]]) -> dict[float, int]:
    """The increments of every socket summed per poll (the sampler polls them all at once)."""
    out: dict[float, int] = {}
    for t, _, inc in increments:
        out[round(t, 2)] = out.get(round(t, 2), 0) + inc
    return out


def restart_losses(run_dirs: list[Path], conditions: str, path: int) -> tuple[Rows, Derived]:
    rows: Rows = {}
    for rec in _trials(run_dirs, conditions):
        sender = [r for r in rec.sender_samples if r["path"] == path]
        sent = _per_poll(socket_increments(sender, "bytes_sent"))
        lost = _per_poll(socket_increments(sender, "retrans_total"))
        window: dict[float, int] = {}
        for r in sender:
            if r["state"] == "ESTAB" and r["cwnd"]:
                t = round(r["t_s"], 2)
                window[t] = max(window.get(t, 0), int(r["cwnd"]))
        busy = sorted(t for t, b in sent.items() if b >= SENDING_BYTES)
        starts = [t for prev, t in itertools.pairwise(busy) if t - prev > PAUSE_S]
        polls = sorted(window)
        in_first, before, peak = 0, [], []
        for t0 in starts:
            in_first += sum(n for t, n in lost.items() if t0 <= t < t0 + FIRST_S)
            kept = [window[t] for t in polls if t < t0]
            if kept:
                before.append(kept[-1])
            peak.append(max((window[t] for t in polls if t0 <= t < t0 + FIRST_S), default=0))
        total = sum(lost.values())
        share = in_first / total if total else math.nan
        med_before = statistics.median(before) if before else math.nan
        med_peak = statistics.median(peak) if peak else math.nan
        print(f"{rec.key:28} {len(starts)} downloads after a pause: {in_first} of {total} losses "
              f"({share:.0%}) in their first second; window before {med_before} packets, "
              f"largest in that second {med_peak} (medians)")
        _add(rows, rec, restarts=len(starts), restart_loss_share=share,
             cwnd_before_restart=med_before, cwnd_restart_peak=med_peak)
    return rows, {}


def rung_rates(run_dirs: list[Path]) -> tuple[Rows, Derived]:
    rows: Rows = {}
    for run_dir in run_dirs:
        records = [r for r in load_trials(run_dir) if r.ok]
        several = varying_factors(records)
        for rec in records:
            by_rung: dict[int, list] = {}
            for seg in video_segments(rec.events):
                if seg.rate_bps is not None:
                    by_rung.setdefault(round(seg.bitrate_bps / 1000), []).append(seg)
            figures = {}
            for kbps, segs in sorted(by_rung.items()):
                figures[f"rate_mbps_{kbps}k"] = statistics.median(s.rate_bps for s in segs) / 1e6
                figures[f"kbytes_{kbps}k"] = statistics.median(s.bytes for s in segs) / 1000
                figures[f"segments_{kbps}k"] = len(segs)
            group = group_of(rec, several)
            rows.setdefault(group, []).append({"key": rec.key, **figures})
            print(f"{group:34} {rec.key:40} " + "  ".join(
                f"{k}k: {statistics.median(s.rate_bps for s in v) / 1e6:.2f} Mbit/s "
                f"({len(v)} of {statistics.median(s.bytes for s in v) / 1000:.0f} kB)"
                for k, v in sorted(by_rung.items())))
    return rows, {}


def _deciles(xs: list, fmt: str) -> str:
    return "/".join(fmt.format(x) for x in _spread("", xs).values())


def _spread(prefix: str, xs: list) -> dict[str, float]:
    """The 10th, 50th and 90th percentile of sorted `xs` (the element at that rank), named
    prefix10, prefix50, prefix90; NaN when there is none."""
    return {f"{prefix}{int(q * 100)}": xs[int(len(xs) * q)] if xs else math.nan
            for q in (0.1, 0.5, 0.9)}


def _after(t: float | None, since: float) -> str:
    return "never" if t is None else f"{t - since:.2f} s after"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    for name in ("first-segment", "late-segments"):
        p = sub.add_parser(name)
        p.add_argument("runs", nargs="+", type=Path)
        p.add_argument("--conditions", default=UNBALANCED, help="comma-separated labels")
        if name == "late-segments":
            p.add_argument("--from-index", type=int, default=5)
    p = sub.add_parser("peak-notsent")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--conditions", default="unbalanced,unbalanced-lowat16k",
                   help="comma-separated labels")
    p = sub.add_parser("path-return")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--conditions", default="mptcp,mpquic", help="comma-separated labels")
    p = sub.add_parser("link-losses")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--conditions", default="single-tcp,single-quic", help="comma-separated labels")
    p.add_argument("--path", type=int, default=0)
    p = sub.add_parser("sender-windows")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--conditions", required=True, help="comma-separated labels")
    p.add_argument("--path", type=int, default=0)
    p = sub.add_parser("restart-losses")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--conditions", default="single-tcp,single-quic", help="comma-separated labels")
    p.add_argument("--path", type=int, default=0)
    p = sub.add_parser("rung-rates")
    p.add_argument("runs", nargs="+", type=Path)
    p = sub.add_parser("ratio")
    p.add_argument("run", type=Path)
    p.add_argument("a")
    p.add_argument("b")
    for p in sub.choices.values():
        p.add_argument("--summary", type=Path, help="also write the figures as a summary")
    args = parser.parse_args()
    if args.what == "late-segments":
        if args.summary:
            raise SystemExit("late-segments writes no summary: its figures are per download")
        late_segments(args.runs, args.conditions, args.from_index)
        return
    if args.what == "ratio":
        runs = [args.run]
        rows, derived = ratio(args.run, args.a, args.b)
    else:
        runs = args.runs
        rows, derived = {
            "first-segment": lambda: first_segment(runs, args.conditions),
            "peak-notsent": lambda: peak_notsent(runs, args.conditions),
            "path-return": lambda: path_return(runs, args.conditions),
            "link-losses": lambda: link_losses(runs, args.conditions, args.path),
            "sender-windows": lambda: sender_windows(runs, args.conditions, args.path),
            "restart-losses": lambda: restart_losses(runs, args.conditions, args.path),
            "rung-rates": lambda: rung_rates(runs),
        }[args.what]()
    if args.summary:
        if len(runs) != 1:
            raise SystemExit("--summary takes the figures of one run folder: give one")
        try:
            names = {k for trials in rows.values() for t in trials for k in t}
            units = UNITS | {k: "Mbit/s" for k in names if k.startswith("rate_mbps_")} \
                | {k: "kB" for k in names if k.startswith("kbytes_")}
            out = write_analysis(runs[0], sys.argv, rows, units, derived, args.summary)
        except UserError as e:
            raise SystemExit(str(e)) from e
        print(f"summary: {out}")


if __name__ == "__main__":
    main()
