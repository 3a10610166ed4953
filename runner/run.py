"""`mpstream run`: every condition × player × trial of a scenario, raw data kept per trial.

The run plans the trials (a seeded interleaving of the conditions, runner/scenario.py), checks
once what every trial needs (what the workload and each condition's network say they need),
has the workload prepare its inputs (the media, or a live stream), writes the plan to run.json
and then runs each trial as `mpstream trial RUN_DIR --key KEY` (runner/trial.py) in a process of
its own (runner/process.py): here, one after another, or with `--cluster` on a cluster's hosts,
one per host at a time (runner/cluster/raytrials.py; `local:N`, hosts in namespaces of this machine:
runner/cluster/local.py). A trial that fails is recorded with its reason and the run goes on; a
trial folder without trial.json (the run was interrupted there) is done again on resume.
"""

from __future__ import annotations

import contextlib
import difflib
import fnmatch
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from mpstream import provenance
from mpstream.errors import EXIT_FAILED, UserError
from mpstream.proc import signals_interrupt
from mpstream.runner.agreement import Agreement
from mpstream.runner.cost import Cost
from mpstream.runner.layout import (
    RUN_JSON,
    RunScenario,
    finished_keys,
    load_trials,
    read_json,
    remove_partial_trials,
    write_json,
)
from mpstream.runner.process import LocalTrials, TrialRunner
from mpstream.runner.record import TrialRecord
from mpstream.runner.scenario import Scenario, Trial, expand_trials
from mpstream.runner.sites import site_class
from mpstream.runner.trial import pair_refusals, plan_json, plan_pairs_json
from mpstream.runner.until import ConditionState, Until, states_of
from mpstream.runner.workloads import workload_for

# Seconds a trial may run past the scenario's duration on a cluster before it is stopped and
# recorded as failed: its network, servers and browser start and stop within it.
TRIAL_MARGIN_S = 180.0

# What stops a condition taking trials: a width it must be sure within (`run --until`), or
# agreement with the published figures it carries (`reproduce --headline`).
StoppingRule = Until | Agreement


def trial_runner(cluster: str | None, margin_s: float = TRIAL_MARGIN_S,
                 balance: bool = False) -> TrialRunner:
    """This machine, a local cluster (`local:N`) or the cluster whose head is at ADDRESS;
    `balance`: whole rounds to hosts, so that each runs every condition equally often."""
    if cluster is None:
        if balance:
            raise UserError("--balance-hosts spreads rounds over a cluster's hosts: give "
                            "--cluster too")
        return LocalTrials()
    from mpstream.runner.cluster.local import LocalClusterTrials, local_hosts

    hosts = local_hosts(cluster)
    if hosts is not None:
        return LocalClusterTrials(hosts, margin_s, balance)
    try:
        from mpstream.runner.cluster.raytrials import RayTrials
    except ImportError as exc:
        from mpstream.runner.cluster.hosts import INSTALL_RAY

        raise UserError(f"--cluster needs Ray ({exc}): {INSTALL_RAY}") from None
    from mpstream.runner.cluster.hosts import saved_node

    # The driver joins the cluster from this machine's own node: its address, when known.
    node = saved_node()
    return RayTrials(cluster, margin_s, node.get("node_address")
                     if node.get("address") == cluster else None, balance)


def refuse_on_cluster(scenario: Scenario, option: str = "--cluster") -> None:
    """Trials bound to this machine cannot move to another host: the workload's or the
    network's say so (runner/workloads/, runner/sites/)."""
    why = workload_for(scenario.kind).bound_here(scenario)
    if why:
        raise UserError(f"scenario {scenario.name!r}: {why}, so its trials cannot move to "
                        f"other hosts: run it without {option}")
    for kind in dict.fromkeys(c.kind for c in scenario.all_conditions()):
        site = site_class(kind)
        if not site.movable:
            bound = [c.label for c in scenario.all_conditions() if c.kind == kind]
            raise UserError(f"scenario {scenario.name!r}: condition(s) {', '.join(bound)} are "
                            f'kind = "{kind}", {site.bound_because}, so their trials cannot '
                            f"move to other hosts: run it without {option}")


