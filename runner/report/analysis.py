"""The analysis behind `mpstream report`: a run folder's trials read once (runner/layout.py),
each trial's figures computed once (its workload's, the network's, the transport's and the
segment evidence), grouped by condition and the factors that vary in the run, summarized with
95% intervals per group, set beside published figures, per host, and as a numeric sweep. The
writers (csvfiles.py, figures.py and htmlpage.py beside this) only read what this computes."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from mpstream.errors import UserError
from mpstream.qoe.stats import Summary, anytime_summary, summarize
from mpstream.runner.layout import RUN_JSON, RunScenario, TrialData, load_trials, read_json
from mpstream.runner.metrics.common import binned_by_path, n_paths_of, segment_rates, trial_metrics
from mpstream.runner.metrics.evidence import TrialEvidence, trial_evidence
from mpstream.runner.metrics.metric import metric_heading, metric_label, metric_order
from mpstream.runner.record import Measurement
from mpstream.runner.report.paired import (
    FIGURES,
    PairedFigure,
    PairFigures,
    paired_figures,
    per_pair,
)
from mpstream.runner.report.reference import condition_text, published
from mpstream.runner.scenario import short_value
from mpstream.runner.workloads import workload_for

# Factors a scenario crosses with its conditions, and their value in trials that predate them.
FACTORS = {"player": None, "browser": "chromium", "codec": "auto", "abr": "default"}
# The figures the per-host table gives (the medians of those the run has), so that a slow or
# odd host shows itself rather than hiding inside a condition's spread.
HEADLINE_METRICS = ("startup_delay_ms", "stall_ms", "mean_bitrate_mbps", "throughput_mbps")
# The metrics a sweep figure plots against the swept setting, those of them the run has.
SWEEP_METRICS = ("throughput_mbps", "startup_delay_ms", "stall_ms", "mean_bitrate_mbps")

# One trial's figures by name, and its key under "key".
TrialRow = dict[str, Any]
# Per 1-s bin and path: a sum (bytes delivered to the receiver, retransmissions by the sender).
PathSeries = dict[int, dict[int, float]]


class Group(str):
    """A column of the report: a condition and the values of the factors that vary in the run
    (player, browser, codec, adaptation rule). It is also its name, condition[/player]…, so
    that files and pages keyed by that name read it as they always did; nothing splits it."""

    condition: str
    factors: tuple[str, ...]

    def __new__(cls, condition: str, factors: tuple[str, ...] = ()) -> Group:
        group = super().__new__(cls, "/".join((condition, *factors)))
        group.condition, group.factors = condition, factors
        return group


class FailedRow(TypedDict):
    key: str
    group: Group
    reason: str


class HostRow(TypedDict):
    host: str
    condition: Group
    trials: int
    ok: int
    failed: int
    medians: dict[str, float]


class PathCheckRow(TypedDict):
    key: str
    when: str
    what: str
    rtt_ms: float | None
    mbps: float | None
    error: str


class ReferenceRow(TypedDict):
    condition: Group
    published_condition: str
    metric: str
    label: str
    unit: str
    published: float
    published_how: str
    ours_n: int
    ours_mean: float
    ours_sd: float
    ours_ci_low: float
    ours_ci_high: float


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


@dataclass
class TrialSeries:
    """An ok trial's series, computed once for the CSV files and the figures."""

    segment_rates: list[tuple[int, float]]  # (segment index, download rate in bit/s)
    received: PathSeries
    retransmitted: PathSeries


