"""`mpstream report RUN_DIR`: tables, CSV files, PNG figures and one self-contained HTML page,
all computed from the trial folders' raw data (see layout.py)."""

from __future__ import annotations

import base64
import csv
import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from mpstream.errors import UserError
from mpstream.qoe.stats import Summary, summarize
from mpstream.runner.evidence import TrialEvidence, timeline_figure, trial_evidence
from mpstream.runner.layout import QUEUE_DELAY_DIR, RUN_JSON, TrialData, load_trials, read_json
from mpstream.runner.metrics import (
    binned_by_path,
    n_paths_of,
    segment_rates,
    trial_metrics,
)
from mpstream.runner.record import Measurement
from mpstream.runner.reference import THESIS, condition_text, published
from mpstream.runner.scenario import short_value
from mpstream.runner.workloads import workload_for

# Shown in this order, with these names and units; per-path metrics are added per path.
METRIC_LABELS = {
    "startup_delay_ms": ("startup delay", "ms"),
    "stall_count": ("stalls", "count"),
    "stall_ms": ("stall time", "ms"),
    "longest_stall_ms": ("longest stall", "ms"),
    "rebuffer_ratio": ("rebuffer ratio", ""),
    "mean_bitrate_mbps": ("time-weighted bitrate", "Mbit/s"),
    "switches": ("quality switches", "count"),
    "down_switches": ("switches down", "count"),
    "bitrate_utilization": ("time-weighted bitrate / top rung", ""),
    "segments": ("video segments", "count"),
    "played_s": ("played time", "s"),
    "live_latency_mean_s": ("latency to live, mean", "s"),
    "live_latency_p95_s": ("latency to live, p95", "s"),
    "decoded_frames": ("decoded frames", "count"),
    "dropped_frames": ("dropped frames", "count"),
    "download_rate_mbps": ("per-segment download rate", "Mbit/s"),
    "download_share": ("download rate / sum of path rates", ""),
    "manifest_ms": ("startup: manifest", "ms"),
    "first_segment_ms": ("startup: first segment", "ms"),
    "decode_ms": ("startup: decode", "ms"),
    "first_segment_held_ms": ("first segment: sender held data, nothing in flight", "ms"),
    "held_share": ("segment time the sender held data, nothing in flight", ""),
    "stalls_after_event": ("stalls after the network event", "count"),
    "stall_ms_after_event": ("stall time after the network event", "ms"),
    "longest_stall_after_event_ms": ("longest stall after the network event", "ms"),
    "qoe_yin": ("QoE Yin (QoE_lin)", "kbit/s"),
    "qoe_clae": ("QoE Clae", ""),
    "qoe_duanmu": ("QoE Duanmu", ""),
    "qoe_yu": ("QoE Yu", "Mbit/s"),
    "p1203_o46": ("ITU-T P.1203 O46", "MOS"),
    "throughput_mbps": ("iperf3 throughput", "Mbit/s"),
    "throughput_share": ("throughput / sum of path rates", ""),
    "iperf_retransmits": ("iperf3 retransmits", "count"),
    "mptcp_share": ("MPTCP users' share of what all users received", ""),
    "jain_index": ("Jain's fairness index over what each user received", ""),
    "mptcp_user_mbps": ("throughput per MPTCP user", "Mbit/s"),
    "tcp_user_mbps": ("throughput per TCP user", "Mbit/s"),
    "mptcp_user_bitrate_mbps": ("time-weighted bitrate per MPTCP user", "Mbit/s"),
    "tcp_user_bitrate_mbps": ("time-weighted bitrate per TCP user", "Mbit/s"),
    "mptcp_user_stall_ms": ("stall time per MPTCP user", "ms"),
    "cross_traffic_mbps": ("cross traffic while it ran", "Mbit/s"),
    "tcp_user_stall_ms": ("stall time per TCP user", "ms"),
    "retrans_per_s": ("retransmissions", "packets/s"),
    "metered_bytes": ("bytes on metered paths", "bytes"),
    "metered_share": ("metered paths' share of the bytes", ""),
    "redundant_mbytes": ("bytes sent twice on purpose", "MB"),
    "redundant_share": ("bytes sent twice, share of the media bytes", ""),
    "metered_cost": ("cost of the metered bytes", "per cost_per_gb"),
    "policy_toggles": ("path policy toggles", "count"),
}
# The figures the per-host table gives (the medians of those the run has), so that a slow or
# odd host shows itself rather than hiding inside a condition's spread.
HEADLINE_METRICS = ("startup_delay_ms", "stall_ms", "mean_bitrate_mbps", "throughput_mbps")
PATH_METRICS = {
    "bytes_share": ("share of bytes", ""),
    "mbytes": ("bytes received", "MB"),
    "retrans_per_s": ("retransmissions", "packets/s"),
    "rtt_ms": ("sender's smoothed RTT", "ms"),
    "link_drop_share": ("share of packets the link dropped, data direction", ""),
    "first_segment_share": ("share of the first segment's bytes", ""),
    "tail_share": ("share of the segments' last 10% of bytes", ""),
    "return_s": ("time a returning path took to carry data again", "s"),
    "queue_delay_p50_ms": ("queueing delay in the emulator, data direction, p50", "ms"),
    "queue_delay_p95_ms": ("queueing delay in the emulator, data direction, p95", "ms"),
    "queue_delay_p99_ms": ("queueing delay in the emulator, data direction, p99", "ms"),
}


