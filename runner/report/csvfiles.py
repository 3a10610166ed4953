"""The report's CSV files, written from the analysis (analysis.py): trials.csv (a row per
trial), conditions.csv (a row per group and figure), hosts.csv, reference.csv, segments.csv (a
row per video segment with its evidence), sweep.csv, paths_per_second.csv and, for a run over
trace pairs, paired.csv (a row per group and figure over pairs, report/paired.py)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from mpstream.runner.metrics.metric import metric_label
from mpstream.runner.report.analysis import Analysis, Sweep
from mpstream.runner.report.paired import PairedFigure


def fmt(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.10g}"
    return str(v)


def write_csvs(a: Analysis, out: Path) -> None:
    # The trace pair of each trial, in a run over pairs only (other runs' files stay as they were).
    paired = a.paired is not None
    with (out / "trials.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["condition", "trial", *(["pair"] if paired else []), "status", "reason",
                    "transport", "scheduler", "path_policy", "deployment", *a.metric_order])
        for rec in a.trials:
            row = a.by_key.get(rec.key, {})
            note = rec.record.reason or rec.record.player_failure or ""
            w.writerow([a.group_of_trial[rec.key], rec.key,
                        *([rec.record.pair or ""] if paired else []), rec.record.status, note,
                        rec.record.transport or "", rec.record.scheduler or "",
                        rec.record.path_policy or "", rec.record.deployment or "",
                        *[fmt(row.get(m)) for m in a.metric_order]])
    with (out / "conditions.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["condition", "metric", "unit", "n", "mean", "sd", "ci95_low", "ci95_high"])
        for g in a.groups:
            for m in a.metric_order:
                s = a.summaries[g][m]
                w.writerow([g, m, metric_label(m)[1], s.n, fmt(s.mean), fmt(s.sd),
                            fmt(s.ci_low), fmt(s.ci_high)])
    with (out / "hosts.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["host", "condition", "trials", "ok", "failed",
                    *[f"median_{m}" for m in a.headline]])
        for r in a.host_rows:
            w.writerow([r["host"], r["condition"], r["trials"], r["ok"], r["failed"],
                        *[fmt(r["medians"][m]) for m in a.headline]])
    with (out / "reference.csv").open("w", newline="") as fh:
        cols = ["condition", "published_condition", "metric", "unit", "published",
                "published_how", "ours_n", "ours_mean", "ours_sd", "ours_ci_low", "ours_ci_high"]
        dw = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        dw.writeheader()
        for ref in a.reference_rows:
            dw.writerow({k: fmt(v) if isinstance(v, float) else v for k, v in ref.items()})
    _write_segments(a, out / "segments.csv")
    if a.paired is not None:
        write_paired_csv(a.paired, out / "paired.csv")
    if a.sweep is not None:
        write_sweep_csv(a.sweep, out / "sweep.csv")
    with (out / "paths_per_second.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["condition", "trial", "second", "path", "bytes_received", "retransmissions"])
        for key, series in a.series.items():
            recv, retr = series.received, series.retransmitted
            for p in range(a.n_paths):
                for b in sorted(set(recv.get(p, {})) | set(retr.get(p, {}))):
                    w.writerow([a.group_of_trial[key], key, b, p, int(recv.get(p, {}).get(b, 0)),
                                int(retr.get(p, {}).get(b, 0))])


def _write_segments(a: Analysis, path: Path) -> None:
    """A row per video segment of each ok trial: its download rate and its evidence."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        evidence_cols = ["url", "bytes", "request_page_s", "request_nginx_s",
                         "nginx_request_time_s", "nginx_connection", "first_byte_s",
                         "last_byte_s", "sender_held_s", "client_unread_max_bytes",
                         *[f"bytes_path{p}" for p in range(a.n_paths)]]
        w.writerow(["condition", "trial", "segment_index", "download_rate_bps", *evidence_cols])
        for key, series in a.series.items():
            rows = {r["segment_index"]: r for r in a.evidence[key].segments}
            for idx, rate in series.segment_rates:
                ev = rows.get(idx, {})
                w.writerow([a.group_of_trial[key], key, idx, f"{rate:.0f}",
                            *[fmt(ev.get(c)) for c in evidence_cols]])


def write_paired_csv(figures: list[PairedFigure], path: Path) -> None:
    """The figures over trace pairs: one row per group, metric and statistic."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["condition", "baseline", "metric", "unit", "statistic", "pairs", "value",
                    "baseline_value", "difference", "ci95_low", "ci95_high"])
        for f in figures:
            w.writerow([f.condition, f.baseline or "", f.metric, metric_label(f.metric)[1],
                        f.statistic, f.pairs, fmt(f.value), fmt(f.baseline_value),
                        fmt(f.difference), fmt(f.ci95_low), fmt(f.ci95_high)])


def write_sweep_csv(sweep: Sweep, path: Path) -> None:
    """The numbers behind sweep.png: one row per metric, line and swept value."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["setting", "value", "line", "metric", "unit", "n", "mean", "sd",
                    "ci95_low", "ci95_high"])
        for m, _ in sweep.titles:
            for line, by_x in sweep.points[m].items():
                for x in sorted(by_x):
                    s = by_x[x]
                    w.writerow([sweep.setting, fmt(x), line, m, metric_label(m)[1], s.n,
                                fmt(s.mean), fmt(s.sd), fmt(s.ci_low), fmt(s.ci_high)])
