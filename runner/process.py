"""A trial in a process of its own, and where a run's trials run.

`run_trial_process` runs `mpstream trial RUN_DIR --key KEY` (runner/trial.py) and returns the
record it wrote; a `TrialRunner` hands a run's trials out: `LocalTrials` here, one after
another, or the cluster's (runner/cluster/raytrials.py, runner/cluster/local.py), which build
on this module; runner/run.py chooses one and sits above them all.
"""

from __future__ import annotations

import contextlib
import json
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
from mpstream.runner.layout import RUN_COLLECTOR_ENV, TRIAL_JSON, trial_dir, trial_log, write_json
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
    """Here, one trial after another in one worker process (`mpstream trial --worker`), video
    trials with one collector for all of them."""

    def run(self, run_dir: Path, trials: list[Trial], started: Started,
            finished: Finished) -> None:
        with run_collector(run_dir, trials) as env, TrialWorker(run_dir, env) as worker:
            for trial in trials:
                started(trial.key)
                finished(trial.key, worker.run(trial.key))


class TrialWorker:
    """`mpstream trial RUN_DIR --worker`, told one key at a time; started at the first trial
    and again after one that ended it (a crash, an interrupted trial). A trial runs in it as
    `run_trial_process` runs one: its output in its trial.log, Ctrl-C and SIGTERM stop it the
    same way, and a trial that leaves no record is an error naming what it said."""

    def __init__(self, run_dir: Path, env: dict[str, str] | None):
        self.run_dir, self.env = run_dir, env
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> TrialWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # no more keys: it stops its driver and exits
            try:
                self.proc.wait(TEARDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                stop(self.proc, timeout=5)
            self.proc = None

    def run(self, key: str) -> TrialRecord:
        if self.proc is None or self.proc.poll() is not None:
            argv = [sys.executable, "-m", "mpstream.cli", "trial", str(self.run_dir),
                    "--worker"]
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, env=self.env)
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        code = None
        try:
            proc.stdin.write(key + "\n")
            proc.stdin.flush()
            while (line := proc.stdout.readline()) and _done_key(line) != key:
                pass
        except BrokenPipeError:
            line = ""
        except KeyboardInterrupt:
            stop(proc, timeout=TEARDOWN_TIMEOUT_S)
            keep_log(self.run_dir, key)
            raise
        if not line:  # it ended without finishing this trial
            code = proc.wait()
            self.proc = None
        return collect_record(self.run_dir, key, code)


def keep_log(run_dir: Path, key: str) -> None:
    """A trial's output goes into its folder, as trial.log, once it has one."""
    tdir, log_path = trial_dir(run_dir, key), trial_log(run_dir, key)
    if tdir.is_dir() and log_path.is_file():
        log_path.replace(tdir / "trial.log")


def _done_key(line: str) -> str | None:
    with contextlib.suppress(ValueError, AttributeError):
        return json.loads(line).get("done")
    return None


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
    log_path = trial_log(run_dir, key)
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
        keep_log(run_dir, key)
    if timed_out and not (tdir / TRIAL_JSON).is_file():
        plan = load_plan(run_dir)
        write_json(tdir / TRIAL_JSON, failed_record(
            plan.scenario.kind, plan.trial(key),
            f"timeout: still running {timeout_s:.0f} s after it started (the scenario's "
            f"{plan.scenario.duration_s:g} s and a margin); stopped",
            host=this_host(), started_at=started_at,
            elapsed_s=round(time.monotonic() - t0, 2)).model_dump(mode="json"))
    return collect_record(run_dir, key, code)


def collect_record(run_dir: Path, key: str, code: int | None) -> TrialRecord:
    """The record the trial of `key` wrote, its output moved into its folder as trial.log;
    `code` is how its process ended if it did. No record: the trial was interrupted
    (KeyboardInterrupt) or broke (UserError with the end of what it said)."""
    tdir = trial_dir(run_dir, key)
    keep_log(run_dir, key)
    record = load_record(tdir / TRIAL_JSON)
    if record is None:
        log_path = trial_log(run_dir, key)
        said = (tdir / "trial.log").read_text() if (tdir / "trial.log").is_file() else (
            log_path.read_text() if log_path.is_file() else "")
        if code in (130, -2, -15):
            raise KeyboardInterrupt
        raise UserError(f"trial {key} of {run_dir} ended (exit {code}) without a trial "
                        f"record: {said.strip()[-500:]}")
    return record
