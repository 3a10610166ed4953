"""`mpstream reproduce --headline` (or `--set FILE`): the figures a reader trusts the project by,
measured again and decided as they come in.

The headline set (docs/data/headline.toml) names, for each published run summary it draws on,
the figures it checks: a condition's metric (its mean, or `ratio:BASE`, its mean over BASE's in
the same run), a tolerance either side of the published value (a fraction of it, or with
`absolute = true` in the metric's unit) and why that width. Each summary's run is repeated for
the conditions its figures name only, under the agreement rule (runner/agreement.py): every
condition takes trials until each figure it carries agrees or disagrees, at most the summary's
`max_trials`. With `budget_h` the set may take that much machine time: the time its early
decisions leave under the budget goes, after the first pass, to the runs whose figures are still
undecided, more rounds each while the budget holds (cheapest round first). The planned time,
printed before the first trial, is the budget, or the caps' machine time without one.

OUT/headline.json holds every figure's published value, band, new mean and interval, decision
and trials, each summary's machine time beside its published run's fixed count, and the
commit, date and load: docs/reproduction.md's table is generated from a copy of it in
docs/data/ (scripts/docsfigures.py)."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from mpstream import provenance
from mpstream.errors import UserError
from mpstream.runner.agreement import Agreement, Band, FigureCheck, Verdict, collect
from mpstream.runner.cost import Cost, machine_time
from mpstream.runner.reproduce import DATA_DIR, RunCommand, figure, run_seconds

HEADLINE_SET = DATA_DIR / "headline.toml"


@dataclass(frozen=True)
class HeadlineFigure:
    """One figure of the set: what it checks and the band it must fall in."""

    seed: str
    claim: str
    check: FigureCheck
    published: float
    tolerance: float
    absolute: bool
    why: str

    @property
    def name(self) -> str:
        return f"{self.check.condition} {self.check.metric} {self.check.what}"


@dataclass(frozen=True)
class HeadlineRun:
    """A published summary's run, repeated for the conditions its figures name."""

    summary: Path
    command: RunCommand
    published: dict[str, Any]
    figures: tuple[HeadlineFigure, ...]
    max_trials: int

    @property
    def conditions(self) -> list[str]:
        """The condition labels the figures are of (a group `label/player` is its label's)."""
        carriers = (c for f in self.figures for c in f.check.carriers)
        return list(dict.fromkeys(c.split("/")[0] for c in carriers))

    @property
    def rule(self) -> Agreement:
        return Agreement(tuple(f.check for f in self.figures), self.max_trials)

    def cost(self, rounds: int | None = None) -> Cost:
        """The machine time of `rounds` rounds (its cap's by default), at the published run's
        own time a trial."""
        run = self.published["run"]
        span = run_seconds(run) or 0.0
        # A condition run for each player is as many trials a round as it has groups.
        groups = [c for c in self.published["conditions"] if c["label"] in self.conditions]
        trials = len(groups) * (self.max_trials if rounds is None else rounds)
        return Cost(trials, span / run["trials"], "the published run's own time a trial")


@dataclass(frozen=True)
class HeadlineSet:
    """The runs of a set, and the machine time it may take (None: its caps')."""

    runs: tuple[HeadlineRun, ...]
    budget_s: float | None = None

    def caps_seconds(self) -> float:
        return sum(r.cost().seconds for r in self.runs)


def load_set(path: Path = HEADLINE_SET) -> HeadlineSet:
    """The headline set at `path`; a UserError that names the entry and what is wrong."""
    if not path.is_file():
        raise UserError(f"no headline set {path}: give a TOML file of [[run]] entries "
                        "(docs/data/headline.toml is the project's)")
    try:
        spec = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None
    runs = tuple(_run_of(entry, path) for entry in spec.get("run", []))
    if not runs:
        raise UserError(f"{path} names no [[run]]: nothing to reproduce")
    budget = spec.get("budget_h")
    caps = HeadlineSet(runs).caps_seconds()
    if budget is None:
        return HeadlineSet(runs)
    if isinstance(budget, bool) or not isinstance(budget, int | float) or budget * 3600 < caps:
        raise UserError(f"{path}: budget_h {budget!r}: give the hours the set may take, at least "
                        f"its caps' {caps / 3600:.2f} h")
    return HeadlineSet(runs, float(budget) * 3600)


def _run_of(entry: dict[str, Any], path: Path) -> HeadlineRun:
    where = f"{path}: run {entry.get('summary')!r}"
    summary = DATA_DIR / f"{entry.get('summary')}.json"
    if not summary.is_file():
        raise UserError(f"{where}: no summary {summary}")
    published = json.loads(summary.read_text())
    command = RunCommand.parse(published["run"].get("command") or "")
    if command is None or published["run"].get("of_run"):
        raise UserError(f"{where}: made by `{published['run'].get('command')}`, not by a run "
                        "alone: a headline figure is one `mpstream run` gives")
    figures = tuple(_figure_of(f, entry, published, where) for f in entry.get("figure", []))
    if not figures:
        raise UserError(f"{where}: names no [[run.figure]]")
    max_trials = int(entry.get("max_trials", 5))
    if max_trials < 3:
        raise UserError(f"{where}: max_trials {max_trials}: a condition takes at least 3 "
                        "trials before a figure can be decided")
    return HeadlineRun(summary, command, published, figures, max_trials)


