"""`mpstream tune SCENARIO --space SPACE`: a search over deployment settings, each candidate
measured by real trials beside the scenario's baseline condition, for several objectives at once.

The out folder is a run folder (run.json, trials/KEY/trial.json): each candidate is a condition
of its own, labelled by its settings (`c` and a hash of them), run beside a copy of the baseline
labelled `LABEL-baseline`, so that each ratio compares trials made side by side. Optuna
(its multi-objective TPE sampler) proposes the candidates and keeps its study in
`DIR/tune.db`; a search killed or interrupted goes on from there, and a candidate's finished
trials are kept by the run folder, so no finished evaluation is repeated.

Objectives: startup delay and per-segment download share as ratios to the baseline's, the
longest stall, and the metered bytes where the network has metered paths. A candidate stops
early (pruned) once its 95% interval (Student's t over its trials so far) is dominated by a
member of the front: at its most favourable it is still worse on every objective.

Written as the search goes: `front.csv` (the Pareto front), `candidates.csv` (every candidate,
with the size of the front after it), `presets/LABEL.toml` (each front member as a deployment
preset, for `play --deployment FILE` or a scenario's `deployment`) and `front.png`.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from mpstream.errors import UserError, warn
from mpstream.output import console_for, json_option, print_json
from mpstream.runner.cost import Cost
from mpstream.runner.layout import finished_keys, read_json, write_json
from mpstream.runner.resolved import ResolvedCondition
from mpstream.runner.scenario import (
    Condition,
    Scenario,
    expand_trials,
    load_scenario,
    parse_scenario,
)
from mpstream.runner.tune.space import (
    CONDITION_SETTINGS,
    Space,
    apply_settings,
    decode,
    load_space,
)

if TYPE_CHECKING:
    from mpstream.runner.report.analysis import Analysis

STUDY = "tune"
TUNE_JSON = "tune.json"


@dataclass(frozen=True)
class Objective:
    name: str
    metric: str  # the per-trial figure it is made of
    ratio: bool  # to the baseline's mean, in the same rounds
    maximize: bool
    goal: float  # the figure the issue of this search aims at (shown beside, never enforced)


OBJECTIVES = (
    Objective("startup_ratio", "startup_delay_ms", True, False, 1.05),
    # The per-segment download rate against the baseline's: on the same capacity, the ratio of
    # the shares of the path sum, also where a path is held back as a backup (whose
    # `download_share` counts only the paths in use).
    Objective("share_ratio", "download_rate_mbps", True, True, 0.95),
    Objective("longest_stall_ms", "longest_stall_ms", False, False, 0.0),
)
METERED = Objective("metered_bytes", "metered_bytes", False, False, 0.0)


@dataclass
class Measured:
    """A candidate's objectives: each value and its interval's bounds (NaN: one trial)."""
    values: list[float]
    low: list[float]
    high: list[float]
    trials: int


def candidate_label(params: dict[str, Any]) -> str:
    """The same settings get the same label, so a resumed search finds their trials."""
    text = json.dumps(params, sort_keys=True)
    return "c" + hashlib.sha1(text.encode()).hexdigest()[:8]


def measure(analysis: Analysis, label: str, objectives: tuple[Objective, ...]
            ) -> Measured | None:
    """The objectives of candidate `label` from the report's analysis of the search's run
    folder: its condition's figures and its baseline copy's; None when either has no
    successful trial."""
    mine = analysis.condition_rows(label)
    base = analysis.condition_rows(f"{label}-baseline")
    if not mine or not base:
        return None
    values, low, high = [], [], []
    for objective in objectives:
        s = analysis.summary(mine, objective.metric)
        scale = 1.0
        if objective.ratio:
            scale = analysis.summary(base, objective.metric).mean
            if not scale or math.isnan(scale):
                return None
        if s.n == 0:
            return None
        values.append(s.mean / scale)
        low.append(s.ci_low / scale)
        high.append(s.ci_high / scale)
    return Measured(values, low, high, len(mine))


def dominates(a: list[float], b: list[float], objectives: tuple[Objective, ...]) -> bool:
    """`a` at least as good as `b` on every objective and better on one."""
    better = False
    for x, y, objective in zip(a, b, objectives, strict=True):
        if objective.maximize:
            x, y = -x, -y
        if x > y:
            return False
        better = better or x < y
    return better


def optimistic(m: Measured, objectives: tuple[Objective, ...]) -> list[float] | None:
    """The most favourable end of each interval; None while some interval is unknown."""
    out = []
    for low, high, objective in zip(m.low, m.high, objectives, strict=True):
        bound = high if objective.maximize else low
        if math.isnan(bound):
            return None
        out.append(bound)
    return out


def pareto_front(points: dict[str, list[float]],
                 objectives: tuple[Objective, ...]) -> list[str]:
    """The labels no other point dominates, in the order given."""
    return [label for label, p in points.items()
            if not any(dominates(q, p, objectives) for other, q in points.items()
                       if other != label)]


class Search:
    """One search's folder, study and candidates."""

    def __init__(self, scenario: Scenario, condition: Condition, space: Space, out_dir: Path,
                 trials: int, cluster: str | None, console: Console):
        import optuna

        self.scenario, self.condition, self.space = scenario, condition, space
        self.out_dir, self.trials, self.cluster, self.console = out_dir, trials, cluster, console
        assert scenario.baseline is not None
        self.baseline = next(c for c in scenario.conditions if c.label == scenario.baseline)
        resolved = scenario.resolved(condition)
        assert resolved.deployment is not None  # an emulated condition's
        self.base = resolved.deployment
        self.objectives = (*OBJECTIVES, METERED) if resolved.paths.metered else OBJECTIVES
        # The run folder's conditions as they resolved, by label: a label is its settings'
        # (and a baseline copy the baseline's), so a candidate's files are read once.
        self.resolved: dict[str, ResolvedCondition] = {}
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        (out_dir / "candidates").mkdir(parents=True, exist_ok=True)
        self.study = optuna.create_study(
            study_name=STUDY, storage=f"sqlite:///{out_dir / 'tune.db'}", load_if_exists=True,
            directions=["maximize" if o.maximize else "minimize" for o in self.objectives],
            sampler=optuna.samplers.TPESampler(seed=scenario.seed, multivariate=True))
        self.distributions = self._distributions()

    def _distributions(self) -> dict[str, Any]:
        """Each setting's distribution, as `sample` asks for it (a trial asked with these
        samples the same way)."""
        import optuna

        out: dict[str, Any] = {}
        for choice in self.space.choices:
            if choice.is_range:
                assert choice.low is not None and choice.high is not None
                if choice.integer:
                    out[choice.name] = optuna.distributions.IntDistribution(
                        int(choice.low), int(choice.high), log=choice.log,
                        step=int(choice.step or 1))
                else:
                    out[choice.name] = optuna.distributions.FloatDistribution(
                        float(choice.low), float(choice.high), log=choice.log, step=choice.step)
            else:
                out[choice.name] = optuna.distributions.CategoricalDistribution(
                    choice.encoded())
        return out

    # ---- the loop -------------------------------------------------------------------------

    def evaluated(self) -> int:
        from optuna.trial import TrialState

        return sum(1 for t in self.study.get_trials(deepcopy=False)
                   if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                   or (t.state == TrialState.FAIL and t.user_attrs.get("evaluated")))

    def resume_stale(self) -> None:
        """A candidate left running by a killed search is asked again, with the same settings
        (so the same label, whose finished trials the run folder kept)."""
        from optuna.trial import TrialState

        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.study.enqueue_trial(t.params, skip_if_exists=False)
            self.study.tell(t.number, state=TrialState.FAIL)  # not evaluated: not counted
            self.console.print(f"resuming candidate {t.user_attrs.get('label', t.number)}")

    def run(self, budget: int) -> None:
        from optuna.trial import TrialState

        self.resume_stale()
        while self.evaluated() < budget:
            trial = self.study.ask(self.distributions)
            values = {c.name: decode(c, trial.params[c.name]) for c in self.space.choices}
            label = candidate_label(values)
            trial.set_user_attr("label", label)
            trial.set_user_attr("settings", values)
            n = self.evaluated() + 1
            self.console.print(f"candidate {n}/{budget}: {label} "
                               + ", ".join(f"{k}={v}" for k, v in values.items()))
            measured, pruned = self.evaluate(label, values)
            if measured is None:
                trial.set_user_attr("evaluated", True)  # ran, and gave no figure
                self.study.tell(trial, state=TrialState.FAIL)
                self.console.print(f"[red]{label}: no successful trial of it or its baseline")
            elif pruned:
                trial.set_user_attr("measured", measured.values)
                self.study.tell(trial, state=TrialState.PRUNED)
                self.console.print(f"{label}: stopped after {measured.trials} trial(s), its "
                                   "interval dominated by the front")
            else:
                self.study.tell(trial, measured.values)
            self.write_outputs()

    def evaluate(self, label: str, values: dict[str, Any]) -> tuple[Measured | None, bool]:
        """Runs the candidate's trials round by round beside its baseline copy; stops early
        when its interval is dominated by the front."""
        from mpstream.runner.report.analysis import analyze
        from mpstream.runner.run import run_scenario

        self._write_candidate(label, values)
        scenario = self._scenario()
        measured = None
        for rounds in range(1, self.trials + 1):
            run_scenario(scenario, self.out_dir, trials=rounds, console=self.console,
                         only=[f"{label}-baseline", label], cluster=self.cluster)
            measured = measure(analyze(self.out_dir), label, self.objectives)
            if measured is not None and rounds < self.trials and self._dominated(measured):
                return measured, True
        return measured, False

    def _dominated(self, measured: Measured) -> bool:
        best = optimistic(measured, self.objectives)
        if best is None:
            return False
        return any(dominates(p, best, self.objectives) for p in self.front().values())

    # ---- candidates as conditions ---------------------------------------------------------

    def _candidate_file(self, label: str) -> Path:
        return self.out_dir / "candidates" / f"{label}.toml"

    def _write_candidate(self, label: str, values: dict[str, Any]) -> None:
        described = "; ".join(f"{k} = {json.dumps(v)}" for k, v in values.items())
        deployment = apply_settings(self.base, values, name=label,
                                    description=f"mpstream tune candidate: {described}")
        path = self._candidate_file(label)
        path.write_text(deployment.to_toml())
        settings = read_json(self.out_dir / TUNE_JSON) or {}
        settings.setdefault("candidates", {})[label] = values
        write_json(self.out_dir / TUNE_JSON, {**settings, **self._describe()})

    def _describe(self) -> dict[str, Any]:
        return {"scenario": self.scenario.name, "condition": self.condition.label,
                "baseline": self.baseline.label, "space": self.space.name,
                "trials": self.trials, "objectives": [o.name for o in self.objectives]}

    def _scenario(self) -> Scenario:
        """The run folder's scenario: each candidate so far beside its baseline copy."""
        candidates = (read_json(self.out_dir / TUNE_JSON) or {}).get("candidates", {})
        conditions = []
        for label, values in candidates.items():
            conditions.append({**self.baseline.model_dump(mode="json", exclude_defaults=True),
                               "label": f"{label}-baseline"})
            own = {k: v for k, v in values.items() if k in CONDITION_SETTINGS}
            conditions.append({**self.condition.model_dump(mode="json", exclude_defaults=True),
                               "label": label, "deployment": str(self._candidate_file(label)),
                               **own})
        raw = self.scenario.model_dump(mode="json", exclude_defaults=True,
                                       exclude={"conditions", "sweep", "baseline"})
        raw.update(name=f"{self.scenario.name}-tune", conditions=conditions)
        scenario = parse_scenario(raw, base_dir=self.scenario.base_dir,
                                  origin=f"the search of {self.scenario.name}",
                                  known=self.resolved)
        self.resolved = {c.label: scenario.resolved(c) for c in scenario.all_conditions()}
        return scenario

    # ---- outputs --------------------------------------------------------------------------

    def completed(self) -> list[Any]:
        from optuna.trial import TrialState

        return [t for t in self.study.get_trials(deepcopy=False)
                if t.state == TrialState.COMPLETE]

    def front(self) -> dict[str, list[float]]:
        points = {t.user_attrs["label"]: list(t.values) for t in self.completed()}
        return {label: points[label] for label in pareto_front(points, self.objectives)}

    def write_outputs(self) -> None:
        front = self.front()
        names = [o.name for o in self.objectives]
        settings = {t.user_attrs["label"]: t.user_attrs["settings"] for t in self.completed()}
        with (self.out_dir / "front.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["label", *names, *self.space.names()])
            for label, values in front.items():
                w.writerow([label, *(f"{v:.6g}" for v in values),
                            *(json.dumps(settings[label][k]) for k in self.space.names())])
        self._write_history(names)
        presets = self.out_dir / "presets"
        presets.mkdir(exist_ok=True)
        for old in presets.glob("*.toml"):
            if old.stem not in front:
                old.unlink()
        for label, values in front.items():
            measured = ", ".join(f"{n} {v:.3g}" for n, v in zip(names, values, strict=True))
            deployment = apply_settings(
                self.base, settings[label], name=label,
                description=f"Found by mpstream tune {self.scenario.name} (condition "
                            f"{self.condition.label}, space {self.space.name}): {measured} "
                            f"against {self.baseline.label}.")
            (presets / f"{label}.toml").write_text(deployment.to_toml())
        _plot_history(self.out_dir, self.objectives)

    def _write_history(self, names: list[str]) -> None:
        """Every candidate in the order evaluated, with the front's size and best figures
        after it: how the front moved with the number of candidates."""
        from optuna.trial import TrialState

        points: dict[str, list[float]] = {}
        with (self.out_dir / "candidates.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["n", "label", "state", *names, "front_size",
                        *[f"best_{n}" for n in names]])
            n = 0
            for t in self.study.get_trials(deepcopy=False):
                if t.state == TrialState.RUNNING or (
                        t.state == TrialState.FAIL and not t.user_attrs.get("evaluated")):
                    continue
                n += 1
                label = t.user_attrs.get("label", "")
                if t.state == TrialState.COMPLETE:
                    points[label] = list(t.values)
                front = pareto_front(points, self.objectives)
                best = [(max if o.maximize else min)((points[f][i] for f in front),
                                                     default=math.nan)
                        for i, o in enumerate(self.objectives)]
                shown = list(t.values) if t.values else t.user_attrs.get("measured") or \
                    [math.nan] * len(names)
                w.writerow([n, label, t.state.name.lower(), *(f"{v:.6g}" for v in shown),
                            len(front), *(f"{v:.6g}" for v in best)])


