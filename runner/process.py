"""A trial in a process of its own, and where a run's trials run.

`run_trial_process` runs `mpstream trial RUN_DIR --key KEY` (runner/trial.py) and returns the
record it wrote; a `TrialRunner` hands a run's trials out: `LocalTrials` here, one after
another, or the cluster's (runner/cluster/raytrials.py, runner/cluster/local.py), which build
on this module; runner/run.py chooses one and sits above them all.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from mpstream.errors import UserError
from mpstream.proc import stop
from mpstream.runner.layout import RUN_COLLECTOR_ENV, TRIAL_JSON, TRIALS, trial_dir, write_json
from mpstream.runner.record import TrialRecord, load_record, this_host
from mpstream.runner.scenario import Trial
from mpstream.runner.trial import failed_record, load_plan

# Seconds a trial process gets to tear its network down once it is told to stop.
TEARDOWN_TIMEOUT_S = 60
Started = Callable[[str], None]
Finished = Callable[[str, TrialRecord], None]


class TrialRunner(Protocol):
    """Where a run's trials run: `run` calls `started` when it hands a trial out and
    `finished` once its folder, trial.json last, is in the run folder."""

    def run(self, run_dir: Path, trials: list[Trial], started: Started,
            finished: Finished) -> None: ...


class LocalTrials:
    """Here, one trial after another, video trials with one collector for all of them."""

    def run(self, run_dir: Path, trials: list[Trial], started: Started,
            finished: Finished) -> None:
        with run_collector(run_dir, trials) as env:
            for trial in trials:
                started(trial.key)
                finished(trial.key, run_trial_process(run_dir, trial.key, env=env))


@contextlib.contextmanager
def run_collector(run_dir: Path, trials: list[Trial]) -> Iterator[dict[str, str] | None]:
    """The environment of trial processes that share one collector, started here for them
    (RUN_DIR/.collector/: its database and log): booting one per trial cost about a second of
    both cores' time at every trial's start. None when the trials play no video."""
    from mpstream.runner.workloads import workload_for
    from mpstream.server.stack import shared_collector

    if not trials or not workload_for(load_plan(run_dir).scenario.kind).plays_video:
        yield None
        return
    with shared_collector(run_dir / ".collector") as socket:
        yield {**os.environ, RUN_COLLECTOR_ENV: str(socket)}



def run_trial_process(run_dir: Path, key: str, *, timeout_s: float | None = None,
                      die_with_parent: bool = False,
                      env: dict[str, str] | None = None) -> TrialRecord:
    """`mpstream trial RUN_DIR --key KEY` in a process of its own, its output in the trial's
    trial.log. Interrupted (Ctrl-C, SIGTERM), the trial is stopped the same way and waited for:
    it tears its network down and leaves no trial.json. Past `timeout_s` it is stopped the same
    way and recorded as failed ("timeout"). With `die_with_parent` it is sent SIGTERM should
    this process die first (a cluster's worker that is killed)."""
    tdir = trial_dir(run_dir, key)
    log_path = run_dir / TRIALS / f".{key}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "mpstream.cli", "trial", str(run_dir), "--key", key]
    if die_with_parent:
        argv = ["setpriv", "--pdeathsig", "TERM", *argv]
    started_at, t0 = datetime.now(UTC).isoformat(), time.monotonic()
    timed_out = False
    try:
        with log_path.open("w") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=env)
            try:
                code = proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                stop(proc, timeout=TEARDOWN_TIMEOUT_S)
                code = proc.returncode
            except KeyboardInterrupt:
                stop(proc, timeout=TEARDOWN_TIMEOUT_S)
                raise
    finally:
        if timed_out:
            tdir.mkdir(parents=True, exist_ok=True)
        if tdir.is_dir():
            log_path.replace(tdir / "trial.log")
    record = load_record(tdir / TRIAL_JSON)
    if record is None and timed_out:
        plan = load_plan(run_dir)
        record = failed_record(
            plan.scenario.kind, plan.trial(key),
            f"timeout: still running {timeout_s:.0f} s after it started (the scenario's "
            f"{plan.scenario.duration_s:g} s and a margin); stopped",
            host=this_host(), started_at=started_at, elapsed_s=round(time.monotonic() - t0, 2))
        write_json(tdir / TRIAL_JSON, record.model_dump(mode="json"))
    if record is None:
        said = (tdir / "trial.log").read_text() if (tdir / "trial.log").is_file() else ""
        if code in (130, -2, -15):
            raise KeyboardInterrupt
        raise UserError(f"`mpstream trial {run_dir} --key {key}` ended ({code}) without a "
                        f"trial record: {said.strip()[-500:]}")
    return record