def _figure_of(f: dict[str, Any], entry: dict[str, Any], published: dict[str, Any],
               where: str) -> HeadlineFigure:
    missing = [k for k in ("condition", "metric", "tolerance", "why") if k not in f]
    if missing:
        raise UserError(f"{where}: a figure lacks {', '.join(missing)}")
    what = f.get("what", "mean")
    value = figure(published, f["condition"], f["metric"], what)[0]
    if value is None:
        raise UserError(f"{where}: the summary has no {f['condition']} {f['metric']} {what}")
    absolute = bool(f.get("absolute", False))
    band = Band.around(value, float(f["tolerance"]), absolute)
    return HeadlineFigure(entry.get("seed", ""), entry.get("claim", ""),
                          FigureCheck(f["condition"], f["metric"], what, band), value,
                          float(f["tolerance"]), absolute, f["why"])


def print_plan(chosen: HeadlineSet, console: Console) -> dict[str, Any]:
    """Each run's conditions, cap and machine time, and the set's; returns them as JSON."""
    for run in chosen.runs:
        console.print(f"{run.summary.stem}: {len(run.figures)} figure(s) of "
                      f"{', '.join(run.conditions)}, at most {run.max_trials} trials a "
                      f"condition: {run.cost()}", highlight=False, soft_wrap=True)
    caps = chosen.caps_seconds()
    total = chosen.budget_s if chosen.budget_s is not None else caps
    rest = ("" if chosen.budget_s is None else
            f"; what that leaves of the caps' {caps / 3600:.2f} h goes to the figures still "
            "undecided after them")
    console.print(f"planned: {sum(len(r.figures) for r in chosen.runs)} figures, at most about "
                  f"{machine_time(total)} of machine time ({total / 3600:.2f} h); each condition "
                  f"stops once its figures are decided{rest}", highlight=False, soft_wrap=True)
    return {"runs": {r.summary.stem: r.cost().as_json() for r in chosen.runs},
            "caps_seconds": round(caps), "machine_seconds": round(total)}


def reproduce_headline(chosen: HeadlineSet, out_dir: Path, *, cluster: str | None,
                       console: Console) -> dict[str, Any]:
    """Runs each summary's conditions until their figures are decided, then spends what the
    budget has left on the undecided ones; writes and returns OUT/headline.json. A folder
    reproduced before resumes where it stopped."""
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = list(chosen.runs)
    done: list[dict[str, Any]] = []
    for run in runs:
        done.append(_reproduce_run(run, out_dir, cluster, console))
        _write(done, out_dir)  # after each: a long set shows how far it got
    if chosen.budget_s is not None:
        _spend_the_rest(runs, done, chosen.budget_s, out_dir, cluster, console)
    said = _write(done, out_dir)
    for row in said["figures"]:
        if row["decision"] != "agrees":
            console.print(f"[red]{row['decision']}:[/] {row['summary']} {row['figure']}: "
                          f"published {row['published']:.4g}, band [{row['band'][0]:.4g}, "
                          f"{row['band'][1]:.4g}], now {row['new_mean']:.4g} in "
                          f"[{row['new_low']:.4g}, {row['new_high']:.4g}]", highlight=False)
    console.print(f"{said['agree']} of {len(said['figures'])} headline figures agree, "
                  f"{said['disagree']} disagree, {said['undecided']} undecided: "
                  f"{out_dir / 'headline.json'}")
    return said