def _plot_history(out_dir: Path, objectives: tuple[Objective, ...]) -> None:
    """front.png: the best figure on the front after each candidate, per objective, with the
    goal it aims at."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with (out_dir / "candidates.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return
    fig, axes = plt.subplots(1, len(objectives), figsize=(4 * len(objectives), 3.2))
    for ax, objective in zip(axes, objectives, strict=True):
        xs = [int(r["n"]) for r in rows]
        ys = [float(r[f"best_{objective.name}"]) for r in rows]
        ax.step(xs, ys, where="post")
        ax.axhline(objective.goal, color="grey", linestyle=":", label="goal")
        ax.set_xlabel("candidates evaluated")
        ax.set_title(f"best {objective.name} on the front", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_dir / "front.png", dpi=100)
    plt.close(fig)


def front_rows(out_dir: Path) -> list[dict[str, str]]:
    """front.csv's rows: each member's label, objectives and settings (as JSON text)."""
    with (out_dir / "front.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def print_front(out_dir: Path, objectives: tuple[Objective, ...], console: Console) -> None:
    """The front's objectives against their goals; its settings are in front.csv."""
    rows = front_rows(out_dir)
    table = Table(title=f"Pareto front ({out_dir / 'front.csv'}, settings there)")
    table.add_column("preset")
    for objective in objectives:
        table.add_column(f"{objective.name} (goal {'>=' if objective.maximize else '<='} "
                         f"{objective.goal:g})")
    for row in rows:
        table.add_row(f"presets/{row['label']}.toml", *(row[o.name] for o in objectives))
    console.print(table)