@dataclass
class Sweep:
    """A run whose conditions sweep one numeric setting: the sweep's metrics by line (the other
    settings' values) and swept value, for its figure, CSV file and terminal tables."""
    setting: str
    titles: list[tuple[str, str]]  # (metric, its name and unit), in panel order
    points: dict[str, dict[str, dict[float, Summary]]]  # metric -> line -> value -> Summary

    def values(self) -> list[float]:
        return sorted({x for by_line in self.points.values() for by_x in by_line.values()
                       for x in by_x})


def sweep_tick(x: float) -> str:
    """A swept value as the conditions' labels write it (550000 -> 550k)."""
    return short_value(int(x) if x.is_integer() else x)


@dataclass
class Report:
    run_dir: Path
    out_dir: Path
    html: Path
    groups: list[str]
    per_trial: dict[str, list[dict]]  # group -> [{"key":..., metric: value}]
    summaries: dict[str, dict[str, Summary]]  # group -> metric -> Summary
    reference_rows: list[dict]
    failed: list[dict]
    metric_order: list[str] = field(default_factory=list)
    pngs: list[Path] = field(default_factory=list)
    # Real-network trials: what `paths check` measured before and after each (one row each)
    path_checks: list[dict] = field(default_factory=list)
    evidence: dict[str, TrialEvidence] = field(default_factory=dict)  # ok trial key -> evidence
    trials: list[TrialData] = field(default_factory=list)  # the run's trials, read once
    # Per host and condition: trials, ok, failed and the medians of the headline metrics
    host_rows: list[dict] = field(default_factory=list)
    sweep: Sweep | None = None  # when the conditions sweep a numeric setting

    @property
    def headline(self) -> list[str]:
        return [m for m in HEADLINE_METRICS if m in self.metric_order]

    @property
    def hosts(self) -> list[str]:
        return sorted({r["host"] for r in self.host_rows})


# Factors a scenario crosses with its conditions, and their value in trials that predate them.
FACTORS = {"player": None, "browser": "chromium", "codec": "auto", "abr": "default"}


def varying_factors(records: list[TrialData]) -> frozenset[str]:
    """The factors that take more than one value in the run: they name its groups."""
    return frozenset(f for f, default in FACTORS.items()
                     if len({getattr(r.record, f) or default for r in records}) > 1)


def group_of(rec: TrialData, several: frozenset[str] | frozenset[str]) -> str:
    """condition[/player][/browser][/codec][/abr]: the factors that vary in the run (`several`; True
    stands for the player alone)."""
    if isinstance(several, bool):
        several = frozenset({"player"}) if several else frozenset()
    parts = [rec.condition]
    for factor, default in FACTORS.items():
        value = getattr(rec.record, factor) or default
        if factor in several and value:
            parts.append(str(value))
    return "/".join(parts)