@dataclass
class Analysis:
    run_dir: Path
    run: dict[str, Any]  # run.json
    trials: list[TrialData]  # the run's trials, read once
    several: frozenset[str]  # the factors that vary in the run
    n_paths: int
    group_of_trial: dict[str, Group]  # trial key -> its group
    groups: list[Group]
    per_trial: dict[Group, list[TrialRow]]  # ok trials' figures
    by_key: dict[str, TrialRow]
    summaries: dict[Group, dict[str, Summary]]  # group -> metric -> Summary
    metric_order: list[str]
    failed: list[FailedRow]
    evidence: dict[str, TrialEvidence]  # ok trial key -> evidence
    series: dict[str, TrialSeries]  # ok trial key -> its series
    reference_rows: list[ReferenceRow] = field(default_factory=list)
    # Real-network trials: what `paths check` measured before and after each (one row each)
    path_checks: list[PathCheckRow] = field(default_factory=list)
    # Per host and condition: trials, ok, failed and the medians of the headline metrics
    host_rows: list[HostRow] = field(default_factory=list)
    sweep: Sweep | None = None  # when the conditions sweep a numeric setting
    # A run over trace pairs: each group's figure of each pair (metric -> pair -> value), and
    # its figures over pairs beside the baseline's (report/paired.py); None without pairs.
    pairs: dict[str, PairFigures] | None = None
    paired: list[PairedFigure] | None = None

    @property
    def headline(self) -> list[str]:
        return [m for m in HEADLINE_METRICS if m in self.metric_order]

    @property
    def hosts(self) -> list[str]:
        return sorted({r["host"] for r in self.host_rows})

    def condition_rows(self, condition: str) -> list[TrialRow]:
        """The figures of a condition's ok trials, over all its groups."""
        return [row for g in self.groups if g.condition == condition
                for row in self.per_trial.get(g, [])]

    def summary(self, rows: list[TrialRow], metric: str) -> Summary:
        """A figure over these trials, with the run's kind of interval (`_summarizer`)."""
        return _summarizer(self.run)([row.get(metric, math.nan) for row in rows])


def varying_factors(records: list[TrialData]) -> frozenset[str]:
    """The factors that take more than one value in the run: they name its groups."""
    return frozenset(f for f, default in FACTORS.items()
                     if len({getattr(r.record, f) or default for r in records}) > 1)


def group_key(rec: TrialData, several: frozenset[str] | bool) -> Group:
    """The trial's group: its condition and its values of the factors in `several` (True
    stands for the player alone)."""
    if isinstance(several, bool):
        several = frozenset({"player"}) if several else frozenset()
    factors = []
    for factor, default in FACTORS.items():
        value = getattr(rec.record, factor) or default
        if factor in several and value:
            factors.append(str(value))
    return Group(rec.condition, tuple(factors))


def group_of(rec: TrialData, several: frozenset[str] | bool) -> str:
    """condition[/player][/browser][/codec][/abr]: the factors that vary in the run."""
    return str(group_key(rec, several))


def analyze(run_dir: Path, trials: list[TrialData] | None = None) -> Analysis:
    """The run folder's trials, figures and summaries; UserError when it is no run folder or
    has no finished trial. `trials`: the run's finished trials when the caller has read them
    already (the run pages read only plain folders, runfolders.py)."""
    run_dir = Path(run_dir)
    run = read_json(run_dir / RUN_JSON)
    if run is None:
        raise UserError(f"{run_dir} is not a run folder (no {RUN_JSON}); give the --out folder "
                        "of `mpstream run`")
    records = load_trials(run_dir) if trials is None else trials
    if not records:
        raise UserError(f"{run_dir}: no finished trials yet; run `mpstream run` first")
    several = varying_factors(records)
    n_paths = n_paths_of(records)
    conditions = RunScenario.of(run).conditions
    planned = [c["label"] for c in conditions]
    group_of_trial = {rec.key: group_key(rec, several) for rec in records}
    groups = sorted(dict.fromkeys(group_of_trial.values()), key=lambda g: (
        planned.index(g.condition) if g.condition in planned else len(planned), str(g)))
    per_trial: dict[Group, list[TrialRow]] = defaultdict(list)
    by_key: dict[str, TrialRow] = {}
    failed: list[FailedRow] = []
    evidence: dict[str, TrialEvidence] = {}
    series: dict[str, TrialSeries] = {}
    for rec in records:
        g = group_of_trial[rec.key]
        if not rec.ok:
            failed.append({"key": rec.key, "group": g, "reason": rec.record.reason or ""})
            continue
        evidence[rec.key] = trial_evidence(rec, n_paths)
        row = by_key[rec.key] = {"key": rec.key, **trial_metrics(rec, n_paths),
                                 **evidence[rec.key].metrics}
        per_trial[g].append(row)
        series[rec.key] = TrialSeries(
            segment_rates(rec.events),
            binned_by_path(rec.path_samples("client"), rec.receiver_column),
            binned_by_path(rec.sender_samples, "retrans_total"))
    order = _metric_order(per_trial, records)
    out = Analysis(run_dir, run, records, several, n_paths, group_of_trial, groups,
                   dict(per_trial), by_key, {}, order, failed, evidence, series)
    out.summaries = {g: {m: out.summary(per_trial.get(g, []), m) for m in order} for g in groups}
    out.reference_rows = _reference_rows(out)
    out.path_checks = path_check_rows(records)
    out.host_rows = host_rows(out)
    out.sweep = sweep_of(groups, out.summaries, order, conditions)
    out.pairs = pairs_of(out)
    out.paired = paired_of(out)
    return out


