"""The report's one self-contained HTML page (runner/report/templates/report.html.j2), its figures
inline, written from the analysis (runner/report/analysis.py); and the cell formats the terminal's
tables share with it."""

from __future__ import annotations

import base64
import csv
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from mpstream.qoe.stats import Summary
from mpstream.runner.layout import RunScenario, TrialData
from mpstream.runner.metrics.metric import metric_heading, metric_label
from mpstream.runner.report.analysis import Analysis, ReferenceRow, sweep_tick
from mpstream.runner.report.paired import PairedFigure
from mpstream.runner.report.reference import THESIS
from mpstream.runner.until import Until

TEMPLATES = Path(__file__).resolve().parent / "templates"


def num(v: object) -> str:
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


def _ours(r: ReferenceRow) -> str:
    return cell(Summary(r["ours_n"], r["ours_mean"], r["ours_sd"], r["ours_ci_low"],
                        r["ours_ci_high"]))


def explanations(groups: Sequence[str], summaries: Mapping[Any, dict[str, Summary]]
                 ) -> list[str]:
    """One sentence a condition that joins its startup, the first segment, the time the
    sender held data back, the download share and the slowest path's RTT (video runs only)."""
    out = []
    for g in groups:
        s = summaries.get(g, {})

        def mean(metric: str, s: dict[str, Summary] = s) -> float:
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


def deployments(a: Analysis) -> dict[str, str]:
    """Each condition's deployment, as its trials recorded it (runs before deployments: none)."""
    found: dict[str, str] = {}
    for trial in a.trials:
        if trial.record.deployment:
            found.setdefault(str(a.group_of_trial[trial.key]), trial.record.deployment)
    return found


def tune_front(run_dir: Path) -> list[dict[str, str]]:
    """The Pareto front of an `mpstream tune` whose folder this run is (none for a run)."""
    front = run_dir / "front.csv"
    if not front.is_file():
        return []
    with front.open(newline="") as fh:
        return list(csv.DictReader(fh))


def paired_table(figures: Sequence[PairedFigure]) -> tuple[list[str], list[list[str]]]:
    """The figures over trace pairs as a table: a row a group and what it is beside (the
    baseline condition, or another rule), a column a figure over pairs; a cell its value and,
    beside a baseline, the difference with its bootstrap interval."""
    heads = list(dict.fromkeys((f.metric, f.statistic) for f in figures))
    rows: dict[tuple[str, str | None], dict[tuple[str, str], str]] = defaultdict(dict)
    for f in figures:
        text = num(f.value)
        if f.baseline is not None:
            text += f" (Δ {num(f.difference)} [{num(f.ci95_low)}, {num(f.ci95_high)}])"
        rows[(f.condition, f.baseline)][(f.metric, f.statistic)] = text
    names = [f"{metric_heading(m)}, {st}" for m, st in heads]
    return names, [[group, beside or "–", *(cells.get(h, "–") for h in heads)]
                   for (group, beside), cells in rows.items()]


def write_html(a: Analysis, path: Path, pngs: list[Path]) -> None:
    env = Environment(loader=FileSystemLoader(TEMPLATES),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    searched = a.run_dir / "front.png"  # how a search's front moved (mpstream tune)
    images = [(p.name, base64.b64encode(p.read_bytes()).decode())
              for p in [*([searched] if searched.is_file() else []), *pngs]]
    html = env.get_template("report.html.j2").render(
        name=RunScenario.of(a.run).name or a.run_dir.name,
        description=RunScenario.of(a.run).description,
        run_dir=str(a.run_dir),
        now=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        n_ok=sum(len(v) for v in a.per_trial.values()),
        failed=a.failed,
        groups=a.groups,
        metrics=a.metric_order,
        summaries=a.summaries,
        per_trial=a.per_trial,
        reference_rows=a.reference_rows,
        path_checks=a.path_checks,
        host_rows=a.host_rows if len(a.hosts) > 1 else [],
        headline=a.headline,
        images=images,
        thesis=THESIS,
        label=metric_label,
        cell=cell,
        num=num,
        ours=_ours,
        explained=explanations(list(a.groups), a.summaries),
        implementations=implementations(a.trials),
        deployments=deployments(a),
        front=tune_front(a.run_dir),
        sweep=a.sweep,
        tick=sweep_tick,
        paired=paired_table(a.paired) if a.paired else None,
        n_pairs=max((f.pairs for f in a.paired or ()), default=0),
        until=Until.from_json(a.run["until"]).text() if a.run.get("until") else None,
        pcap=bool(a.run.get("pcap")),
    )
    path.write_text(html)