def metric_label(metric: str) -> tuple[str, str]:
    if metric in METRIC_LABELS:
        return METRIC_LABELS[metric]
    if metric.startswith("path") and "_" in metric:
        head, rest = metric.split("_", 1)
        name, unit = PATH_METRICS.get(rest, (rest, ""))
        return f"{name}, path {head[4:]}", unit
    return metric, ""


def build_report(run_dir: Path, out_dir: Path | None = None) -> Report:
    run_dir = Path(run_dir)
    run = read_json(run_dir / RUN_JSON)
    if run is None:
        raise UserError(f"{run_dir} is not a run folder (no {RUN_JSON}); give the --out folder "
                        "of `mpstream run`")
    records = load_trials(run_dir)
    if not records:
        raise UserError(f"{run_dir}: no finished trials yet; run `mpstream run` first")
    out_dir = Path(out_dir) if out_dir else run_dir / "report"
    out_dir.mkdir(parents=True, exist_ok=True)

    several = varying_factors(records)
    n_paths = n_paths_of(records)
    planned = [c["label"] for c in run.get("conditions", [])]
    groups: list[str] = []
    per_trial: dict[str, list[dict]] = defaultdict(list)
    failed = []
    evidence: dict[str, TrialEvidence] = {}  # per ok trial, read once for tables, CSV, figure
    for rec in records:
        g = group_of(rec, several)
        if g not in groups:
            groups.append(g)
        if not rec.ok:
            failed.append({"key": rec.key, "group": g, "reason": rec.record.reason})
            continue
        evidence[rec.key] = trial_evidence(rec, n_paths)
        per_trial[g].append({"key": rec.key, **trial_metrics(rec, n_paths),
                             **evidence[rec.key].metrics})
    groups.sort(key=lambda g: (planned.index(g.split("/")[0]) if g.split("/")[0] in planned
                               else len(planned), g))

    metric_order = _metric_order(per_trial)
    summaries = {
        g: {m: summarize([t.get(m, math.nan) for t in per_trial.get(g, [])]) for m in metric_order}
        for g in groups
    }
    ref_by_group = _reference_keys(run, records, several)
    reference_rows = _reference_rows(groups, summaries, ref_by_group)

    report = Report(run_dir, out_dir, out_dir / "report.html", groups, dict(per_trial),
                    summaries, reference_rows, failed, metric_order,
                    path_checks=path_check_rows(records), evidence=evidence, trials=records)
    report.host_rows = host_rows(report, several)
    report.sweep = sweep_of(report, run.get("conditions", []))
    _write_csvs(report, records, several, n_paths)
    report.pngs = _write_figures(report, records, several, n_paths)
    _write_html(report, run)
    return report


def write_p1203_inputs(report: Report) -> list[Path]:
    """Each successful video trial's P.1203 mode-0 input as REPORT/p1203/<trial>.json."""
    from mpstream.qoe.scores import p1203_input

    out = report.out_dir / "p1203"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for rec in report.trials:
        if not rec.ok or not workload_for(rec.record.kind).plays_video:
            continue
        fps = rec.record.media.frame_rate if rec.record.media else None
        path = out / f"{rec.key}.json"
        path.write_text(json.dumps(p1203_input(rec.events, fps=fps), indent=2) + "\n")
        written.append(path)
    return written