def conditions_named(scenario: Scenario, names: list[str]) -> list[str]:
    """The conditions `--condition`s name, in the scenario's order; a name may be a pattern
    (`*-cubic`, a sweep's column). A name that matches none is refused with those there are."""
    labels = [c.label for c in scenario.all_conditions()]
    unknown = [name for name in names
               if not any(fnmatch.fnmatchcase(label, name) for label in labels)]
    if unknown:
        raise UserError(f"scenario {scenario.name!r} has no condition "
                        f"{', '.join(map(repr, unknown))}; its conditions: {', '.join(labels)}")
    return [label for label in labels if any(fnmatch.fnmatchcase(label, name) for name in names)]


def pairs_named(scenario: Scenario, names: list[str]) -> set[str]:
    """The trace pairs `--pair`s name (a name may be a pattern: `*-walk-*`); a name that
    matches none is refused with the pairs there are."""
    pairs = [p.name for p in scenario.pair_list()]
    if not pairs:
        raise UserError(f"--pair: scenario {scenario.name!r} plays no trace pairs (it names no "
                        "`pairs`)")
    unknown = [n for n in names if not any(fnmatch.fnmatchcase(p, n) for p in pairs)]
    if unknown:
        raise UserError(f"scenario {scenario.name!r} has no pair {', '.join(map(repr, unknown))}"
                        f"; its pairs: {', '.join(pairs)}")
    return {p for p in pairs if any(fnmatch.fnmatchcase(p, n) for n in names)}


def chosen_conditions(scenario: Scenario, plan: list[Trial], previous: dict | None,
                      only: list[str] | None, done: dict[str, str]) -> list[str] | None:
    """The conditions a run folder is a run of, over every `mpstream run` into it: None for all
    of its scenario's (once they have all been named, `--condition '*'`, or one run had no
    `--condition`), else those the `--condition`s named, with the conditions of trials already
    there (a folder from before this was kept)."""
    if not only or (previous and "chosen" in previous and previous["chosen"] is None):
        return None
    before = set((previous or {}).get("chosen") or
                 {t.condition.label for t in plan if t.key in done})
    labels = [c.label for c in scenario.all_conditions()]
    chosen = [label for label in labels if label in before | set(only)]
    return None if chosen == labels else chosen


def as_planned(scenario: Scenario, previous: dict | None, trials: int | None,
               only: list[str] | None, pcap: bool) -> tuple[int, list[str] | None, bool]:
    """The trials per condition, the conditions and the capture a run is to have: what the
    command gives, else what the run folder was planned with (so that a run resumed with
    `mpstream run SCENARIO --out FOLDER` goes on as it began), else the scenario's."""
    if previous is None:
        return trials or scenario.trials, only, pcap
    labels = {c.label for c in scenario.all_conditions()}
    chosen = previous.get("chosen") or []
    before = [label for label in chosen if label in labels]
    if chosen and not before and not only:
        raise UserError(f"the run was of condition(s) {', '.join(chosen)}, which scenario "
                        f"{scenario.name!r} no longer has: name those to run with --condition "
                        "('*' for all)")
    return (trials or previous.get("trials") or scenario.trials, only or before or None,
            pcap or bool(previous.get("pcap")))


def _run_json(scenario: Scenario, scenario_path: Path | None, plan: list[Trial],
              trials: int, media_dir: Path | None, pcap: bool, cluster: str | None = None,
              chosen: list[str] | None = None, until: StoppingRule | None = None) -> dict:
    """run.json: the scenario once (`scenario_spec`, read through layout.RunScenario), the
    plan and what made it (the `--cluster` and the `--condition`s too, for the command and the
    trials planned that a summary names)."""
    return {
        **plan_json(scenario, trials, media_dir, pcap),
        "scenario_file": str(Path(scenario_path).resolve()) if scenario_path else None,
        "plan": [t.key for t in plan],
        **plan_pairs_json(plan),
        "chosen": chosen,
        "environment": provenance.environment(),
        "cluster": cluster,
        "until": until.as_json() if isinstance(until, Until) else None,
        "agreement": until.as_json() if isinstance(until, Agreement) else None,
    }


