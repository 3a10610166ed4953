"""A run's summary for the docs (docs/data/<run>.json): per condition, the trials that ran and
each metric's n, mean, sd and 95% interval, and what made the run (its command, the code's
commit, the kernel, the cores, the machine's load). Kilobytes where the run folder holds
megabytes, so that every figure the docs quote can be checked in and checked
(scripts/docsfigures.py). A benchmark under bench/ writes its figures in the same form
(`--summary`), each of its modes a condition."""

from __future__ import annotations

import json
import math
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mpstream import provenance
from mpstream.errors import UserError
from mpstream.qoe.stats import Summary, summarize
from mpstream.runner.layout import RUN_JSON, RunScenario, load_trials, read_json
from mpstream.runner.record import TrialRecord
from mpstream.runner.report.build import Report, metric_label
from mpstream.runner.scenario import condition_of_key
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


def _num(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(f"{x:.{DIGITS}g}")


def _metric(name: str, s: Summary) -> dict[str, Any]:
    return {"unit": metric_label(name)[1], "n": s.n, "mean": _num(s.mean), "sd": _num(s.sd),
            "ci95": [_num(s.ci_low), _num(s.ci_high)]}


def _load_span(loads: list[float]) -> dict[str, float] | None:
    """The least, median and most of the load averages sampled while a run or bench ran."""
    if not loads:
        return None
    return {"min": min(loads), "median": statistics.median(loads), "max": max(loads)}


def _planned_conditions(run: dict[str, Any]) -> list[str] | None:
    """The conditions the run is a run of, in the scenario's order: those its `--condition`s
    chose (run.json's `chosen`), else all its plan holds; None for a run folder with no plan."""
    plan = run.get("plan")
    if not plan:
        return None
    labels = [str(c["label"]) for c in RunScenario.of(run).conditions]
    found = run.get("chosen") or {condition_of_key(str(key), labels) for key in plan}
    return [label for label in labels if label in found]


def _planned_trials(run: dict[str, Any]) -> int | None:
    """How many trials the run is to have: those of its plan in the conditions it is a run of."""
    chosen = _planned_conditions(run)
    if chosen is None:
        return None
    labels = [str(c["label"]) for c in RunScenario.of(run).conditions]
    return sum(1 for key in run["plan"] if condition_of_key(str(key), labels) in chosen)


def _command(run: dict[str, Any], ran: list[str]) -> str:
    """The `mpstream run` that made the trials: with `--condition` for each condition the run
    is a run of when that is not all of the scenario's (`_planned_conditions`; else for each
    condition that ran), and the
    `--cluster` the run was given. A run stopped part way is still the whole run's command; the
    summary's `planned` says how far it got."""
    spec = run.get("scenario_spec") or {}
    cmd = f"mpstream run {RunScenario.of(run).name}"
    if run.get("until"):
        until = Until.from_json(run["until"])
        cmd += f" --until {until.text()} --max-trials {until.max_trials}"
    elif run.get("trials") and run.get("trials") != spec.get("trials"):
        cmd += f" --trials {run['trials']}"
    chosen = _planned_conditions(run) or ran
    if set(chosen) < {c["label"] for c in RunScenario.of(run).conditions}:
        cmd += "".join(f" --condition {label}" for label in dict.fromkeys(chosen))
    if run.get("cluster"):
        cmd += f" --cluster {run['cluster']}"
    return cmd


def _deployment_of(records: list[Any]) -> str | None:
    """The deployment the condition's trials ran (the first that says; older runs: none)."""
    return next((r.record.deployment for r in records if r.record.deployment), None)


def _provenance(record: TrialRecord | None) -> dict[str, float | None]:
    """A trial's load at its start and its own time, set-up included (a resumed run's span
    from first start to last end also counts its pause; this does not)."""
    if record is None:
        return {"load_avg_1m": None, "elapsed_s": None}
    return {"load_avg_1m": record.load_avg_1m, "elapsed_s": record.elapsed_s}


def stop_states(report: Report, run: dict[str, Any]) -> dict[str, ConditionState]:
    """Where each condition of a run that stops when sure stood at its end (none for a run of
    a fixed count)."""
    if not run.get("until"):
        return {}
    until = Until.from_json(run["until"])
    figure = {t["key"]: t.get(until.metric) for rows in report.per_trial.values() for t in rows}
    return states_of(until, ((r.record.condition.label, figure.get(r.key)) for r in report.trials),
                     RunScenario.of(run).baseline)


def run_summary(report: Report, run: dict[str, Any], run_id: str) -> dict[str, Any]:
    records = report.trials
    stopped = stop_states(report, run)
    loads = [r.record.load_avg_1m for r in records if r.record.load_avg_1m is not None]
    by_label = {c["label"]: c for c in RunScenario.of(run).conditions}
    conditions = []
    for group in report.groups:
        label = group.condition
        cond = by_label.get(label, {})
        # The group's own trials (a condition played with two adaptation rules is two groups).
        mine = [r for r in records if report.group_of_trial.get(r.key) == group]
        metrics = {m: _metric(m, s) for m, s in report.summaries.get(group, {}).items()
                   if s.n > 0}
        load = summarize(r.record.load_avg_1m for r in mine if r.ok)
        if load.n:
            metrics["load_avg_1m"] = {**_metric("load_avg_1m", load), "unit": ""}
        record_of = {r.key: r.record for r in mine}
        trials = [{"key": t["key"], **_provenance(record_of.get(t["key"])),
                   **{m: _num(t[m]) for m in PER_TRIAL if m in t}}
                  for t in report.per_trial.get(group, [])]
        conditions.append({
            "group": group, "label": label,
            **{k: cond.get(k) for k in ("profile", "transport", "scheduler", "path_policy")},
            "deployment": _deployment_of(mine),
            "set": cond.get("set") or {},
            "trials_ok": sum(1 for r in mine if r.ok),
            "trials_failed": sum(1 for r in mine if not r.ok),
            **({"stop_reason": stopped[label].stop_reason} if label in stopped else {}),
            "metrics": metrics,
            "trials": trials,
        })
    started = [r.record.started_at for r in records]
    finished = [r.record.finished_at for r in records if r.record.finished_at]
    return {
        "format": FORMAT,
        "run": {
            "id": run_id, "scenario": RunScenario.of(run).name,
            "command": _command(run, [str(c["label"]) for c in conditions]),
            "trials_per_condition": run.get("trials"),
            # A run that stopped each condition when sure: the rule, and that its intervals
            # are anytime-valid ones (mpstream.qoe.stats.anytime_summary).
            **({"until": Until.from_json(run["until"]).text(), "intervals": "anytime-valid"}
               if run.get("until") else {}),
            "trials": len(records), "ok": sum(1 for r in records if r.ok),
            "planned": _planned_trials(run),
            # Whether its trials captured packets (--pcap): a capture costs CPU that a
            # two-core machine's timings show, so figures of runs that did and did not are not
            # to be set side by side unchecked.
            "pcap": bool(run.get("pcap")),
            "started": min(started) if started else None,
            "finished": max(finished) if finished else None,
            "environment": run.get("environment"),
            "load_avg_1m": _load_span(loads),
            "overhead_s_a_trial": _run_overhead(records, started, finished),
        },
        "conditions": conditions,
    }


def _run_overhead(records: list[Any], started: list[str], finished: list[str]) -> float | None:
    """The run's wall clock a trial less its playback: what a trial costs beyond the seconds
    it plays, counting what the run does between trials too (a process started, a rule
    evaluated); None when a trial did not record its playback."""
    played = [r.record.playback_s for r in records]
    if not records or not finished or any(p is None for p in played):
        return None
    wall = (datetime.fromisoformat(max(finished))
            - datetime.fromisoformat(min(started))).total_seconds()
    return _num((wall - sum(played)) / len(records))


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
        data = self.summary(out.stem, script_command(argv, "bench"), rounds, units,
                            derived or {})
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dumps(data))
        return out

    def summary(self, run_id: str, command: str, rounds: dict[str, list[dict[str, float]]],
                units: dict[str, str], derived: dict[str, dict[str, float]]) -> dict[str, Any]:
        conditions = figure_conditions(rounds, units, derived)
        env = provenance.environment()
        loads = [x for x in (self.load_at_start, provenance.load_avg_1m()) if x is not None]
        return {
            "format": FORMAT,
            "run": {"id": run_id, "scenario": None, "command": command,
                    "trials_per_condition": max((len(r) for r in rounds.values()), default=0),
                    "started": self.started, "finished": datetime.now(UTC).isoformat(),
                    "environment": env,
                    "load_avg_1m": _load_span(loads)},
            "conditions": conditions,
        }


