"""The report's PNG figures, drawn from the analysis (analysis.py) with plots.py:
segment download rates, retransmissions and bytes per path over time, the headline metrics'
bars, a sweep's lines; beside the page, a timeline per video trial and the queueing delay of
each trace-driven trial."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from mpstream.runner.layout import QUEUE_DELAY_DIR, TrialData
from mpstream.runner.metrics.evidence import TrialEvidence
from mpstream.runner.metrics.metric import metric_heading, metric_label
from mpstream.runner.report.analysis import Analysis, PathSeries, sweep_tick
from mpstream.runner.workloads import workload_for

# The metrics of the per-pair figure of a run over trace pairs.
PER_PAIR_METRICS = ("rebuffer_ratio", "mean_bitrate_mbps", "metered_bytes")
# The metrics of the bar figure, those of them the run has.
BAR_METRICS = ("startup_delay_ms", "stall_ms", "mean_bitrate_mbps", "download_rate_mbps",
               "throughput_mbps", "retrans_per_s")


def traced_links(rec: TrialData) -> dict[str, list[dict]]:
    """The data-direction queueing-delay windows of each path whose link follows a trace, by
    path label (empty: no trace-driven path, or no windows kept)."""
    data_dir = "b_to_a" if rec.record.sender == "server" else "a_to_b"
    out = {}
    for p, spec in enumerate(rec.profile.get("paths") or []):
        down = spec.get("downlink") or {}
        if not (spec.get("trace") or down.get("trace")):
            continue
        log = rec.dir / QUEUE_DELAY_DIR / f"path{p}.jsonl"
        if not log.is_file():
            continue
        windows = [w for w in (json.loads(line) for line in log.read_text().splitlines()
                               if line.strip()) if w.get("dir") == data_dir]
        if windows:
            out[spec.get("name") or f"path{p}"] = windows
    return out


def write_figures(a: Analysis, out: Path) -> list[Path]:
    # matplotlib loads here, not with the report's figures and labels (the run pages read those).
    from mpstream.runner.report import plots

    ok = [r for r in a.trials if r.ok]
    seg: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    recv_series: dict[str, list[PathSeries]] = defaultdict(list)
    retr_series: dict[str, list[PathSeries]] = defaultdict(list)
    for rec in ok:
        g, series = str(a.group_of_trial[rec.key]), a.series[rec.key]
        for idx, rate in series.segment_rates:
            seg[g][idx].append(rate / 1e6)
        recv_series[g].append(series.received)
        retr_series[g].append(series.retransmitted)
    made = []
    groups = [str(g) for g in a.groups]
    if any(seg.values()):
        made.append(plots.segment_rates(out / "segment-download-rate.png", groups, seg))
    if a.n_paths and any(retr_series.values()):
        made.append(plots.per_path_over_time(
            out / "retransmissions-per-path.png", groups, retr_series, a.n_paths,
            ylabel="retransmissions per second", title="Retransmissions per second per path"))
    if a.n_paths and any(recv_series.values()):
        made.append(plots.path_share(out / "path-share.png", groups, recv_series, a.n_paths))
    # One timeline a video trial, beside the report (not in the page: a run may have hundreds).
    for rec in ok:
        if workload_for(rec.record.kind).plays_video:
            (out / "timelines").mkdir(exist_ok=True)
            timeline_figure(rec, a.evidence[rec.key], a.n_paths,
                            out / "timelines" / f"{rec.key}.png")
    # Trace-driven paths: capacity, throughput and per-packet queueing delay (the Alfalfa
    # figure), one per trial, beside the report.
    for rec in ok:
        links = traced_links(rec)
        if links:
            (out / "queue-delay").mkdir(exist_ok=True)
            plots.capacity_and_delay(out / "queue-delay" / f"{rec.key}.png", rec.key, links)
    bars = [m for m in BAR_METRICS if m in a.metric_order]
    if bars:
        summaries = {str(g): by_metric for g, by_metric in a.summaries.items()}
        made.append(plots.metric_bars(out / "metrics.png", groups, summaries, bars,
                                      metric_label))
    timed = [r for r in a.trials if r.record.phases]
    if timed:
        made.append(plots.trial_phases(out / "trial-phases.png", [r.key for r in timed],
                                       [r.record.phases for r in timed]))
    shown = [m for m in PER_PAIR_METRICS if any(by.get(m) for by in (a.pairs or {}).values())]
    if shown:
        made.append(plots.per_pair(out / "per-pair.png", groups, a.pairs or {},
                                   [(m, metric_heading(m)) for m in shown]))
    if a.sweep is not None:
        sw = a.sweep
        made.append(plots.sweep_lines(out / "sweep.png", sw.setting, sw.points, sw.titles,
                                      sweep_tick))
    return made


def timeline_figure(rec: TrialData, evidence: TrialEvidence, n_paths: int,
                    out: Path) -> Path | None:
    """Bytes in flight (bytes_sent - bytes_acked), cwnd and bytes held unsent (notsent) of every
    sender socket on a path, by path, over the trial, with what the client held unread, the
    polls that found the sender holding data back (shaded), each segment's request (dashed)
    and last byte (solid), and a live session's latency to live."""
    from mpstream.runner.report import plots  # matplotlib: see write_figures

    if not evidence.server:
        return None
    series: dict[int, dict[str, list]] = defaultdict(lambda: {"t": [], "inflight": [],
                                                              "cwnd": [], "notsent": []})
    for r in evidence.server:
        s = series[r["path"]]
        s["t"].append(r["t_s"])
        s["inflight"].append(max(0, r["bytes_sent"] - r["bytes_acked"]) / 1000.0)
        s["cwnd"].append(r["cwnd"])
        s["notsent"].append(r["notsent"] / 1000.0)
    unread = {t: evidence.unread[t] / 1000.0 for t in sorted(evidence.unread)}
    # The path policy's toggles of a metered path, on the trial clock, with the buffer level.
    t0 = rec.t0_unix
    toggles = [(t.t_unix - t0, f"path {t.path} {'joins' if t.action == 'nobackup' else 'leaves'}"
                + (f" ({t.buffer_s:g} s buffered)" if t.buffer_s is not None else ""))
               for t in rec.record.path_policy_toggles] if t0 is not None else []
    return plots.subflow_timeline(out, f"{rec.key}: sender subflows and segments",
                                  dict(series), evidence.segments, n_paths, unread=unread,
                                  held=evidence.held, toggles=toggles,
                                  live_latency=evidence.live_latency)
