"""A results folder's runs in the browser: pages at /runs/ (the runs, a run's conditions side by
side, a trial's timeline drawn by uPlot) and their JSON at /api/runs, beside the collector.

The collector (server/) cannot import the runner, which imports it; so the app that serves both
is made here: `create_app()` is the collector's app with these pages, for the results folder
named by $MPSTREAM_RESULTS_DIR. `mpstream serve` runs it (the `mpstream` command composes it,
mpstream/cli.py). The pages read the run folders' own files (runfolders.py) and nothing
outside the results folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, abort, current_app, jsonify, render_template

from mpstream.paths import REPO_ROOT
from mpstream.runner.report.runfolders import (
    NotARun,
    RunDetailOut,
    RunsOut,
    TimelineOut,
    list_runs,
    run_detail,
    run_folder,
    run_info,
    trial_keys,
    trial_timeline,
)
from mpstream.server.app import create_app as create_collector
from mpstream.server.cli import RESULTS_ENV
from mpstream.server.dashboard import WEB
from mpstream.server.openapi import ok, operation, refused

DEFAULT_RESULTS = REPO_ROOT / "results"
RESULTS_KEY = "mpstream_results"
NAME_TYPE = {"type": "string", "pattern": "^[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,199}$"}
NO_RUN = refused("no run folder of that name under the results folder")
NO_TRIAL = refused("no such run, or no trial of that key in it")

runs = Blueprint("runs", __name__, template_folder=str(WEB / "templates"))


def results() -> Path:
    return current_app.extensions[RESULTS_KEY]


def _run(run_id: str) -> Path:
    try:
        return run_folder(results(), run_id)
    except NotARun:
        abort(404, description=f"no run {run_id!r} in the results folder")


# --- JSON ---


@runs.get("/api/runs")
@operation("The run folders of the results folder, newest first",
           responses={200: ok("the runs", RunsOut)})
def api_runs() -> Any:
    return jsonify(RunsOut(runs=list_runs(results())).model_dump())


@runs.get("/api/runs/<run_id>", merge_slashes=False)
@operation("A run's conditions with their summary figures (mean, sd, 95% interval), and its "
           "trials", path={"run_id": NAME_TYPE},
           responses={200: ok("the run", RunDetailOut), 404: NO_RUN})
def api_run(run_id: str) -> Any:
    return jsonify(_detail(run_id).model_dump())


@runs.get("/api/runs/<run_id>/trials/<key>/timeline", merge_slashes=False)
@operation("A trial over time: per-path throughput, buffer level, bitrate, segment download "
           "rates, stalls and path events", path={"run_id": NAME_TYPE, "key": NAME_TYPE},
           responses={200: ok("the timeline", TimelineOut), 404: NO_TRIAL})
def api_timeline(run_id: str, key: str) -> Any:
    return jsonify(_timeline(run_id, key).model_dump())


def _detail(run_id: str) -> RunDetailOut:
    try:
        return run_detail(_run(run_id))
    except NotARun:
        abort(404, description=f"run {run_id!r} has a file that leads out of its folder")


def _timeline(run_id: str, key: str) -> TimelineOut:
    try:
        return trial_timeline(_run(run_id), key)
    except NotARun:
        abort(404, description=f"run {run_id!r} has no trial {key!r}")


# --- pages ---


@runs.get("/runs/")
def index() -> Any:
    return render_template("runs/index.html", runs=list_runs(results()), results=results())


@runs.get("/runs/<run_id>", merge_slashes=False)
def run_page(run_id: str) -> Any:
    detail = _detail(run_id)
    cells = {c.group: {f.metric: f for f in c.figures} for c in detail.conditions}
    metric_rows = {f.metric: f.name + (f" ({f.unit})" if f.unit else "")
                   for c in detail.conditions for f in c.figures}
    return render_template("runs/run.html", detail=detail, run=detail.run, cells=cells,
                           metric_rows=metric_rows)


@runs.get("/runs/<run_id>/trials/<key>", merge_slashes=False)
def trial_page(run_id: str, key: str) -> Any:
    folder = _run(run_id)
    timeline = _timeline(run_id, key)
    return render_template("runs/trial.html", run=run_info(folder), timeline=timeline,
                           others=[k for k in trial_keys(folder) if k != key])


def add_run_pages(app: Flask, results_dir: Path) -> Flask:
    app.extensions[RESULTS_KEY] = Path(results_dir).resolve()
    app.register_blueprint(runs)
    return app


def create_app(results_dir: str | Path | None = None) -> Flask:
    """The collector (server/app.py) with the run pages of `results_dir` (default
    $MPSTREAM_RESULTS_DIR, else results/ of the repository)."""
    folder = results_dir or os.environ.get(RESULTS_ENV) or DEFAULT_RESULTS
    return add_run_pages(create_collector(), Path(folder))
