"""`mpstream reproduce SUMMARY... | --all`: the docs' figures, measured again with today's code.

Each run summary in docs/data/ records the `mpstream run` that made it. Reproducing it runs that
command again (on this machine or `--cluster`; with `--trials` or `--until` in place of its
count when given), summarizes the new run the same way, and sets each figure the docs quote
from the summary (scripts/docsfigures.py finds them: the numbers tied to it inline and the cells
of the tables generated from it) beside the published one: the published mean and 95% interval,
the new ones, and whether they agree (their intervals overlap; for a ratio of two conditions,
the intervals of the ratio that the two means' intervals give). A figure that no longer agrees
is named with the pages that quote it.

DIR/reproduction.csv has one row a figure, DIR/reproduction.html the same as a page, and
DIR/reproduction.json the machine time each reproduction took beside the published run's.
Nothing in docs/ changes unless `--update` is given: then each new summary replaces the
published one, and `make docs-figures` regenerates the tables (an inline figure that changed
is then reported by `make docs-check`, to be rewritten by hand).

A summary made by a benchmark or a script (bench/, scripts/) has no run to repeat here: its
figures are listed with agree left empty and the command to run by hand."""

from __future__ import annotations

import csv
import html
import importlib.util
import json
import shlex
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from rich.console import Console

from mpstream import provenance
from mpstream.errors import UserError
from mpstream.paths import REPO_ROOT
from mpstream.runner.cost import Cost, machine_time
from mpstream.runner.report.csvfiles import fmt
from mpstream.runner.until import Until

DATA_DIR = REPO_ROOT / "docs" / "data"
COLUMNS = ("summary", "condition", "metric", "figure", "published_mean", "published_low",
           "published_high", "new_mean", "new_low", "new_high", "agree", "tolerance", "pages",
           "published_commit", "new_commit", "published_kernel", "new_kernel", "note")


@dataclass
class RunCommand:
    """The parts of a recorded `mpstream run` command that a reproduction repeats."""

    scenario: str
    trials: int | None = None
    conditions: list[str] = field(default_factory=list)
    cluster: str | None = None
    until: str | None = None
    max_trials: int | None = None

    @classmethod
    def parse(cls, command: str) -> RunCommand | None:
        """None when the command is not an `mpstream run` (a benchmark's, a script's)."""
        argv = shlex.split(command or "")
        if argv[:2] != ["mpstream", "run"] or len(argv) < 3:
            return None
        out = cls(argv[2])
        it = iter(argv[3:])
        for flag in it:
            value = next(it, None)
            if value is None:
                break
            if flag == "--trials":
                out.trials = int(value)
            elif flag == "--condition":
                out.conditions.append(value)
            elif flag == "--cluster":
                out.cluster = value
            elif flag == "--until":
                out.until = value
            elif flag == "--max-trials":
                out.max_trials = int(value)
        return out


@dataclass
class Reproduction:
    """One summary reproduced: where its new run and summary are, and the time it took."""

    summary: str
    command: str
    run_dir: str | None = None
    new_summary: str | None = None
    seconds: float | None = None
    published_seconds: float | None = None
    skipped: str | None = None
    failed_trials: dict[str, str] = field(default_factory=dict)  # key -> reason