def preflight(scenario: Scenario) -> None:
    """What every trial needs, checked once: otherwise each trial would fail the same way. The
    workload and each condition's network say what they need."""
    workload = workload_for(scenario.kind)
    conditions = scenario.all_conditions()
    problems = []
    if os.geteuid() != 0:
        problems.append("runs need root (network namespaces): run it with sudo")
    for kind in dict.fromkeys(c.kind for c in conditions):
        problems += site_class(kind).machine_refusals()
    problems += workload.machine_refusals(scenario)
    problems += pair_refusals(scenario)
    transports = set()
    for cond in conditions:
        site, resolved = site_class(cond.kind), scenario.resolved(cond)
        # A scheduler the transport lacks here, refused before any topology.
        refusal = resolved.transport.scheduler_refusal()
        if refusal:
            problems.append(f"condition {cond.label}: {refusal}")
            continue
        refusals = site.refusals(resolved)
        refusals += [r for r in [workload.refusal(scenario, resolved)] if r]
        problems += [f"condition {cond.label}: {r}" for r in refusals]
        transports |= {resolved.transport, *site.other_transports(resolved)}
    for transport in sorted(transports, key=lambda t: t.name):
        problems += transport.machine_refusals()
    for tool in ("ss", "nstat", "stdbuf", *workload.tools):
        if shutil.which(tool) is None:
            problems.append(f"{tool} is missing: run `make setup`")
    if problems:
        raise UserError("cannot run: " + "; ".join(problems))


def run_scenario(scenario: Scenario, out_dir: Path, *, trials: int | None = None,
                 scenario_path: Path | None = None, retry_failed: bool = False,
                 console: Console | None = None, progress: bool = True,
                 pcap: bool = False, cluster: str | None = None,
                 trial_margin_s: float = TRIAL_MARGIN_S, balance_hosts: bool = False,
                 plan_only: bool = False, only: list[str] | None = None,
                 until: StoppingRule | None = None,
                 pairs: list[str] | None = None) -> dict[str, str]:
    """Runs (or resumes) the scenario into out_dir; returns key -> status of every trial.

    `only`: run only the trials of these conditions (labels); the plan keeps them all, so that
    a run folder grows by a condition added to its scenario and its report shows them all.

    `pcap`: keep a header-only packet capture of every trial (trials/<key>/pcap/).
    `cluster`: run the trials on a cluster (its head's ADDRESS, or `local:N`), each stopped
    and recorded as failed once it runs `trial_margin_s` past the scenario's duration; with
    `balance_hosts`, round r on host r mod the number of hosts.
    `plan_only`: prepare the run folder (run.json, the media) and run no trial: they are run
    elsewhere with `mpstream trial` (a batch system's array job).
    `until`: each condition takes trials until it is sure (runner/until.py), at most
    `until.max_trials`.
    `pairs`: run only the trials of these trace pairs (names or patterns), as `only`."""
    if cluster is not None or plan_only:
        refuse_on_cluster(scenario, "--plan-only" if plan_only else "--cluster")
    runner = trial_runner(cluster, trial_margin_s, balance_hosts)
    # SIGTERM tears down like Ctrl-C, and the run stays resumable.
    with signals_interrupt():
        return _run_scenario(scenario, out_dir, trials=trials, scenario_path=scenario_path,
                             retry_failed=retry_failed, console=console, progress=progress,
                             pcap=pcap, runner=None if plan_only else runner, only=only,
                             cluster=cluster, until=until, pairs=pairs)