def host_rows(report: Report, several: frozenset[str]) -> list[dict]:
    """One row per host and condition, in the conditions' order."""
    metrics = {t["key"]: t for rows in report.per_trial.values() for t in rows}
    cells: dict[tuple[str, str], list[TrialData]] = defaultdict(list)
    for rec in report.trials:
        cells[(rec.record.host or "unknown", group_of(rec, several))].append(rec)
    rows = []
    for (host, group), recs in sorted(cells.items(), key=lambda kv: (
            kv[0][0], report.groups.index(kv[0][1]) if kv[0][1] in report.groups else 0)):
        ok = [metrics.get(r.key, {}) for r in recs if r.ok]
        row: dict = {"host": host, "condition": group, "trials": len(recs), "ok": len(ok),
                     "failed": len(recs) - len(ok)}
        for m in report.headline:
            values = [float(v) for t in ok
                      if isinstance(v := t.get(m), int | float) and not math.isnan(v)]
            row[m] = statistics.median(values) if values else math.nan
        rows.append(row)
    return rows


def path_check_rows(records: list[TrialData]) -> list[dict]:
    """One row per real trial, moment (before, after) and interface, then the aggregate."""
    rows = []
    for rec in records:
        for when, check in (rec.record.path_checks or {}).items():
            entries = [(i.interface or "", i) for i in check.interfaces]
            agg = check.aggregate or Measurement()
            entries.append((f"{agg.transport or ''} aggregate", agg))
            for what, e in entries:
                rate = e.throughput_bps
                rows.append({"key": rec.key, "when": when, "what": what, "rtt_ms": e.rtt_ms,
                             "mbps": None if rate is None else rate / 1e6,
                             "error": e.error or ""})
    return rows


def _metric_order(per_trial: dict[str, list[dict]]) -> list[str]:
    present = {k for rows in per_trial.values() for row in rows for k in row if k != "key"}
    order = [m for m in METRIC_LABELS if m in present]
    order += sorted(m for m in present if m not in METRIC_LABELS)
    # Drop metrics that no trial could give (all NaN).
    return [m for m in order if any(
        not _isnan(row.get(m)) for rows in per_trial.values() for row in rows)]


