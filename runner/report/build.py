"""`mpstream report RUN_DIR`: tables, CSV files, PNG figures and one self-contained HTML page,
all computed from the trial folders' raw data (see runner/layout.py).

The analysis (analysis.py) reads the trials once and computes every figure once; the writers
only write what it computed: csvfiles.py, figures.py and htmlpage.py. Each figure is declared
once, beside the code that computes it (runner/metrics/metric.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from mpstream.runner.metrics.metric import metric_label  # noqa: F401
from mpstream.runner.report.analysis import (  # noqa: F401  (the report's names, read from here)
    Analysis,
    Group,
    Sweep,
    analyze,
    group_of,
    numeric_sweep,
    path_check_rows,
    sweep_of,
    sweep_tick,
    varying_factors,
)
from mpstream.runner.report.csvfiles import write_csvs
from mpstream.runner.report.figures import write_figures
from mpstream.runner.report.htmlpage import (  # noqa: F401
    cell,
    explanations,
    implementations,
    num,
    write_html,
)
from mpstream.runner.workloads import workload_for


@dataclass
class Report(Analysis):
    """The analysis of a run and where its report was written."""

    out_dir: Path = Path()
    html: Path = Path()
    pngs: list[Path] = field(default_factory=list)


def build_report(run_dir: Path, out_dir: Path | None = None) -> Report:
    analysis = analyze(run_dir)
    out = Path(out_dir) if out_dir else analysis.run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    report = Report(**{f.name: getattr(analysis, f.name) for f in fields(Analysis)},
                    out_dir=out, html=out / "report.html")
    write_csvs(report, out)
    report.pngs = write_figures(report, out)
    write_html(report, report.html, report.pngs)
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