def _run_scenario(scenario: Scenario, out_dir: Path, *, trials: int | None,
                  scenario_path: Path | None, retry_failed: bool, console: Console | None,
                  progress: bool, pcap: bool = False,
                  runner: TrialRunner | None = None,
                  only: list[str] | None = None, cluster: str | None = None,
                  until: StoppingRule | None = None,
                  pairs: list[str] | None = None) -> dict[str, str]:
    """With no `runner`, only the run folder is prepared."""
    console = console or Console()
    run = plan_run(scenario, out_dir, trials=trials, only=only, pcap=pcap, until=until,
                   retry_failed=retry_failed, pairs=pairs)
    out_dir = run.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    if scenario_path and Path(scenario_path).is_file():
        shutil.copyfile(scenario_path, out_dir / "scenario.toml")
    remove_partial_trials(out_dir)
    todo = run.todo
    if len(todo) < len(run.selected):
        console.print(f"resuming: {len(run.selected) - len(todo)} of {len(run.selected)} "
                      "trials already done")
    if todo:
        preflight(scenario)
    with contextlib.ExitStack() as resources:
        media_dir = workload_for(scenario.kind).prepare(scenario, out_dir, todo, console,
                                                        progress, resources)
        # Written before the first trial: it is the plan each `mpstream trial` reads.
        write_json(out_dir / RUN_JSON, _run_json(
            scenario, scenario_path, run.plan, run.trials_per_condition, media_dir, run.pcap,
            cluster, run.chosen, run.until))
        if runner is None:
            console.print(f"planned: {len(todo)} trial(s) to run, keys in {out_dir / RUN_JSON} "
                          f"(`plan`); each: mpstream trial {out_dir} --key KEY")
            return dict(run.done)
        return _run_trials(scenario, out_dir, run.selected, todo, run.done, scenario_path,
                           console, progress, runner, run.until)


@dataclass(frozen=True)
class PlannedRun:
    """What a run into a folder is to do, decided before anything is written: the trials a
    condition, the conditions, the capture and the stopping rule (the command's, else the
    folder's, else the scenario's), the whole plan, the chosen conditions' trials (`selected`)
    and those of them left to run (`todo`)."""

    scenario: Scenario
    out_dir: Path
    trials_per_condition: int
    only: list[str] | None
    pcap: bool
    until: StoppingRule | None
    plan: list[Trial]
    selected: list[Trial]
    todo: list[Trial]
    done: dict[str, str]
    chosen: list[str] | None

    def cost(self) -> Cost:
        """The machine time of the trials left; with `until`, of its cap."""
        return Cost.of_trials(len(self.todo), self.scenario.duration_s)

    def conditions(self) -> list[str]:
        return list(dict.fromkeys(t.condition.label for t in self.selected))

    def describe(self) -> list[str]:
        """The plan and its machine time, as a person reads them before the first trial."""
        labels = self.conditions()
        before = len(self.selected) - len(self.todo)
        lines = [f"plan: {len(self.todo)} trial(s) to run in {self.out_dir}"
                 + (f" ({before} of {len(self.selected)} already done)" if before else "")
                 + f": {', '.join(labels)}, {len(self.selected) // max(1, len(labels))} "
                   "trial(s) a condition",
                 f"time: {self.cost()}"]
        if self.until is not None:
            rule = f"--until {self.until.text()}" if isinstance(self.until, Until) \
                else self.until.text()
            lines.append(f"  at most: {rule} stops each condition once "
                         f"it is sure, and the time counts its cap, {self.until.max_trials} "
                         "trials a condition")
        return lines

    def as_json(self) -> dict[str, Any]:
        return {"run_dir": str(self.out_dir), "scenario": self.scenario.name,
                "conditions": self.conditions(),
                "trials_per_condition": self.trials_per_condition,
                "until": self.until.text() if self.until else None,
                "planned": len(self.selected), "to_run": len(self.todo),
                "done_before": len(self.selected) - len(self.todo),
                "estimate": self.cost().as_json()}