def figure_conditions(rows: dict[str, list[dict[str, Any]]], units: dict[str, str],
                      derived: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """A summary's conditions from figures given per round or per trial (a condition's label ->
    one dict of figures each, with the trial's "key" when it is a trial): each figure's unit,
    n, mean, median, sd and 95% interval, and `derived` figures (computed from those: a ratio,
    a correlation) with n 1; every round's or trial's figures beside, for min and max."""
    def metric(name: str, values: list[float]) -> dict[str, Any]:
        s = summarize(values)
        kept = [v for v in values if v is not None and not math.isnan(v)]
        return {"unit": units.get(name, ""), "n": s.n, "mean": _num(s.mean),
                "median": _num(statistics.median(kept)) if kept else None,
                "sd": _num(s.sd), "ci95": [_num(s.ci_low), _num(s.ci_high)]}

    conditions = []
    for label in dict.fromkeys([*rows, *derived]):
        given = rows.get(label, [])
        names = list(dict.fromkeys(k for row in given for k in row if k != "key"))
        metrics = {k: metric(k, [row.get(k, math.nan) for row in given]) for k in names}
        metrics.update({k: metric(k, [v]) for k, v in derived.get(label, {}).items()})
        conditions.append({"group": label, "label": label, "metrics": metrics, "trials": [
            {"key": row.get("key", f"round {i}"),
             **{k: _num(v) for k, v in row.items() if k != "key"}}
            for i, row in enumerate(given)]})
    return conditions


def write_analysis(run_dir: Path, argv: list[str], rows: dict[str, list[dict[str, Any]]],
                   units: dict[str, str], derived: dict[str, dict[str, float]],
                   out: Path) -> Path:
    """Figures a script computes per trial from a run folder, beyond the report's
    (scripts/penalty_figures.py), written as a summary: per condition each figure over the
    trials and each trial's own; `argv` is the script's command line, and the run's provenance (the
    `mpstream run` that made it, its commit, kernel, dates and load) comes from the folder."""
    run = read_json(Path(run_dir) / RUN_JSON)
    if run is None:
        raise UserError(f"{run_dir} is not a run folder (it has no {RUN_JSON}): give the folder "
                        "`mpstream run --out` wrote")
    # The trials the figures came from, by key: a row's label may be a report group
    # (condition/rule), not a condition.
    keys = {t["key"] for trials in rows.values() for t in trials if "key" in t}
    records = [r for r in load_trials(Path(run_dir)) if r.key in keys]
    loads = [r.record.load_avg_1m for r in records if r.record.load_avg_1m is not None]
    finished = [r.record.finished_at for r in records if r.record.finished_at]
    out = Path(out)
    data = {
        "format": FORMAT,
        "run": {
            "id": out.stem, "scenario": RunScenario.of(run).name,
            "command": script_command(argv, "scripts", Path(run_dir)),
            "of_run": _command(run, [r.condition for r in records]),
            "trials_per_condition": run.get("trials"),
            "started": min((r.record.started_at for r in records), default=None),
            "finished": max(finished, default=None),
            "environment": run.get("environment"),
            "load_avg_1m": _load_span(loads),
        },
        "conditions": figure_conditions(rows, units, derived),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(data))
    return out


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
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(run_summary(report, run, out.stem)))
    return out


def dumps(data: dict[str, Any]) -> str:
    """JSON with one line per metric: a diff of two summaries reads figure by figure."""
    def one(x: Any) -> str:
        return json.dumps(x, separators=(", ", ": "))

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
    lines += [" ]", "}"]
    return "\n".join(lines) + "\n"
