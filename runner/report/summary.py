"""A run's summary for the docs (docs/data/<run>.json): per condition, the trials that ran and
each metric's n, mean, sd and 95% interval, and what made the run (its command, the code's
commit, the kernel, the cores, the machine's load). Kilobytes where the run folder holds
megabytes, so that every figure the docs quote can be checked in and checked
(scripts/docsfigures.py). A benchmark under bench/ writes its figures in the same form
(`--summary`), each of its modes a condition; so does a script that computes figures of a run
folder beyond the report's (scripts/). All three are one model, `RunSummary`, made by
`build_summary` and written by `dumps`."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mpstream import provenance
from mpstream.errors import UserError
from mpstream.paths import REPO_ROOT
from mpstream.qoe.stats import Summary, summarize
from mpstream.runner.layout import RUN_JSON, RunScenario, TrialData, load_trials, read_json
from mpstream.runner.record import TrialRecord
from mpstream.runner.report.build import Group, Report, metric_label
from mpstream.runner.scenario import SCENARIOS_DIR, condition_of_key
from mpstream.runner.until import ConditionState, Until, states_of

FORMAT = 1
# The figures each trial gives in the summary as well as their condition's statistics: what a
# reader checks first when an interval is wide (which trial, at what load), and the time a
# returning path took, whose spread over trials is the finding (a timer that fired or not);
# a sweep's RTT and retransmissions, where one trial can set a wide interval apart.
PER_TRIAL = ("startup_delay_ms", "download_share", "longest_stall_ms", "mean_bitrate_mbps",
             "throughput_mbps", "path0_rtt_ms", "path1_rtt_ms", "retrans_per_s",
             "path0_return_s", "path1_return_s")
# Six significant digits: far below any interval the docs quote, and the file stays stable
# when the same run is summarized again.
DIGITS = 6

# A trial's (or a benchmark round's) key and its figures.
TrialRow = dict[str, str | int | float | None]


class _Summary(BaseModel):
    # A field one kind of summary does not have (a benchmark has no plan, a run folder's
    # figures no median) is left unset and not written: `dumps` writes the fields set, in the
    # order declared here, which is the order the files have always had.
    model_config = ConfigDict(extra="forbid")


class FigureSummary(_Summary):
    """One figure over a condition's trials (or a benchmark's rounds)."""

    unit: str
    n: int
    mean: float | None
    median: float | None = None  # figures given per round or per trial (bench/, scripts/)
    sd: float | None
    ci95: tuple[float | None, float | None]


class ConditionSummary(_Summary):
    """One group of trials (a condition, or a condition and its adaptation rule), or a
    benchmark's mode: what it ran (a run folder's only), each figure over its trials, and each
    trial's own figures."""

    group: str
    label: str
    profile: str | None = None
    transport: str | None = None
    scheduler: str | None = None
    path_policy: str | None = None
    deployment: str | None = None
    set: dict[str, Any] = {}
    trials_ok: int = 0
    trials_failed: int = 0
    stop_reason: str | None = None  # a run that stops each condition when sure
    metrics: dict[str, FigureSummary]
    trials: list[TrialRow]


class LoadSpan(_Summary):
    """The least, median and most of the load averages sampled while a run or bench ran."""

    min: float
    median: float
    max: float


class RunProvenance(_Summary):
    """What made the figures: the command, the code and machine (`environment`), when, at what
    load; and of a run folder's report how far the run got."""

    id: str
    scenario: str | None
    command: str
    of_run: str | None = None  # a script's: the `mpstream run` that made the trials it read
    trials_per_condition: int | None
    # A run that stopped each condition when sure: the rule, and that its intervals are
    # anytime-valid ones (mpstream.qoe.stats.anytime_summary).
    until: str | None = None
    intervals: str | None = None
    trials: int | None = None
    ok: int | None = None
    planned: int | None = None
    # Whether its trials captured packets (--pcap): a capture costs CPU that a two-core
    # machine's timings show, so figures of runs that did and did not are not to be set side
    # by side unchecked.
    pcap: bool | None = None
    started: str | None
    finished: str | None
    environment: dict[str, Any] | None
    load_avg_1m: LoadSpan | None
    overhead_s_a_trial: float | None = None


class PairedSummary(_Summary):
    """A group's figure over trace pairs beside the baseline's over the same pairs, the
    difference and its bootstrap interval (runner/report/paired.py)."""

    condition: str
    baseline: str | None
    metric: str
    unit: str
    statistic: str
    pairs: int
    value: float | None
    baseline_value: float | None
    difference: float | None
    ci95: tuple[float | None, float | None]