def plan_run(scenario: Scenario, out_dir: Path, *, trials: int | None = None,
             only: list[str] | None = None, pcap: bool = False, until: StoppingRule | None = None,
             retry_failed: bool = False, pairs: list[str] | None = None) -> PlannedRun:
    """The run's plan, from the scenario, the command and what the folder already holds; it
    writes nothing (`run --dry-run` prints it). `pairs`: only these trace pairs' trials."""
    if only:
        only = conditions_named(scenario, only)
    chosen_pairs = pairs_named(scenario, pairs) if pairs else None
    # Absolute: the servers of a trial run from their own working directories.
    out_dir = Path(out_dir).resolve()
    # An input the scenario names that cannot be used is refused before the run folder exists.
    workload_for(scenario.kind).check_inputs(scenario)
    previous = read_json(out_dir / RUN_JSON)
    ran = RunScenario.of(previous).name if previous else None
    if previous and ran != scenario.name:
        raise UserError(f"{out_dir} holds a run of scenario {ran!r}, not {scenario.name!r}; "
                        "give another --out folder")
    n, only, pcap = as_planned(scenario, previous, trials, only, pcap)
    if until is None and previous and previous.get("until"):
        until = Until.from_json(previous["until"])  # resumed: it goes on as it began
    if isinstance(until, Until):
        check_until(scenario, until)
    if until is not None:
        n = until.max_trials
    plan = expand_trials(scenario, n)
    done = finished_keys(out_dir)
    chosen = chosen_conditions(scenario, plan, previous, only, done)
    selected = [t for t in plan if (not only or t.condition.label in only)
                and (chosen_pairs is None or (t.pair is not None and t.pair.name in chosen_pairs))]
    todo = [t for t in selected
            if t.key not in done or (retry_failed and done[t.key] == "failed")]
    return PlannedRun(scenario, out_dir, n, only, pcap, until, plan, selected, todo, done,
                      chosen)


def failed_trials(out_dir: Path, keys: Iterable[str]) -> dict[str, str]:
    """Key -> reason of each trial of `keys` that failed, from its record."""
    wanted = set(keys)
    return {t.key: t.record.reason for t in load_trials(out_dir) if t.key in wanted and not t.ok}


def trials_failed(out_dir: Path, failed: dict[str, str], of: int) -> UserError:
    """What a run whose trials `failed` ends with: exit 1, its trials' folders kept."""
    key, reason = next(iter(failed.items()))
    return UserError(f"{len(failed)} of {of} trial(s) failed, each kept in {out_dir}/trials/ "
                     f"(the first, {key}: {reason[:300]})", exit_code=EXIT_FAILED)


def check_until(scenario: Scenario, until: Until) -> None:
    """A metric no trial gives, or a ratio without a baseline, refused before any trial."""
    from mpstream.runner.metrics.metric import declared_names, is_declared

    if not is_declared(until.metric):
        close = difflib.get_close_matches(until.metric, declared_names(), n=4)
        raise UserError(f"--until {until.text()}: no figure {until.metric!r}"
                        + (f"; did you mean {', '.join(close)}?" if close else
                           "; the report's CSV files name every figure a trial gives"))
    if until.ratio and scenario.baseline is None:
        raise UserError(f"--until {until.text()}: a width with x is of the ratio to the "
                        f"scenario's baseline condition, and scenario {scenario.name!r} names "
                        "none: add baseline = \"LABEL\" to it, or give the width in the "
                        "metric's unit")


