"""The report's tables in the terminal (rich)."""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mpstream.qoe.stats import Summary
from mpstream.runner.metrics.metric import metric_heading
from mpstream.runner.report.analysis import interval_name
from mpstream.runner.report.build import Report, Sweep, num, sweep_tick

# The terminal shows the headline metrics; the HTML and CSV files have all of them.
HEADLINE = (
    "startup_delay_ms", "stall_count", "stall_ms", "longest_stall_ms", "rebuffer_ratio",
    "mean_bitrate_mbps", "dropped_frames", "switches", "download_rate_mbps", "download_share",
    "throughput_mbps",
    "throughput_share", "retrans_per_s", "path0_bytes_share", "path0_rtt_ms", "path1_rtt_ms",
    "stalls_after_event", "longest_stall_after_event_ms", "qoe_yin", "qoe_clae", "qoe_duanmu",
    "qoe_yu", "p1203_o46",
)


def short_cell(s: Summary, n_trials: int | None = None) -> str:
    """mean ±half-width; n only when it differs from the condition's trial count."""
    if s.n == 0:
        return "–"
    n = "" if s.n == n_trials else f" (n={s.n})"
    if s.n == 1 or math.isnan(s.half_width):
        return f"{num(s.mean)}{n}"
    return f"{num(s.mean)} ±{num(s.half_width)}{n}"


def print_sweep_tables(sweep: Sweep, console: Console, interval: str = "95% CI") -> None:
    """One table per metric of a sweep: a row per swept value, a column per line."""
    xs = sweep.values()
    for m, title in sweep.titles:
        by_line = sweep.points[m]
        usual_n = max((s.n for by_x in by_line.values() for s in by_x.values()), default=0)
        t = Table(title=f"{title} against {sweep.setting}: mean ± half-width of the "
                        f"{interval} over n={usual_n} trials unless marked")
        t.add_column(sweep.setting.rsplit(".", 1)[-1], no_wrap=True)
        for line in by_line:
            t.add_column(line, justify="right")
        for x in xs:
            t.add_row(sweep_tick(x), *[short_cell(by_x[x], usual_n) if x in by_x else "–"
                                       for by_x in by_line.values()])
        console.print(t)


# Conditions beyond this many are too many for a column each in a terminal: a sweep's tables
# stand in for them (all metrics of each: conditions.csv and the HTML page).
MAX_CONDITION_COLUMNS = 8


def print_tables(rep: Report, console: Console) -> None:
    if rep.sweep is None or len(rep.groups) <= MAX_CONDITION_COLUMNS:
        _print_condition_table(rep, console)
    if rep.sweep is not None:
        print_sweep_tables(rep.sweep, console, interval_name(rep.run))
    _print_reference_and_failures(rep, console)


def _print_condition_table(rep: Report, console: Console) -> None:
    t = Table(title=f"{rep.run_dir.name}: mean ± half-width of the {interval_name(rep.run)} "
                    "over n trials (sd and bounds: HTML and CSV)")
    t.add_column("metric")
    n_ok = {g: len(rep.per_trial.get(g, [])) for g in rep.groups}
    for g in rep.groups:
        t.add_column(f"{g} (n={n_ok[g]})", justify="right")
    for m in rep.metric_order:
        if m not in HEADLINE:
            continue
        t.add_row(metric_heading(m),
                  *[short_cell(rep.summaries[g][m], n_ok[g]) for g in rep.groups])
    console.print(t)


def _print_reference_and_failures(rep: Report, console: Console) -> None:
    if rep.reference_rows:
        r = Table(title="beside the published figures")
        for c in ("condition", "published condition", "metric", "published", "ours"):
            r.add_column(c, justify="left" if c in ("condition", "metric") else "right")
        for row in rep.reference_rows:
            ours = short_cell(Summary(row["ours_n"], row["ours_mean"], row["ours_sd"],
                                      row["ours_ci_low"], row["ours_ci_high"]))
            r.add_row(row["condition"], row["published_condition"],
                      f"{row['label']} ({row['unit']})", num(float(row["published"])), ours)
        console.print(r)
    if rep.failed:
        console.print(f"[red]{len(rep.failed)} failed trials[/]: "
                      + "; ".join(f"{f['key']}: {f['reason'][:120]}" for f in rep.failed),
                      highlight=False)


def report_and_print(run_dir: Path, out: Path | None, console: Console) -> Report:
    """Writes a run folder's report and prints its tables and where the page is."""
    from mpstream.runner.report.build import build_report

    rep = build_report(run_dir, out)
    print_tables(rep, console)
    console.print(f"report: {rep.html}")
    return rep