class RunSummary(_Summary):
    """docs/data/<id>.json; `paired` only for a run over trace pairs."""

    format: int
    run: RunProvenance
    conditions: list[ConditionSummary]
    paired: list[PairedSummary] | None = None


@dataclass(frozen=True)
class Origin:
    """What every summary says of where its figures come from."""

    scenario: str | None  # None: a benchmark's
    trials_per_condition: int | None
    started: str | None
    finished: str | None
    environment: dict[str, Any] | None  # the code's commit, the kernel, the cores
    loads: list[float]  # the load averages sampled meanwhile


@dataclass(frozen=True)
class RunOutcome:
    """What a run folder's report adds: how far the run got, and how."""

    until: Until | None
    trials: int
    ok: int
    planned: int | None
    pcap: bool
    overhead_s_a_trial: float | None


def build_summary(run_id: str, command: str, origin: Origin, conditions: list[ConditionSummary],
                  *, of_run: str | None = None, outcome: RunOutcome | None = None,
                  paired: list[PairedSummary] | None = None) -> RunSummary:
    """The one place a summary is made: a run folder's report (`outcome`), a script's figures
    of a run folder (`of_run`, the run that made the trials) or a benchmark's (neither)."""
    kind: dict[str, Any] = {} if of_run is None else {"of_run": of_run}
    if outcome is not None:
        if outcome.until is not None:
            kind |= {"until": outcome.until.text(), "intervals": "anytime-valid"}
        kind |= {"trials": outcome.trials, "ok": outcome.ok, "planned": outcome.planned,
                 "pcap": outcome.pcap, "overhead_s_a_trial": outcome.overhead_s_a_trial}
    return RunSummary(format=FORMAT, run=RunProvenance(
        id=run_id, scenario=origin.scenario, command=command,
        trials_per_condition=origin.trials_per_condition, started=origin.started,
        finished=origin.finished, environment=origin.environment,
        load_avg_1m=_load_span(origin.loads), **kind), conditions=conditions,
        **({"paired": paired} if paired is not None else {}))


@dataclass(frozen=True)
class RunFolder:
    """What a summary reads of a run folder's run.json (`of`)."""

    scenario: RunScenario
    plan: list[str]
    chosen: list[str] | None  # the conditions its `--condition`s chose
    trials: int | None  # per condition, as run
    spec_trials: int | None  # the scenario's own count
    until: Until | None
    cluster: str | None
    pcap: bool
    environment: dict[str, Any] | None
    scenario_file: str | None = None  # the file it was read from, as the command named it

    @classmethod
    def of(cls, run: dict[str, Any]) -> RunFolder:
        return cls(scenario=RunScenario.of(run), plan=[str(k) for k in run.get("plan") or []],
                   chosen=run.get("chosen"), trials=run.get("trials"),
                   spec_trials=(run.get("scenario_spec") or {}).get("trials"),
                   until=Until.from_json(run["until"]) if run.get("until") else None,
                   cluster=run.get("cluster"), pcap=bool(run.get("pcap")),
                   environment=run.get("environment"), scenario_file=run.get("scenario_file"))

    @property
    def labels(self) -> list[str]:
        return [str(c["label"]) for c in self.scenario.conditions]