def pairs_of(a: Analysis) -> dict[str, PairFigures] | None:
    """Each group's figure of each trace pair (the mean over its rounds), for the metrics of
    the figures over pairs; None when no trial played a pair."""
    pair_of = {rec.key: rec.record.pair for rec in a.trials if rec.record.pair}
    if not pair_of:
        return None
    metrics = {m for m, _ in FIGURES}
    return {str(g): per_pair(((pair_of[row["key"]], row) for row in a.per_trial.get(g, [])
                              if row["key"] in pair_of), metrics) for g in a.groups}


def paired_of(a: Analysis) -> list[PairedFigure] | None:
    """The run's figures over trace pairs (report/paired.py), each group beside the scenario's
    baseline condition played with the same factors; then, with a `baseline_abr`, each group of
    another adaptation rule beside that rule under the same condition (the rule's share), and
    beside the baseline condition under that rule (the whole against what a user has, e.g. TCP
    on the WiFi with the player's own rule); None without pairs."""
    groups = a.pairs
    if groups is None:
        return None
    scenario = RunScenario.of(a.run)
    baseline_of = {str(g): str(Group(scenario.baseline, g.factors)) if scenario.baseline
                   else None for g in a.groups}
    figures = paired_figures(groups, baseline_of)
    rule = scenario.baseline_abr
    if rule and "abr" in a.several:
        at = [f for f in FACTORS if f in a.several].index("abr")

        def under_baseline_rule(condition: str, g: Group) -> str:
            return str(Group(condition, (*g.factors[:at], rule, *g.factors[at + 1:])))

        rule_of = {str(g): under_baseline_rule(g.condition, g) for g in a.groups}
        figures += paired_figures(groups, rule_of, alone=False)
        if scenario.baseline:
            has_of = {str(g): under_baseline_rule(scenario.baseline, g) for g in a.groups
                      if g.condition != scenario.baseline
                      and g.factors[at] != rule}
            figures += paired_figures(groups, has_of, alone=False)
    return figures


def _summarizer(run: dict[str, Any]) -> Callable[[Iterable[float | None]], Summary]:
    """How the run's figures are summarized over trials. A run that stopped when it was sure
    shows the intervals it stopped on: anytime-valid ones, which hold however often the run
    looked (runner/until.py); any other run, Student's t."""
    return anytime_summary if run.get("until") else summarize


def interval_name(run: dict[str, Any]) -> str:
    """What the report's intervals are: a run that stopped when sure shows anytime-valid ones."""
    return "anytime-valid 95% interval" if run.get("until") else "95% CI"