def docs_figures() -> ModuleType:
    """scripts/docsfigures.py, the one reader of the docs' figure markers."""
    path = REPO_ROOT / "scripts" / "docsfigures.py"
    if not path.is_file():
        raise UserError(f"{path} is missing: `mpstream reproduce` reads the docs of a checkout "
                        "of mpstream")
    spec = importlib.util.spec_from_file_location("docsfigures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docsfigures"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def summary_files(refs: list[str], every: bool) -> list[Path]:
    if every:
        if refs:
            raise UserError("give summaries or --all, not both")
        return sorted(DATA_DIR.glob("*.json"))
    if not refs:
        raise UserError("give the summaries to reproduce (files in docs/data/, or their names) "
                        "or --all")
    out = []
    for ref in refs:
        path = Path(ref)
        if not path.is_file():
            path = DATA_DIR / (ref if ref.endswith(".json") else f"{ref}.json")
        if not path.is_file():
            raise UserError(f"no run summary {ref!r}: give a file of docs/data/ (e.g. "
                            "docs/data/demo-2026-11-27.json) or its name")
        out.append(path.resolve())
    return out


def run_seconds(run: dict[str, Any]) -> float | None:
    if not run.get("started") or not run.get("finished"):
        return None
    return (datetime.fromisoformat(run["finished"])
            - datetime.fromisoformat(run["started"])).total_seconds()


def reproduction_cost(path: Path, trials: int | None, until: Until | None) -> Cost | None:
    """The machine time of reproducing the summary at `path`: its published run's own time a
    trial, over the trials that run took (or those `trials`, or `until`'s cap, take); None for
    a summary with no run to repeat."""
    run = json.loads(path.read_text())["run"]
    span, n = run_seconds(run), run.get("trials")
    if RunCommand.parse(run.get("command") or "") is None or run.get("of_run") or not span \
            or not n:
        return None
    count = n
    if trials is not None or until is not None:
        runs_a_round = (run.get("planned") or n) / (run.get("trials_per_condition") or n)
        count = round(runs_a_round * (trials or (until.max_trials if until else 1)))
    return Cost(count, span / n, "the published run's own time a trial")


def print_plan(files: list[Path], trials: int | None, until: Until | None,
               console: Console) -> dict[str, Any]:
    """Each summary's machine time and their sum, said before the first trial; returns them
    as `--json` gives them."""
    costs = {path: reproduction_cost(path, trials, until) for path in files}
    for path, cost in costs.items():
        console.print(f"{path.stem}: {cost or 'not a run: its command is run by hand'}",
                      highlight=False, soft_wrap=True)
    total = sum(c.seconds for c in costs.values() if c)
    console.print(f"time: about {machine_time(total)} of machine time in all"
                  + (f", at most: --until {until.text()} counts its cap, {until.max_trials} "
                     "trials a condition" if until else ""), highlight=False, soft_wrap=True)
    return {"summaries": {path.stem: cost.as_json() if cost else None
                          for path, cost in costs.items()}, "machine_seconds": round(total)}


def reproduce_one(path: Path, out_dir: Path, *, trials: int | None, until: Until | None,
                  cluster: str | None, console: Console) -> Reproduction:
    """Runs the summary's command again into OUT/runs/<id>/ and summarizes it into
    OUT/summaries/<id>.json."""
    from mpstream.runner.layout import RUN_JSON, read_json
    from mpstream.runner.report.summary import write_summary
    from mpstream.runner.report.table import report_and_print
    from mpstream.runner.run import failed_trials, run_scenario
    from mpstream.runner.scenario import load_scenario

    published = json.loads(path.read_text())
    command = published["run"].get("of_run") or published["run"].get("command") or ""
    rep = Reproduction(path.stem, command, published_seconds=run_seconds(published["run"]))
    parsed = RunCommand.parse(command)
    if parsed is None or published["run"].get("of_run"):
        rep.skipped = (f"made by `{published['run'].get('command')}`, not by a run alone: run "
                       "it by hand")
        return rep
    scenario = load_scenario(parsed.scenario)
    rule = until
    if rule is None and trials is None and parsed.until:
        rule = Until.parse(parsed.until, parsed.max_trials or scenario.max_trials)
    run_dir = out_dir / "runs" / path.stem
    console.print(f"[bold]{path.stem}[/]: {command}", highlight=False)
    started = time.monotonic()
    statuses = run_scenario(scenario, run_dir, trials=None if rule else trials or parsed.trials,
                            console=console, cluster=cluster or parsed.cluster,
                            only=parsed.conditions or None, until=rule)
    rep.failed_trials = failed_trials(run_dir, statuses)
    report = report_and_print(run_dir, None, console)
    new = out_dir / "summaries" / path.name
    write_summary(report, read_json(run_dir / RUN_JSON), new)
    rep.seconds = round(time.monotonic() - started, 1)
    rep.run_dir, rep.new_summary = str(run_dir), str(new)
    return rep


def _interval(m: dict[str, Any] | None) -> tuple[float | None, float | None, float | None]:
    if not m or m.get("mean") is None:
        return None, None, None
    low, high = (m.get("ci95") or [None, None])[:2]
    return m["mean"], low, high


def _metric(summary: dict[str, Any], label: str, metric: str) -> dict[str, Any] | None:
    for c in summary["conditions"]:
        if label in (c["group"], c["label"]):
            return c["metrics"].get(metric)
    return None


def figure(summary: dict[str, Any], label: str, metric: str, what: str
           ) -> tuple[float | None, float | None, float | None]:
    """The mean and 95% interval of what a quote reads: the metric's, or for ratio:BASE the
    ratio of the means with the interval the two means' intervals give."""
    mean, low, high = _interval(_metric(summary, label, metric))
    if not what.startswith("ratio:") or mean is None:
        return mean, low, high
    b_mean, b_low, b_high = _interval(_metric(summary, what.split(":", 1)[1], metric))
    if not b_mean:
        return None, None, None
    ratio = mean / b_mean
    if None in (low, high, b_low, b_high) or b_low <= 0 or low < 0:  # type: ignore[operator]
        return ratio, None, None
    return ratio, low / b_high, high / b_low  # type: ignore[operator]


def agree(old: tuple[float | None, ...], new: tuple[float | None, ...],
          tolerance: float = 0.0) -> bool | None:
    """Overlapping intervals; with one side's interval missing, the other's holding its mean;
    or the new mean within `tolerance` (relative) of the published one, since an interval from
    one run's trials knows nothing of how runs on other days differ. None when neither has an
    interval and the tolerance does not settle it."""
    (om, ol, oh), (nm, nl, nh) = old, new
    if om is None or nm is None:
        return None
    if tolerance > 0 and abs(nm - om) <= tolerance * abs(om):
        return True
    if None not in (ol, oh, nl, nh):
        return not (nh < ol or oh < nl)  # type: ignore[operator]
    if None not in (ol, oh):
        return ol <= nm <= oh  # type: ignore[operator]
    if None not in (nl, nh):
        return nl <= om <= nh  # type: ignore[operator]
    return None


def rows_of(rep: Reproduction, published_path: Path, figs: ModuleType,
            tolerance: float = 0.0) -> list[dict[str, Any]]:
    published = json.loads(published_path.read_text())
    new = json.loads(Path(rep.new_summary).read_text()) if rep.new_summary else None
    pages: dict[tuple[str, str, str], list[str]] = {}
    for q in figs.quotes(published_path.stem):
        what = q.what if q.what.startswith("ratio:") else "mean"
        pages.setdefault((q.condition, q.metric, what), [])
        if q.page not in pages[(q.condition, q.metric, what)]:
            pages[(q.condition, q.metric, what)].append(q.page)
    old_env = published["run"].get("environment") or {}
    new_env = (new or {}).get("run", {}).get("environment") or provenance.environment()
    rows = []
    for (label, metric, what), where in pages.items():
        old = figure(published, label, metric, what)
        fresh = figure(new, label, metric, what) if new else (None, None, None)
        rows.append({
            "summary": rep.summary, "condition": label, "metric": metric, "figure": what,
            "published_mean": old[0], "published_low": old[1], "published_high": old[2],
            "new_mean": fresh[0], "new_low": fresh[1], "new_high": fresh[2],
            "agree": agree(old, fresh, tolerance) if new else None, "tolerance": tolerance,
            "pages": " ".join(where),
            "published_commit": old_env.get("commit"), "new_commit": new_env.get("commit"),
            "published_kernel": old_env.get("kernel"), "new_kernel": new_env.get("kernel"),
            "note": rep.skipped or "",
        })
    return rows


def write_table(rows: list[dict[str, Any]], reps: list[Reproduction], out_dir: Path
                ) -> dict[str, Any]:
    """reproduction.csv, .html and .json; returns what the .json holds."""
    with open(out_dir / "reproduction.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for row in rows:
            w.writerow({k: fmt(row[k]) for k in COLUMNS})
    agreed = sum(1 for r in rows if r["agree"] is True)
    spent = sum(r.seconds or 0 for r in reps)
    before = sum(r.published_seconds or 0 for r in reps if r.seconds is not None)
    said = {"figures": len(rows), "agree": agreed,
            "disagree": sum(1 for r in rows if r["agree"] is False),
            "failed_trials": sum(len(r.failed_trials) for r in reps),
            "machine_seconds": spent, "published_machine_seconds": before,
            "environment": provenance.environment(),
            "reproductions": [asdict(r) for r in reps]}
    (out_dir / "reproduction.json").write_text(json.dumps(said, indent=1) + "\n")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = "\n".join(
        "<tr class=\"{}\">".format({True: "agree", False: "disagree"}.get(row["agree"], "none"))
        + "".join(f"<td>{html.escape(fmt(row[c]))}</td>" for c in COLUMNS) + "</tr>"
        for row in rows)
    (out_dir / "reproduction.html").write_text(
        "<!doctype html><meta charset=utf-8><title>mpstream: the docs' figures reproduced"
        "</title><style>body{font:14px sans-serif}td,th{padding:2px 6px;border-bottom:1px "
        "solid #ddd}.disagree{background:#fdd}.agree{background:#efe}</style>"
        f"<h1>The docs' figures reproduced</h1><p>{agreed} of {len(rows)} figures agree; "
        f"{spent / 60:.1f} machine minutes (the published runs took {before / 60:.1f})</p>"
        f"<table><tr>{head}</tr>\n{body}</table>\n")
    return said


def reproduce(files: list[Path], out_dir: Path, *, trials: int | None = None,
              until: Until | None = None, cluster: str | None = None, update: bool = False,
              tolerance: float = 0.0, console: Console | None = None) -> dict[str, Any]:
    """Reproduces each summary of `files`; returns what reproduction.json holds."""
    console = console or Console()
    figs = docs_figures()
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    reps: list[Reproduction] = []
    rows: list[dict[str, Any]] = []
    said: dict[str, Any] = {}
    for path in files:
        rep = reproduce_one(path, out_dir, trials=trials, until=until, cluster=cluster,
                            console=console)
        reps.append(rep)
        rows += rows_of(rep, path, figs, tolerance)
        said = write_table(rows, reps, out_dir)  # after each: a long --all shows how far it got
        if update and rep.new_summary:
            shutil.copyfile(rep.new_summary, path)
            console.print(f"updated {path}: run `make docs-figures`, then `make docs-check` "
                          "names each inline figure that changed")
    for row in rows:
        if row["agree"] is False:
            console.print(f"[red]disagrees:[/] {row['summary']} {row['condition']} "
                          f"{row['metric']} {row['figure']}: published "
                          f"{fmt(row['published_mean'])}, now {fmt(row['new_mean'])} "
                          f"(quoted in {row['pages']})", highlight=False)
    console.print(f"{said.get('agree', 0)} of {len(rows)} figures agree: "
                  f"{out_dir / 'reproduction.csv'}")
    return said