def _list_spaces(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--list-spaces, kept for scripts: `mpstream list spaces`, then exit."""
    if not value or ctx.resilient_parsing:
        return
    from mpstream.runner.listing import print_kind

    warn("`mpstream tune --list-spaces` is now `mpstream list spaces`")
    print_kind("spaces")
    ctx.exit()


@click.command()
@click.argument("scenario")
@click.option("--space", "space_ref", required=True, metavar="NAME|FILE",
              help="What the search may change: a shipped space (`mpstream list spaces`) or a "
                   "TOML file.")
@click.option("--condition", "condition_label", default=None, metavar="LABEL",
              help="The condition whose deployment is searched (its network and transport) "
                   "[default: the first that is not the scenario's baseline].")
@click.option("--budget", type=click.IntRange(min=1), default=20, show_default=True,
              help="Candidates to evaluate in all (a resumed search counts those done).")
@click.option("--trials", type=click.IntRange(min=1), default=3, show_default=True,
              help="Trials of each candidate, each beside a trial of the baseline.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="The search's run folder (default: results/tune-<scenario>-"
                                 "<UTC time>); give an existing one to resume it.")
@click.option("--cluster", default=None, metavar="ADDRESS|local:N",
              help="Run the trials on a cluster, as `mpstream run --cluster`.")
@click.option("--dry-run", is_flag=True,
              help="Print the search's plan and its machine time, and run nothing.")
@json_option
@click.option("--list-spaces", is_flag=True, expose_value=False, is_eager=True, hidden=True,
              callback=_list_spaces, help="List the shipped search spaces and exit.")
def tune(scenario: str, space_ref: str, condition_label: str | None, budget: int, trials: int,
         out_dir: Path | None, cluster: str | None, dry_run: bool, as_json: bool) -> None:
    """Search the deployment settings of SCENARIO's condition for the best against the
    scenario's baseline, with real trials: writes DIR/front.csv and each front member as
    DIR/presets/LABEL.toml. Exits 1 when a trial failed."""
    import time

    from mpstream.netem.system import require_cc
    from mpstream.runner.cli import RESULTS_DIR
    from mpstream.runner.run import failed_trials, trials_failed

    console = console_for(as_json)
    sc = load_scenario(scenario)
    cond = _tuned_condition(sc, condition_label)
    base = sc.resolved(cond).deployment
    assert base is not None  # an emulated condition's
    space = load_space(space_ref, base)
    for choice in space.choices:
        if choice.name.endswith(".cc"):
            for value in choice.values:
                require_cc(str(value))
    out_dir = (out_dir or RESULTS_DIR / f"tune-{sc.name}-{time.strftime('%Y%m%dT%H%M%S')}"
               ).resolve()
    before = read_json(out_dir / TUNE_JSON)
    if before and (before.get("scenario"), before.get("condition"), before.get("space")) != (
            sc.name, cond.label, space.name):
        raise UserError(f"{out_dir} holds a search of {before.get('scenario')} "
                        f"{before.get('condition')} over space {before.get('space')}: give "
                        "another --out folder")
    # A search begun before is opened to count what it has done; a new one's folder and study
    # are made only when it runs.
    search = Search(sc, cond, space, out_dir, trials, cluster, console) if before else None
    left = max(0, budget - (search.evaluated() if search else 0))
    cost = search_cost(sc, left, trials)
    console.print(f"plan: {left} candidate(s) of {budget} to evaluate in {out_dir}, each "
                  f"{trials} round(s) beside the baseline {sc.baseline}", highlight=False,
                  soft_wrap=True)
    console.print(f"time: {cost}; at most, as a candidate whose interval the front dominates "
                  "stops early", highlight=False, soft_wrap=True)
    planned = {"out_dir": out_dir, "scenario": sc.name, "condition": cond.label,
               "space": space.name, "budget": budget, "to_evaluate": left,
               "estimate": cost.as_json()}
    if dry_run:
        if as_json:
            print_json({**planned, "dry_run": True})
        return
    search = search or Search(sc, cond, space, out_dir, trials, cluster, console)
    search.run(budget)
    search.write_outputs()
    print_front(out_dir, search.objectives, console)
    console.print(f"presets: {out_dir / 'presets'} (`mpstream play --deployment FILE`)")
    ran = finished_keys(out_dir)
    failed = failed_trials(out_dir, ran)
    if as_json:
        print_json({**planned, "dry_run": False, "evaluated": search.evaluated(),
                    "front": [_front_member(row, search.objectives, out_dir)
                              for row in front_rows(out_dir)],
                    "failed_trials": [{"key": k, "reason": r} for k, r in failed.items()]})
    if failed:
        raise trials_failed(out_dir, failed, len(ran))


def _tuned_condition(sc: Scenario, label: str | None) -> Condition:
    """The emulated condition beside the scenario's baseline that `tune` searches (`label`, or
    the first); a UserError names what the scenario lacks."""
    if sc.baseline is None:
        raise UserError(f"scenario {sc.name} names no baseline: add `baseline = \"LABEL\"` "
                        "(the condition each candidate is compared with, e.g. single-path TCP)")
    others = [c for c in sc.conditions if c.label != sc.baseline]
    if not others:
        raise UserError(f"scenario {sc.name} has no condition beside its baseline to tune")
    cond = next((c for c in others if c.label == (label or others[0].label)), None)
    if cond is None:
        raise UserError(f"--condition {label}: scenario {sc.name} has "
                        + ", ".join(c.label for c in others) + " beside its baseline")
    if cond.kind != "emulated":
        raise UserError(f"condition {cond.label} runs on a real network, whose ends mpstream "
                        "does not change: tune an emulated condition")
    return cond


def search_cost(scenario: Scenario, candidates: int, rounds: int) -> Cost:
    """At most: every candidate's rounds, each a trial of it and one of its baseline copy for
    every player (and browser, codec and rule) the scenario plays."""
    a_round = len(expand_trials(scenario, 1)) // len(scenario.all_conditions())
    return Cost.of_trials(candidates * rounds * 2 * a_round, scenario.duration_s)


def _front_member(row: dict[str, str], objectives: tuple[Objective, ...],
                  out_dir: Path) -> dict[str, Any]:
    return {"label": row["label"], "preset": out_dir / "presets" / f"{row['label']}.toml",
            "objectives": {o.name: float(row[o.name]) for o in objectives},
            "settings": {k: json.loads(v) for k, v in row.items()
                         if k != "label" and k not in {o.name for o in objectives}}}