class StopWatch:
    """The stopping rule's view of a run folder: each finished trial's figures, read once."""

    def __init__(self, out_dir: Path, scenario: Scenario, labels: Iterable[str],
                 rule: StoppingRule):
        self.out_dir, self.scenario, self.rule = out_dir, scenario, rule
        self.labels = list(dict.fromkeys(labels))
        self.metrics = {rule.metric} if isinstance(rule, Until) else rule.metrics
        self.rows: dict[str, dict[str, float] | None] = {}

    def finished(self) -> list[tuple[str, str, dict[str, float] | None]]:
        """(condition, its group as a summary names it, the figures the rule reads or None for
        a failed trial) of each finished trial of the plan's conditions."""
        from mpstream.runner.layout import load_trials
        from mpstream.runner.metrics.common import n_paths_of, trial_metrics
        from mpstream.runner.metrics.evidence import trial_evidence
        from mpstream.runner.report.analysis import group_of, varying_factors

        records = [r for r in load_trials(self.out_dir)
                   if r.record.condition.label in self.labels]
        n_paths, several = n_paths_of(records), varying_factors(records)
        for rec in records:
            if rec.key not in self.rows:
                self.rows[rec.key] = None
                if rec.ok:
                    row = {**trial_metrics(rec, n_paths), **trial_evidence(rec, n_paths).metrics}
                    self.rows[rec.key] = {m: row[m] for m in self.metrics
                                          if row.get(m) is not None}
        return [(r.record.condition.label, group_of(r, several), self.rows[r.key])
                for r in records]

    def states(self) -> dict[str, ConditionState]:
        rows = self.finished()
        if isinstance(self.rule, Agreement):
            return self.rule.states(rows, self.labels)
        metric = self.rule.metric
        return states_of(self.rule, ((label, (row or {}).get(metric)) for label, _, row in rows),
                         self.scenario.baseline, self.labels)


def _run_trials(scenario: Scenario, out_dir: Path, plan: list[Trial], todo: list[Trial],
                done: dict[str, str], scenario_path: Path | None, console: Console,
                progress: bool, runner: TrialRunner, until: StoppingRule | None = None
                ) -> dict[str, str]:
    statuses = dict(done)
    labels = [t.condition.label for t in plan]
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=not progress) as bar:
        task = bar.add_task("trials", total=len(plan), completed=len(plan) - len(todo))
        running: list[str] = []

        def started(key: str) -> None:
            running.append(key)
            bar.update(task, description=" ".join(running))

        def finished(key: str, record: TrialRecord) -> None:
            if key in running:
                running.remove(key)
            statuses[key] = record.status
            if not record.ok:
                console.print(f"[red]trial {key} failed:[/] {record.reason[:300]}",
                              highlight=False)
            bar.update(task, description=" ".join(running) or "trials")
            bar.advance(task)

        try:
            if until is None:
                runner.run(out_dir, todo, started, finished)
            else:
                _run_until_sure(StopWatch(out_dir, scenario, labels, until), todo, runner,
                                started, finished,
                                lambda left: bar.update(task, total=len(statuses) + left))
        except KeyboardInterrupt:
            bar.stop()
            console.print(f"interrupted during {', '.join(running) or 'the run'}; resume "
                          f"with: mpstream run {scenario_path or scenario.name} --out {out_dir}")
            raise
    if isinstance(until, Until):
        _print_states(StopWatch(out_dir, scenario, labels, until).states(), until,
                      scenario.baseline, console)
    failed = sum(1 for s in statuses.values() if s != "ok")
    console.print(f"{len(statuses)} trials in {out_dir}: {len(statuses) - failed} ok, "
                  f"{failed} failed")
    return statuses


def _run_until_sure(watch: StopWatch, todo: list[Trial], runner: TrialRunner,
                    started: Callable[[str], None], finished: Callable[[str, TrialRecord], None],
                    left: Callable[[int], None]) -> None:
    """Round by round, the trials of the conditions that are not yet sure (all of a round's
    at once, so that a cluster runs them side by side and the order stays interleaved)."""
    for round_ in sorted({t.round for t in todo}):
        open_ = {label for label, s in watch.states().items() if s.stop_reason is None}
        if not open_:
            break
        batch = [t for t in todo if t.round == round_ and t.condition.label in open_]
        left(sum(1 for t in todo if t.round >= round_ and t.condition.label in open_))
        runner.run(watch.out_dir, batch, started, finished)


def _print_states(found: dict[str, ConditionState], until: Until, baseline: str | None,
                  console: Console) -> None:
    for label, s in found.items():
        what = until.metric + (" / baseline" if until.ratio and label != baseline else "")
        console.print(f"{label}: {s.stop_reason or 'open'} after {s.trials} trial(s), "
                      f"{what} in [{s.low:.4g}, {s.high:.4g}] (half-width {s.half_width:.3g}, "
                      f"wanted {until.width:g})", highlight=False)