def _metric_order(per_trial: dict[Group, list[TrialRow]], records: list[TrialData]) -> list[str]:
    """The figures some trial gave (not all NaN), in the order they are shown."""
    given = {k for rows in per_trial.values() for row in rows for k, v in row.items()
             if k != "key" and not _isnan(v)}
    return shown_order(given, records)


def shown_order(given: set[str], records: list[TrialData]) -> list[str]:
    """The figures in `given` in the order they are shown: the trials' workloads' own first."""
    first = [m for kind in dict.fromkeys(r.record.kind for r in records)
             for m in workload_for(kind).shown]
    return metric_order(given, first)


def _isnan(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def host_rows(analysis: Analysis) -> list[HostRow]:
    """One row per host and condition, in the conditions' order."""
    cells: dict[tuple[str, Group], list[TrialData]] = defaultdict(list)
    for rec in analysis.trials:
        cells[(rec.record.host or "unknown", analysis.group_of_trial[rec.key])].append(rec)
    rows: list[HostRow] = []
    for (host, group), recs in sorted(cells.items(), key=lambda kv: (
            kv[0][0], analysis.groups.index(kv[0][1]))):
        ok = [analysis.by_key.get(r.key, {}) for r in recs if r.ok]
        medians = {}
        for m in analysis.headline:
            values = [float(v) for t in ok
                      if isinstance(v := t.get(m), int | float) and not math.isnan(v)]
            medians[m] = statistics.median(values) if values else math.nan
        rows.append({"host": host, "condition": group, "trials": len(recs), "ok": len(ok),
                     "failed": len(recs) - len(ok), "medians": medians})
    return rows


def path_check_rows(records: list[TrialData]) -> list[PathCheckRow]:
    """One row per real trial, moment (before, after) and interface, then the aggregate."""
    rows: list[PathCheckRow] = []
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


def _reference_rows(analysis: Analysis) -> list[ReferenceRow]:
    ref_by_group = {analysis.group_of_trial[rec.key]: rec.record.condition.reference
                    for rec in analysis.trials if rec.record.condition.reference}
    rows: list[ReferenceRow] = []
    for g in analysis.groups:
        key = ref_by_group.get(g)
        if key is None:
            continue
        for pub in published(key):
            s = analysis.summaries[g].get(pub.metric, summarize([]))
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


def sweep_tick(x: float) -> str:
    """A swept value as the conditions' labels write it (550000 -> 550k)."""
    return short_value(int(x) if x.is_integer() else x)


def numeric_sweep(conditions: list[dict[str, Any]]
                  ) -> tuple[str, dict[str, float], dict[str, str]] | None:
    """The numeric setting a run's conditions sweep (e.g. a bottleneck buffer): every condition
    overrides the same settings and this one takes three values or more. Returns (setting,
    condition label -> its value, condition label -> the other varying settings' values, which
    name its line), or None when the run is no such sweep."""
    sets = [c.get("set") or {} for c in conditions]
    if len(sets) < 3 or not sets[0] or any(set(s) != set(sets[0]) for s in sets):
        return None

    def numeric(v: object) -> bool:
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


def sweep_of(groups: list[Group], summaries: dict[Group, dict[str, Summary]],
             order: list[str], conditions: list[dict[str, Any]]) -> Sweep | None:
    """The report's figures of a numeric sweep (numeric_sweep), or None when the run is none."""
    sweep = numeric_sweep(conditions)
    if sweep is None:
        return None
    key, xs, lines = sweep
    metrics = [m for m in SWEEP_METRICS if m in order]
    metrics += [m for m in order if m.startswith("path") and m.endswith("_rtt_ms")]
    if not metrics:
        return None
    points: dict[str, dict[str, dict[float, Summary]]] = {m: {} for m in metrics}
    for g in groups:
        if g.condition not in xs:
            continue
        line = lines[g.condition] + "".join(f"/{f}" for f in g.factors)
        for m in metrics:
            points[m].setdefault(line, {})[xs[g.condition]] = summaries[g][m]
    return Sweep(key, [(m, metric_heading(m)) for m in metrics], points)