def _isnan(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _reference_keys(run: dict, records: list[TrialData],
                    several: frozenset[str]) -> dict[str, str]:
    out = {}
    for rec in records:
        ref = rec.record.condition.reference
        if ref:
            out[group_of(rec, several)] = ref
    return out


def _reference_rows(groups, summaries, ref_by_group) -> list[dict]:
    rows = []
    for g in groups:
        key = ref_by_group.get(g)
        for pub in published(key):
            s = summaries[g].get(pub.metric, summarize([]))
            rows.append({
                "condition": g,
                "published_condition": condition_text(key),
                "metric": pub.metric,
                "label": metric_label(pub.metric)[0],
                "unit": pub.unit,
                "published": pub.value,
                "published_how": pub.how,
                "ours_n": s.n,
                "ours_mean": s.mean,
                "ours_sd": s.sd,
                "ours_ci_low": s.ci_low,
                "ours_ci_high": s.ci_high,
            })
    return rows


# --- CSV ---------------------------------------------------------------------------------


def _write_csvs(report: Report, records: list[TrialData], several: frozenset[str],
                n_paths: int) -> None:
    out = report.out_dir
    with (out / "trials.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["condition", "trial", "status", "reason", "transport", "scheduler",
                    "path_policy", *report.metric_order])
        for rec in records:
            g = group_of(rec, several)
            row = next((t for t in report.per_trial.get(g, []) if t["key"] == rec.key), {})
            note = rec.record.reason or rec.record.player_failure or ""
            w.writerow([g, rec.key, rec.record.status, note, rec.record.transport or "",
                        rec.record.scheduler or "", rec.record.path_policy or "",
                        *[_fmt(row.get(m)) for m in report.metric_order]])
    with (out / "conditions.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["condition", "metric", "unit", "n", "mean", "sd", "ci95_low", "ci95_high"])
        for g in report.groups:
            for m in report.metric_order:
                s = report.summaries[g][m]
                w.writerow([g, m, metric_label(m)[1], s.n, _fmt(s.mean), _fmt(s.sd),
                            _fmt(s.ci_low), _fmt(s.ci_high)])
    with (out / "hosts.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["host", "condition", "trials", "ok", "failed",
                    *[f"median_{m}" for m in report.headline]])
        for r in report.host_rows:
            w.writerow([r["host"], r["condition"], r["trials"], r["ok"], r["failed"],
                        *[_fmt(r[m]) for m in report.headline]])
    with (out / "reference.csv").open("w", newline="") as fh:
        cols = ["condition", "published_condition", "metric", "unit", "published",
                "published_how", "ours_n", "ours_mean", "ours_sd", "ours_ci_low", "ours_ci_high"]
        dw = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        dw.writeheader()
        for r in report.reference_rows:
            dw.writerow({k: _fmt(v) if isinstance(v, float) else v for k, v in r.items()})
    with (out / "segments.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        evidence_cols = ["url", "bytes", "request_page_s", "request_nginx_s",
                         "nginx_request_time_s", "nginx_connection", "first_byte_s",
                         "last_byte_s", "sender_held_s", "client_unread_max_bytes",
                         *[f"bytes_path{p}" for p in range(n_paths)]]
        w.writerow(["condition", "trial", "segment_index", "download_rate_bps", *evidence_cols])
        for rec in records:
            if rec.ok:
                rows = {r["segment_index"]: r for r in report.evidence[rec.key].segments}
                for idx, rate in segment_rates(rec.events):
                    ev = rows.get(idx, {})
                    w.writerow([group_of(rec, several), rec.key, idx, f"{rate:.0f}",
                                *[_fmt(ev.get(c)) for c in evidence_cols]])
    if report.sweep is not None:
        _write_sweep_csv(report.sweep, out / "sweep.csv")
    with (out / "paths_per_second.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["condition", "trial", "second", "path", "bytes_received", "retransmissions"])
        for rec in records:
            if not rec.ok:
                continue
            recv, retr = _path_series(rec)
            for p in range(n_paths):
                for b in sorted(set(recv.get(p, {})) | set(retr.get(p, {}))):
                    w.writerow([group_of(rec, several), rec.key, b, p,
                                int(recv.get(p, {}).get(b, 0)), int(retr.get(p, {}).get(b, 0))])


def _write_sweep_csv(sweep: Sweep, path: Path) -> None:
    """The numbers behind sweep.png: one row per metric, line and swept value."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["setting", "value", "line", "metric", "unit", "n", "mean", "sd",
                    "ci95_low", "ci95_high"])
        for m, _ in sweep.titles:
            for line, by_x in sweep.points[m].items():
                for x in sorted(by_x):
                    s = by_x[x]
                    w.writerow([sweep.setting, _fmt(x), line, m, metric_label(m)[1], s.n,
                                _fmt(s.mean), _fmt(s.sd), _fmt(s.ci_low), _fmt(s.ci_high)])


def _path_series(rec: TrialData):
    """Per 1-s bin and path: bytes delivered to the receiver, retransmissions by the sender."""
    recv = binned_by_path(rec.path_samples("client"), rec.receiver_column)
    return recv, binned_by_path(rec.sender_samples, "retrans_total")


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.10g}"
    return str(v)


# --- figures -----------------------------------------------------------------------------


# The metrics a sweep figure plots against the swept setting, those of them the run has.
SWEEP_METRICS = ("throughput_mbps", "startup_delay_ms", "stall_ms", "mean_bitrate_mbps")


def numeric_sweep(conditions: list[dict]) -> tuple[str, dict[str, float], dict[str, str]] | None:
    """The numeric setting a run's conditions sweep (e.g. a bottleneck buffer): every condition
    overrides the same settings and this one takes three values or more. Returns (setting,
    condition label -> its value, condition label -> the other varying settings' values, which
    name its line), or None when the run is no such sweep."""
    sets = [c.get("set") or {} for c in conditions]
    if len(sets) < 3 or not sets[0] or any(set(s) != set(sets[0]) for s in sets):
        return None

    def numeric(v) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    for key in sorted(sets[0]):
        values = [s[key] for s in sets]
        if all(numeric(v) for v in values) and len(set(values)) >= 3:
            others = [k for k in sorted(sets[0])
                      if k != key and len({json.dumps(s[k]) for s in sets}) > 1]
            xs = {c["label"]: float(s[key]) for c, s in zip(conditions, sets, strict=True)}
            lines = {c["label"]: "-".join(short_value(s[k]) for k in others) or key
                     for c, s in zip(conditions, sets, strict=True)}
            return key, xs, lines
    return None


def sweep_of(report: Report, conditions: list[dict]) -> Sweep | None:
    """The report's figures of a numeric sweep (numeric_sweep), or None when the run is none."""
    sweep = numeric_sweep(conditions)
    if sweep is None:
        return None
    key, xs, lines = sweep
    metrics = [m for m in SWEEP_METRICS if m in report.metric_order]
    metrics += [m for m in report.metric_order if m.startswith("path") and m.endswith("_rtt_ms")]
    if not metrics:
        return None
    points: dict[str, dict[str, dict[float, Summary]]] = {m: {} for m in metrics}
    for g in report.groups:
        label, _, factors = g.partition("/")
        if label not in xs:
            continue
        line = lines[label] + (f"/{factors}" if factors else "")
        for m in metrics:
            points[m].setdefault(line, {})[xs[label]] = report.summaries[g][m]
    titles = []
    for m in metrics:
        name, unit = metric_label(m)
        titles.append((m, name + (f" ({unit})" if unit else "")))
    return Sweep(key, titles, points)


def _traced_links(rec: TrialData) -> dict[str, list[dict]]:
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


def _write_figures(report: Report, records, several: frozenset[str], n_paths: int) -> list[Path]:
    # matplotlib loads here, not with the report's figures and labels (the run pages read those).
    from mpstream.runner import figures

    ok = [r for r in records if r.ok]
    seg: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    recv_series: dict[str, list[dict]] = defaultdict(list)
    retr_series: dict[str, list[dict]] = defaultdict(list)
    for rec in ok:
        g = group_of(rec, several)
        for idx, rate in segment_rates(rec.events):
            seg[g][idx].append(rate / 1e6)
        recv, retr = _path_series(rec)
        recv_series[g].append(recv)
        retr_series[g].append(retr)
    made = []
    groups = report.groups
    if any(seg.values()):
        made.append(figures.segment_rates(report.out_dir / "segment-download-rate.png",
                                          groups, seg))
    if n_paths and any(retr_series.values()):
        made.append(figures.per_path_over_time(
            report.out_dir / "retransmissions-per-path.png", groups, retr_series, n_paths,
            ylabel="retransmissions per second", title="Retransmissions per second per path"))
    if n_paths and any(recv_series.values()):
        made.append(figures.path_share(report.out_dir / "path-share.png", groups, recv_series,
                                       n_paths))
    # One timeline a video trial, beside the report (not in the page: a run may have hundreds).
    for rec in ok:
        if workload_for(rec.record.kind).plays_video:
            (report.out_dir / "timelines").mkdir(exist_ok=True)
            timeline_figure(rec, report.evidence[rec.key], n_paths,
                            report.out_dir / "timelines" / f"{rec.key}.png")
    # Trace-driven paths: capacity, throughput and per-packet queueing delay (the Alfalfa
    # figure), one per trial, beside the report.
    for rec in ok:
        links = _traced_links(rec)
        if links:
            (report.out_dir / "queue-delay").mkdir(exist_ok=True)
            figures.capacity_and_delay(report.out_dir / "queue-delay" / f"{rec.key}.png",
                                       rec.key, links)
    bars = [m for m in ("startup_delay_ms", "stall_ms", "mean_bitrate_mbps", "download_rate_mbps",
                        "throughput_mbps", "retrans_per_s") if m in report.metric_order]
    if bars:
        made.append(figures.metric_bars(report.out_dir / "metrics.png", groups,
                                        report.summaries, bars, metric_label))
    if report.sweep is not None:
        sw = report.sweep
        made.append(figures.sweep_lines(report.out_dir / "sweep.png", sw.setting, sw.points,
                                        sw.titles, sweep_tick))
    return made


# --- HTML --------------------------------------------------------------------------------

TEMPLATES = Path(__file__).resolve().parent / "templates"



def num(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        if v != 0 and abs(v) < 1:
            return f"{v:.3f}"
        return f"{v:.1f}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def cell(s: Summary) -> str:
    if s.n == 0:
        return "–"
    if s.n == 1:
        return f"{num(s.mean)} (n=1)"
    return f"{num(s.mean)} ± {num(s.sd)} [{num(s.ci_low)}, {num(s.ci_high)}] (n={s.n})"


def _ours(r: dict) -> str:
    return cell(Summary(r["ours_n"], r["ours_mean"], r["ours_sd"], r["ours_ci_low"],
                        r["ours_ci_high"]))


def explanations(report: Report) -> list[str]:
    """One sentence a condition that joins its startup, the first segment, the time the
    sender held data back, the download share and the slowest path's RTT (video runs only)."""
    out = []
    for g in report.groups:
        s = report.summaries.get(g, {})

        def mean(metric: str, s=s) -> float:
            return s[metric].mean if metric in s and s[metric].n else math.nan

        if math.isnan(mean("startup_delay_ms")):
            continue
        parts = [f"{g}: startup {mean('startup_delay_ms'):.0f} ms"]
        if not math.isnan(mean("first_segment_ms")):
            parts.append(f"the first video segment {mean('first_segment_ms'):.0f} ms of it")
        if not math.isnan(mean("first_segment_held_ms")):
            parts.append(f"the sender held data back {mean('first_segment_held_ms'):.0f} ms "
                         "during that segment")
        if not math.isnan(mean("download_share")):
            parts.append(f"segments came at {100 * mean('download_share'):.1f}% of the path "
                         "sum")
        if not math.isnan(mean("held_share")):
            parts.append(f"held {100 * mean('held_share'):.1f}% of segment time")
        rtts = {k: mean(k) for k in s if k.startswith("path") and k.endswith("_rtt_ms")}
        rtts = {k: v for k, v in rtts.items() if not math.isnan(v)}
        if len(rtts) > 1:
            key = max(rtts, key=lambda k: rtts[k])
            slowest = key.removesuffix("_rtt_ms")
            parts.append(f"slowest path's RTT {rtts[key]:.0f} ms ({slowest})")
            if not math.isnan(mean(f"{slowest}_first_segment_share")):
                parts.append(f"{slowest} carried "
                             f"{100 * mean(f'{slowest}_first_segment_share'):.0f}% of the "
                             "bytes of the first segment")
        out.append("; ".join(parts) + ".")
    return out


def implementations(trials: list[TrialData]) -> dict[str, list[str]]:
    """What carried each transport whose name does not say it (the QUIC library and its
    multipath draft), as the trials recorded it."""
    found: dict[str, set[str]] = defaultdict(set)
    for trial in trials:
        rec = trial.record
        if rec.transport and rec.transport_implementation:
            found[rec.transport].add(rec.transport_implementation)
    return {name: sorted(impls) for name, impls in sorted(found.items())}


def _write_html(report: Report, run: dict) -> None:
    env = Environment(loader=FileSystemLoader(TEMPLATES),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    images = [(p.name, base64.b64encode(p.read_bytes()).decode()) for p in report.pngs]
    html = env.get_template("report.html.j2").render(
        name=run.get("scenario", report.run_dir.name),
        description=run.get("description", ""),
        run_dir=str(report.run_dir),
        now=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        n_ok=sum(len(v) for v in report.per_trial.values()),
        failed=report.failed,
        groups=report.groups,
        metrics=report.metric_order,
        summaries=report.summaries,
        per_trial=report.per_trial,
        reference_rows=report.reference_rows,
        path_checks=report.path_checks,
        host_rows=report.host_rows if len(report.hosts) > 1 else [],
        headline=report.headline,
        images=images,
        thesis=THESIS,
        label=metric_label,
        cell=cell,
        num=num,
        ours=_ours,
        explained=explanations(report),
        implementations=implementations(report.trials),
        sweep=report.sweep,
        tick=sweep_tick,
    )
    report.html.write_text(html)