def _num(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else float(f"{x:.{DIGITS}g}")


def _figure(unit: str, s: Summary, median: list[float] | None = None) -> FigureSummary:
    """`median`: the values to give the median of (None: the summary has no median)."""
    extra = {} if median is None else {"median": _num(statistics.median(median)) if median
                                       else None}
    return FigureSummary(unit=unit, n=s.n, mean=_num(s.mean), sd=_num(s.sd),
                         ci95=(_num(s.ci_low), _num(s.ci_high)), **extra)


def _load_span(loads: list[float]) -> LoadSpan | None:
    if not loads:
        return None
    return LoadSpan(min=min(loads), median=statistics.median(loads), max=max(loads))


def _origin(run: RunFolder, records: list[TrialRecord]) -> Origin:
    """Where the trials a summary is made of come from: their run folder."""
    finished = [r.finished_at for r in records if r.finished_at]
    return Origin(scenario=run.scenario.name, trials_per_condition=run.trials,
                  started=min((r.started_at for r in records), default=None),
                  finished=max(finished, default=None), environment=run.environment,
                  loads=[r.load_avg_1m for r in records if r.load_avg_1m is not None])


def _planned_conditions(run: RunFolder) -> list[str] | None:
    """The conditions the run is a run of, in the scenario's order: those its `--condition`s
    chose (run.json's `chosen`), else all its plan holds; None for a run folder with no plan."""
    if not run.plan:
        return None
    labels = run.labels
    found = run.chosen or {condition_of_key(key, labels) for key in run.plan}
    return [label for label in labels if label in found]


def _planned_trials(run: RunFolder) -> int | None:
    """How many trials the run is to have: those of its plan in the conditions it is a run of."""
    chosen = _planned_conditions(run)
    if chosen is None:
        return None
    return sum(1 for key in run.plan if condition_of_key(key, run.labels) in chosen)


def _command(run: RunFolder, ran: list[str]) -> str:
    """The `mpstream run` that made the trials: with `--condition` for each condition the run
    is a run of when that is not all of the scenario's (`_planned_conditions`; else for each
    condition that ran), and the
    `--cluster` the run was given. A run stopped part way is still the whole run's command; the
    summary's `planned` says how far it got."""
    cmd = f"mpstream run {_scenario_ref(run)}"
    if run.until:
        cmd += f" --until {run.until.text()} --max-trials {run.until.max_trials}"
    elif run.trials and run.trials != run.spec_trials:
        cmd += f" --trials {run.trials}"
    chosen = _planned_conditions(run) or ran
    if set(chosen) < set(run.labels):
        cmd += "".join(f" --condition {label}" for label in dict.fromkeys(chosen))
    if run.cluster:
        cmd += f" --cluster {run.cluster}"
    return cmd


def _scenario_ref(run: RunFolder) -> str:
    """How the command names the scenario: by its name when it is a shipped one (or its file
    is not here), else by its file (from the repository's root when it is in it), which
    `reproduce` then reads again."""
    name = str(run.scenario.name)
    if not run.scenario_file:
        return name
    path = Path(run.scenario_file).resolve()
    if path == SCENARIOS_DIR / f"{name}.toml" or not path.is_file():
        return name
    return str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)


def _deployment_of(records: list[TrialData]) -> str | None:
    """The deployment the condition's trials ran (the first that says; older runs: none)."""
    return next((r.record.deployment for r in records if r.record.deployment), None)


def _provenance(record: TrialRecord | None) -> TrialRow:
    """A trial's load at its start and its own time, set-up included (a resumed run's span
    from first start to last end also counts its pause; this does not)."""
    if record is None:
        return {"load_avg_1m": None, "elapsed_s": None}
    return {"load_avg_1m": record.load_avg_1m, "elapsed_s": record.elapsed_s}


def stop_states(report: Report, run: RunFolder) -> dict[str, ConditionState]:
    """Where each condition of a run that stops when sure stood at its end (none for a run of
    a fixed count)."""
    if run.until is None:
        return {}
    until = run.until
    figure = {t["key"]: t.get(until.metric) for rows in report.per_trial.values() for t in rows}
    return states_of(until, ((r.record.condition.label, figure.get(r.key)) for r in report.trials),
                     run.scenario.baseline)


def _condition(report: Report, group: Group, cond: dict[str, Any],
               stopped: dict[str, ConditionState]) -> ConditionSummary:
    label = group.condition
    # The group's own trials (a condition played with two adaptation rules is two groups).
    mine = [r for r in report.trials if report.group_of_trial.get(r.key) == group]
    metrics = {m: _figure(metric_label(m)[1], s) for m, s in report.summaries.get(group, {}).items()
               if s.n > 0}
    load = summarize(r.record.load_avg_1m for r in mine if r.ok)
    if load.n:
        metrics["load_avg_1m"] = _figure("", load)
    record_of = {r.key: r.record for r in mine}
    trials = [{"key": t["key"], **_provenance(record_of.get(t["key"])),
               **{m: _num(t[m]) for m in PER_TRIAL if m in t}}
              for t in report.per_trial.get(group, [])]
    return ConditionSummary(
        group=group, label=label,
        **{k: cond.get(k) for k in ("profile", "transport", "scheduler", "path_policy")},
        deployment=_deployment_of(mine), set=cond.get("set") or {},
        trials_ok=sum(1 for r in mine if r.ok), trials_failed=sum(1 for r in mine if not r.ok),
        **({"stop_reason": stopped[label].stop_reason} if label in stopped else {}),
        metrics=metrics, trials=trials)