def extensions(runs: list[HeadlineRun], done: list[dict[str, Any]], budget_s: float
               ) -> dict[int, int]:
    """The rounds each run still undecided gets from what the budget has left: runs by the
    cost of a round, cheapest first, each as many rounds as it had (doubling its cap) or as the
    rest allows. A run stops taking them once its figures are decided, so a round given is a
    round at most."""
    left = budget_s - sum(d["seconds"] for d in done)
    undecided = [i for i, d in enumerate(done)
                 if any(f["decision"] == "undecided" for f in d["figures"])]
    per_round = {i: _round_seconds(runs[i], done[i]) for i in undecided}
    given: dict[int, int] = {}
    for i in sorted(undecided, key=per_round.__getitem__):
        rounds = min(runs[i].max_trials, int(left // per_round[i])) if per_round[i] > 0 else 0
        if rounds > 0:
            given[i] = rounds
            left -= rounds * per_round[i]
    return given


def _round_seconds(run: HeadlineRun, done: dict[str, Any]) -> float:
    """A round's machine time: its trials, each at the published run's time a trial or at what
    this run's trials took, whichever is longer, so that the budget holds."""
    cost = run.cost(1)
    took = done["seconds"] / done["trials"] if done.get("trials") else 0.0
    return cost.trials * max(cost.seconds_a_trial, took)


def _spend_the_rest(runs: list[HeadlineRun], done: list[dict[str, Any]], budget_s: float,
                    out_dir: Path, cluster: str | None, console: Console) -> None:
    """The first pass's undecided runs, each resumed once with the rounds `extensions` gives
    it, the first in its order first; what a run leaves unspent (it decided before its new cap)
    is counted again for the next."""
    extended: set[int] = set()
    while True:
        given = [(i, n) for i, n in extensions(runs, done, budget_s).items() if i not in extended]
        if not given:
            return
        i, rounds = given[0]
        extended.add(i)
        runs[i] = replace(runs[i], max_trials=runs[i].max_trials + rounds)
        console.print(f"[bold]{runs[i].summary.stem}[/]: undecided; up to {rounds} more "
                      f"round(s) from the budget", highlight=False)
        done[i] = _reproduce_run(runs[i], out_dir, cluster, console)
        _write(done, out_dir)


def _reproduce_run(run: HeadlineRun, out_dir: Path, cluster: str | None,
                   console: Console) -> dict[str, Any]:
    """Runs (or resumes) one summary's conditions under the agreement rule, summarizes the new
    run into OUT/summaries/, and returns its figures' verdicts with the run's time and load
    (from its trials' own span: a resumed run counts the trials it ran before)."""
    from mpstream.runner.layout import RUN_JSON, read_json
    from mpstream.runner.report.summary import write_summary
    from mpstream.runner.report.table import report_and_print
    from mpstream.runner.run import StopWatch, failed_trials, run_scenario
    from mpstream.runner.scenario import load_scenario

    scenario = load_scenario(run.command.scenario)
    run_dir = out_dir / "runs" / run.summary.stem
    console.print(f"[bold]{run.summary.stem}[/]: {', '.join(run.conditions)} until "
                  f"{len(run.figures)} figure(s) are decided", highlight=False)
    statuses = run_scenario(scenario, run_dir, console=console,
                            cluster=cluster or run.command.cluster, only=run.conditions,
                            until=run.rule)
    new = out_dir / "summaries" / run.summary.name
    write_summary(report_and_print(run_dir, None, console), read_json(run_dir / RUN_JSON), new)
    made = json.loads(new.read_text())["run"]
    finished = StopWatch(run_dir, scenario, run.conditions, run.rule).finished()
    verdicts = run.rule.verdicts(*collect((group, row) for _, group, row in finished))
    return {"summary": run.summary.stem, "run_dir": str(run_dir), "new_summary": str(new),
            "seconds": round(trial_seconds(run_dir), 1),
            "load_avg_1m": made.get("load_avg_1m"), "environment": made.get("environment"),
            "conditions": run.conditions, "trials": len(finished),
            # The fixed count it replaces: the published run's trials of those conditions.
            "fixed_trials": sum(c["trials_ok"] + c["trials_failed"]
                                for c in run.published["conditions"]
                                if c["label"] in run.conditions),
            "failed_trials": failed_trials(run_dir, statuses),
            "figures": [_row(run, f, v) for f, v in zip(run.figures, verdicts, strict=True)]}


def trial_seconds(run_dir: Path) -> float:
    """The machine time a run's trials took, each from its start to its end: a run resumed later
    (the budget's rounds after the first pass) counts its trials, not the wait between them."""
    from mpstream.runner.layout import load_trials

    def took(started: str | None, finished: str | None) -> float:
        if not started or not finished:
            return 0.0
        return (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()

    return sum(took(t.record.started_at, t.record.finished_at) for t in load_trials(run_dir))


def _row(run: HeadlineRun, f: HeadlineFigure, v: Verdict) -> dict[str, Any]:
    def num(x: float) -> float | None:
        return None if x != x or x in (float("inf"), float("-inf")) else round(x, 6)

    return {"summary": run.summary.stem, "seed": f.seed, "claim": f.claim, "figure": f.name,
            "condition": f.check.condition, "metric": f.check.metric, "what": f.check.what,
            "published": f.published, "tolerance": f.tolerance, "absolute": f.absolute,
            "band": [num(f.check.band.low), num(f.check.band.high)], "why": f.why,
            "new_mean": num(v.mean), "new_low": num(v.low), "new_high": num(v.high),
            "decision": v.decision, "trials": v.trials,
            "fixed_trials": run.published["run"].get("trials_per_condition")}


def _write(done: list[dict[str, Any]], out_dir: Path) -> dict[str, Any]:
    figures = [row for run in done for row in run["figures"]]
    said = {"date": datetime.now(UTC).strftime("%Y-%m-%d"),
            # The code and machine the trials ran on: the first run's (a resumed set may
            # be finished by a later commit, which ran no trial).
            "environment": done[0].get("environment") or provenance.environment(),
            "machine_seconds": round(sum(r["seconds"] for r in done)),
            "agree": sum(1 for r in figures if r["decision"] == "agrees"),
            "disagree": sum(1 for r in figures if r["decision"] == "disagrees"),
            "undecided": sum(1 for r in figures if r["decision"] == "undecided"),
            "failed_trials": sum(len(r["failed_trials"]) for r in done),
            "runs": [{k: v for k, v in r.items() if k != "figures"} for r in done],
            "figures": figures}
    (out_dir / "headline.json").write_text(json.dumps(said, indent=1) + "\n")
    return said