def run_summary(report: Report, run_json: dict[str, Any], run_id: str) -> RunSummary:
    run = RunFolder.of(run_json)
    records = [r.record for r in report.trials]
    stopped = stop_states(report, run)
    by_label = {c["label"]: c for c in run.scenario.conditions}
    conditions = [_condition(report, group, by_label.get(group.condition, {}), stopped)
                  for group in report.groups]
    outcome = RunOutcome(until=run.until, trials=len(records),
                         ok=sum(1 for r in report.trials if r.ok), planned=_planned_trials(run),
                         pcap=run.pcap, overhead_s_a_trial=_run_overhead(records))
    return build_summary(run_id, _command(run, [c.label for c in conditions]),
                         _origin(run, records), conditions, outcome=outcome,
                         paired=_paired(report))


def _paired(report: Report) -> list[PairedSummary] | None:
    if report.paired is None:
        return None
    return [PairedSummary(condition=f.condition, baseline=f.baseline, metric=f.metric,
                          unit=metric_label(f.metric)[1], statistic=f.statistic, pairs=f.pairs,
                          value=_num(f.value), baseline_value=_num(f.baseline_value),
                          difference=_num(f.difference), ci95=(_num(f.ci95_low),
                                                               _num(f.ci95_high)))
            for f in report.paired]


def _run_overhead(records: list[TrialRecord]) -> float | None:
    """The run's wall clock a trial less its playback: what a trial costs beyond the seconds
    it plays, counting what the run does between trials too (a process started, a rule
    evaluated); None when a trial did not record its playback."""
    played = [r.playback_s for r in records]
    finished = [r.finished_at for r in records if r.finished_at]
    if not records or not finished or any(p is None for p in played):
        return None
    wall = (datetime.fromisoformat(max(finished))
            - datetime.fromisoformat(min(r.started_at for r in records))).total_seconds()
    return _num((wall - sum(p for p in played if p is not None)) / len(records))


class BenchRecord:
    """What a benchmark records beside its figures for `--summary`: when it started, and the
    machine's load then and at the end. Made before the first round, written after the last."""

    def __init__(self) -> None:
        self.started = datetime.now(UTC).isoformat()
        self.load_at_start = provenance.load_avg_1m()

    def write(self, out: Path, argv: list[str], rounds: dict[str, list[dict[str, float]]],
              units: dict[str, str], derived: dict[str, dict[str, float]] | None = None) -> Path:
        """Writes the figures to `out`, per condition (a mode, a CC, a cluster size) each
        figure's n, mean, median and interval over the rounds, and `derived` figures computed
        from those (a ratio of two medians) with n 1; `units` names each figure's unit, `argv`
        is the benchmark's command line, which the summary keeps without `--summary`."""
        out = Path(out)
        return _write(self.summary(out.stem, script_command(argv, "bench"), rounds, units,
                                   derived or {}), out)

    def summary(self, run_id: str, command: str, rounds: dict[str, list[dict[str, float]]],
                units: dict[str, str], derived: dict[str, dict[str, float]]) -> RunSummary:
        conditions = figure_conditions(rounds, units, derived)
        loads = [x for x in (self.load_at_start, provenance.load_avg_1m()) if x is not None]
        origin = Origin(scenario=None,
                        trials_per_condition=max((len(r) for r in rounds.values()), default=0),
                        started=self.started, finished=datetime.now(UTC).isoformat(),
                        environment=provenance.environment(), loads=loads)
        return build_summary(run_id, command, origin, conditions)


def figure_conditions(rows: dict[str, list[dict[str, Any]]], units: dict[str, str],
                      derived: dict[str, dict[str, float]]) -> list[ConditionSummary]:
    """A summary's conditions from figures given per round or per trial (a condition's label ->
    one dict of figures each, with the trial's "key" when it is a trial): each figure's unit,
    n, mean, median, sd and 95% interval, and `derived` figures (computed from those: a ratio,
    a correlation) with n 1; every round's or trial's figures beside, for min and max."""
    def metric(name: str, values: list[float]) -> FigureSummary:
        kept = [v for v in values if v is not None and not math.isnan(v)]
        return _figure(units.get(name, ""), summarize(values), median=kept)

    conditions = []
    for label in dict.fromkeys([*rows, *derived]):
        given = rows.get(label, [])
        names = list(dict.fromkeys(k for row in given for k in row if k != "key"))
        metrics = {k: metric(k, [row.get(k, math.nan) for row in given]) for k in names}
        metrics.update({k: metric(k, [v]) for k, v in derived.get(label, {}).items()})
        conditions.append(ConditionSummary(group=label, label=label, metrics=metrics, trials=[
            {"key": row.get("key", f"round {i}"),
             **{k: _num(v) for k, v in row.items() if k != "key"}}
            for i, row in enumerate(given)]))
    return conditions


def write_analysis(run_dir: Path, argv: list[str], rows: dict[str, list[dict[str, Any]]],
                   units: dict[str, str], derived: dict[str, dict[str, float]],
                   out: Path) -> Path:
    """Figures a script computes per trial from a run folder, beyond the report's
    (scripts/penalty_figures.py), written as a summary: per condition each figure over the
    trials and each trial's own; `argv` is the script's command line, and the run's provenance (the
    `mpstream run` that made it, its commit, kernel, dates and load) comes from the folder."""
    run_json = read_json(Path(run_dir) / RUN_JSON)
    if run_json is None:
        raise UserError(f"{run_dir} is not a run folder (it has no {RUN_JSON}): give the folder "
                        "`mpstream run --out` wrote")
    run = RunFolder.of(run_json)
    # The trials the figures came from, by key: a row's label may be a report group
    # (condition/rule), not a condition.
    keys = {t["key"] for trials in rows.values() for t in trials if "key" in t}
    records = [r for r in load_trials(Path(run_dir)) if r.key in keys]
    out = Path(out)
    return _write(build_summary(out.stem, script_command(argv, "scripts", Path(run_dir)),
                                _origin(run, [r.record for r in records]),
                                figure_conditions(rows, units, derived),
                                of_run=_command(run, [r.condition for r in records])), out)


def write_script_figures(argv: list[str], rows: dict[str, list[dict[str, Any]]],
                         units: dict[str, str], out: Path) -> Path:
    """Figures a script computes of no run (scripts/tracepairs.py: the trace pairs' traces),
    per condition, written as a summary whose command is the script's (`argv`)."""
    started = datetime.now(UTC).isoformat()
    origin = Origin(scenario=None, trials_per_condition=1, started=started,
                    finished=datetime.now(UTC).isoformat(),
                    environment=provenance.environment(), loads=[])
    out = Path(out)
    return _write(build_summary(out.stem, script_command(argv, "scripts"), origin,
                                figure_conditions(rows, units, {})), out)


def script_command(argv: list[str], folder: str, run_dir: Path | None = None) -> str:
    """The command line that reproduces a script's figures (a benchmark's in bench/, an
    analysis in scripts/): its own, less `--summary PATH`, with a run folder it read as RUN_DIR
    (the folder is on no other machine)."""
    args, skip = [], False
    for a in argv[1:]:
        if skip or a == "--summary":
            skip = not skip
            continue
        if a.startswith("--summary="):
            continue
        args.append("RUN_DIR" if run_dir is not None and Path(a) == Path(run_dir) else a)
    return " ".join([".venv/bin/python", f"{folder}/{Path(argv[0]).name}", *args])


def write_summary(report: Report, run: dict[str, Any], out: Path) -> Path:
    out = Path(out)
    return _write(run_summary(report, run, out.stem), out)


def _write(summary: RunSummary, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(summary))
    return out


def dumps(summary: RunSummary) -> str:
    """JSON with one line per metric: a diff of two summaries reads figure by figure."""
    def one(x: Any) -> str:
        return json.dumps(x, separators=(", ", ": "))

    data = summary.model_dump(exclude_unset=True)
    lines = ["{", f' "format": {one(data["format"])},', f' "run": {one(data["run"])},',
             ' "conditions": [']
    for i, cond in enumerate(data["conditions"]):
        head = {k: v for k, v in cond.items() if k not in ("metrics", "trials")}
        lines.append(f"  {one(head)[:-1]}, \"metrics\": {{")
        metrics = list(cond["metrics"].items())
        lines += [f"   {one(m)}: {one(v)}" + ("," if j < len(metrics) - 1 else "")
                  for j, (m, v) in enumerate(metrics)]
        lines.append("  }, \"trials\": [")
        lines += [f"   {one(t)}" + ("," if j < len(cond["trials"]) - 1 else "")
                  for j, t in enumerate(cond["trials"])]
        lines.append("  ]}" + ("," if i < len(data["conditions"]) - 1 else ""))
    lines.append(" ]" + ("," if "paired" in data else ""))
    if "paired" in data:
        lines.append(' "paired": [')
        lines += [f"  {one(f)}" + ("," if j < len(data["paired"]) - 1 else "")
                  for j, f in enumerate(data["paired"])]
        lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"
