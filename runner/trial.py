"""One trial: `mpstream trial RUN_DIR --key KEY` runs exactly one planned trial of a run folder
(the plan is in RUN_DIR/run.json) and writes its folder, trials/KEY/, ending with trial.json.
`mpstream run` calls it for each trial in a process of its own.

A trial = a network for its condition (a `Site` of its kind, runner/sites/: an emulated
topology built from the profile, or this host's real interfaces), the transport on it, and the
scenario's workload (runner/workloads/: a video session, a bulk transfer), watched by what the
site watches it with. What it did goes into a typed
record (runner/record.py). A trial that fails is recorded with its reason; one that is
interrupted (Ctrl-C, SIGTERM) tears down and leaves no trial.json, so a resumed run does it
again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from mpstream import phases
from mpstream.errors import EXIT_FAILED, UserError
from mpstream.netem import traces
from mpstream.netem.singlepath import single_path_named
from mpstream.netem.tracepairs import PairFiles, TracePair, with_pair
from mpstream.proc import signals_interrupt
from mpstream.provenance import load_avg_1m
from mpstream.runner.layout import (
    PAIR_JSON,
    RUN_JSON,
    TRIAL_JSON,
    read_json,
    trial_dir,
    trial_log,
    write_json,
)
from mpstream.runner.record import (
    CompetitorLabel,
    PathLabel,
    PolicyToggle,
    TrialRecord,
    this_host,
)
from mpstream.runner.resolved import ResolvedCondition
from mpstream.runner.scenario import Scenario, Trial, expand_trials, resolve_scenario
from mpstream.runner.sites import site_class
from mpstream.runner.sites.base import Site, resolution
from mpstream.runner.workloads import workload_for
from mpstream.runner.workloads.base import (
    SessionNames,
    TrialContext,
    TrialFailed,
    WorkloadOutcome,
)
from mpstream.scratch import session_tempdir
from mpstream.transports import pathpolicy


def session_id_for(run_id: str, trial: Trial) -> str:
    """The trial's session id: the run's and its key, within the collector's 64 characters. A
    longer one keeps its start and a digest of the whole (trials of trace pairs differ at their
    keys' end), in 56, so that a competing player's id (this one and "-user1") is one too."""
    whole = re.sub(r"[^A-Za-z0-9_-]", "_", f"{run_id}-{trial.key}")
    if len(whole) <= 64:
        return whole
    return f"{whole[:47]}-{hashlib.sha256(whole.encode()).hexdigest()[:8]}"


def session_names(run_id: str, scenario: Scenario, trial: Trial, tdir: Path) -> SessionNames:
    """A run's trial's session: named after the run and the trial, labelled with the scenario
    and the round, its screenshot the trial folder's last frame."""
    return SessionNames(session_id_for(run_id, trial), scenario=scenario.name,
                        trial=trial.round, screenshot=tdir / "last-frame.png")


def site_for(resolved: ResolvedCondition, trial: Trial, tdir: Path, topo_name: str,
             pcap: bool) -> Site:
    """The site of the trial's condition kind (runner/sites/), given what it resolved to."""
    return site_class(resolved.kind)(resolved, trial, tdir, topo_name, pcap)


# --- one trial ---------------------------------------------------------------------------------


def run_trial(scenario: Scenario, trial: Trial, *, run_id: str, run_dir: Path,
              media_dir: Path | None, topo_name: str, pcap: bool = False,
              session: SessionNames | None = None) -> TrialRecord:
    """Runs one trial and writes its folder; returns its record (also in trial.json).
    `session`: what its video session is called (None: after the run and the trial)."""
    tdir = trial_dir(run_dir, trial.key)
    if tdir.exists():
        shutil.rmtree(tdir)  # an interrupted attempt: start clean
    tdir.mkdir(parents=True)
    record = TrialRecord(
        key=trial.key, round=trial.round, order=trial.order, kind=scenario.kind,
        condition=trial.condition, player=trial.player, browser=trial.browser,
        codec=trial.codec, abr=trial.abr, pair=trial.pair.name if trial.pair else None,
        host=this_host(), started_at=datetime.now(UTC).isoformat(), load_avg_1m=load_avg_1m())
    if trial.pair is not None:
        write_json(tdir / PAIR_JSON, trial.pair.model_dump(mode="json"))
    session = session or session_names(run_id, scenario, trial, tdir)
    t_start = time.monotonic()
    with phases.phase_clock() as clock:
        try:
            with trial_condition(scenario, trial) as resolved:
                _run(scenario, trial, resolved, record, session, tdir, media_dir, topo_name,
                     pcap)
            record.status = "ok"
        except KeyboardInterrupt:
            raise  # no trial.json: the resumed run does this trial again
        except (UserError, TrialFailed) as exc:
            record.reason = str(exc)
        except Exception as exc:
            record.reason = f"{type(exc).__name__}: {exc}"
            (tdir / "error.txt").write_text(traceback.format_exc())
        clock.mark(phases.TORN_DOWN)
    record.phases = clock.rounded()
    record.playback_s = record.phases.get(phases.PLAYBACK)
    record.finished_at = datetime.now(UTC).isoformat()
    record.elapsed_s = round(time.monotonic() - t_start, 2)
    write_json(tdir / TRIAL_JSON, record.model_dump(mode="json"))
    return record


def failed_record(kind: str, trial: Trial, reason: str, *, host: str | None = None,
                  started_at: str | None = None, elapsed_s: float | None = None) -> TrialRecord:
    """The record of a trial that ended without writing its own: stopped at its time limit,
    or lost with the host it ran on."""
    now = datetime.now(UTC).isoformat()
    return TrialRecord(
        key=trial.key, round=trial.round, order=trial.order, kind=kind, condition=trial.condition,
        player=trial.player, browser=trial.browser, codec=trial.codec, abr=trial.abr,
        pair=trial.pair.name if trial.pair else None, host=host, started_at=started_at or now,
        finished_at=now, elapsed_s=elapsed_s, status="failed", reason=reason)


def _run(scenario: Scenario, trial: Trial, resolved: ResolvedCondition, record: TrialRecord,
         session: SessionNames, tdir: Path, media_dir: Path | None, topo_name: str,
         pcap: bool) -> None:
    site = site_for(resolved, trial, tdir, topo_name, pcap)
    transport = resolved.transport
    record.transport = transport.name
    record.scheduler = transport.scheduler_name
    record.path_policy = resolved.path_policy.name
    if resolved.deployment is not None:
        record.deployment = resolved.deployment.name
        record.deployment_settings = resolved.deployment.settings()
    metered = resolved.paths.metered
    record.metered_paths = sorted(metered or {})
    workload = workload_for(scenario.kind)
    if workload.plays_video:
        record.session_id = session.session_id
        record.live_sync = scenario.live_sync(resolved)
    phases.mark(phases.PREPARED)
    with site.around(record), site.open() as network:
        phases.mark(phases.NETWORK_UP)
        in_use = transport.paths_in_use(network)
        record.paths = [PathLabel(index=p.index, name=p.name, client_addr=p.client_addr)
                        for p in network.paths]
        record.paths_in_use = in_use
        record.competitors = [CompetitorLabel(host=u.host, name=u.name, transport=u.transport,
                                              cross_traffic=u.cross_traffic is not None)
                              for u in network.competitors]
        record.capacity_bps = network.capacity_bps(in_use)
        outcome = workload.run(TrialContext(
            network=network, transport=transport, scenario=scenario, trial=trial, tdir=tdir,
            session=session, media_dir=media_dir, site=site,
            watch=lambda: site.watch(network, tdir), resolved=resolved))
        record.media = outcome.media
        record.events_started_unix = outcome.events_started_unix
        record.proof = outcome.proof
        record.transport_implementation = outcome.transport_implementation
        record.redundant_bytes = outcome.redundant_bytes
        try:
            record.path_bytes = network.path_bytes()
        except Exception as exc:  # a counter we lack is no reason to lose the trial
            record.path_bytes_error = str(exc)
        _record_metered(record, outcome, metered)
        phases.mark(phases.RESULTS)
    phases.mark(phases.TORN_DOWN)
    if outcome.failure:
        if not outcome.started:
            raise TrialFailed(f"{workload.actor}: {outcome.failure}")
        # A session that played and then broke (e.g. its only path died) is a result worth
        # keeping; one that never showed a frame is not.
        record.player_failure = outcome.failure


def _record_metered(record: TrialRecord, outcome: WorkloadOutcome,
                    metered: dict[int, float | None] | None) -> None:
    """The metered figures: the session's own (its counters' deltas), else, for a transfer,
    the fresh topology's counters at the end."""
    if metered is None:
        return
    figures = outcome.metered
    if figures is None and record.path_bytes is not None:
        figures = pathpolicy.metered_figures(
            [{"index": i, **c} for i, c in enumerate(record.path_bytes)], metered)
    if figures is not None:
        record.metered_bytes = _int_or_none(figures.get("metered_bytes"))
        record.metered_share = figures.get("metered_share")
        record.metered_cost = figures.get("metered_cost")
    record.path_policy_toggles = [PolicyToggle(**t) for t in outcome.path_policy_toggles]


def _int_or_none(value: float | None) -> int | None:
    return int(value) if value is not None else None


# --- trace pairs ------------------------------------------------------------------------------
# The pair set of a scenario with `pairs` (netem/tracepairs.py) is drawn once, as the run is
# planned, and written into run.json (`pair_set`: each pair's WiFi shape, rate and seed and its
# cellular trace and offset) with each planned trial's pair (`plan_pairs`); a trial's process
# plays the pairs as run.json has them, never drawing them again. A trial writes its pair's
# traces into a temporary folder of its own, removed when the trial ends, and plays its
# condition's network with them in place (`trial_condition`): the condition resolved again on
# that network, so that what the path policy holds back and what the topology builds are the
# pair's.


def pair_set_json(scenario: Scenario) -> dict[str, Any]:
    """run.json's `pair_set` of a scenario of pairs (nothing for another): the set as drawn."""
    if scenario.pairs is None:
        return {}
    return {"pair_set": {"name": scenario.pairs,
                         "pairs": [p.model_dump(mode="json") for p in scenario.pair_list()]}}


def plan_pairs_json(plan: list[Trial]) -> dict[str, Any]:
    """run.json's `plan_pairs`: each planned trial's pair, in the plan's order (nothing for a
    plan without pairs)."""
    planned = [{"key": t.key, "pair": t.pair.name} for t in plan if t.pair is not None]
    return {"plan_pairs": planned} if planned else {}


def pairs_of_run(run: dict[str, Any]) -> tuple[TracePair, ...] | None:
    """The pairs run.json holds (None: it holds none; the scenario draws its own)."""
    found = (run.get("pair_set") or {}).get("pairs")
    return None if found is None else tuple(TracePair.model_validate(p) for p in found)


def pair_refusals(scenario: Scenario) -> list[str]:
    """What the pairs need that this machine lacks: their cellular traces."""
    missing = sorted({p.cellular.trace for p in scenario.pair_list()
                      if traces.find(p.cellular.trace, "down") is None
                      or traces.find(p.cellular.trace, "up") is None})
    if not missing:
        return []
    return [f"the trace pairs' cellular traces {', '.join(missing)} are not here (looked in "
            f"{', '.join(map(str, traces.search_dirs()))}): `mpstream traces fetch "
            f"{' '.join(missing)}`, or point MPSTREAM_TRACES at a folder that has them"]


def on_pair(resolved: ResolvedCondition, trial: Trial, files: PairFiles) -> ResolvedCondition:
    """The condition resolved again on its network with the pair's traces (`files`, from
    `TracePair.write`) in place: the paths its policy holds back and its metered paths are
    the pair's network's."""
    assert resolved.network is not None  # a scenario of pairs has emulated conditions only
    single = trial.condition.single_path
    sum_on = resolved.network.tcp_path if single and single_path_named(single).carries_sum \
        else None
    network = with_pair(resolved.network, files, sum_on)
    return resolution(trial.condition, resolved.transport, network)


@contextlib.contextmanager
def trial_condition(scenario: Scenario, trial: Trial) -> Iterator[ResolvedCondition]:
    """What the trial's condition resolved to, on its pair's traces when it has a pair (written
    into a temporary folder for as long as the trial runs)."""
    resolved = scenario.resolved(trial.condition)
    if trial.pair is None:
        yield resolved
        return
    with session_tempdir("traces") as folder:
        try:
            files = trial.pair.write(Path(folder))
        except OSError as exc:
            raise UserError(f"pair {trial.pair.name}: could not write its traces: {exc}") from None
        yield on_pair(resolved, trial, files)


# --- the run folder's plan ---------------------------------------------------------------------


@dataclass
class RunPlan:
    """What run.json says a trial needs: the scenario (its conditions as they resolved), the
    number of rounds, the media, and whether to capture packets."""

    scenario: Scenario
    trials: int
    media_dir: Path | None
    pcap: bool

    def trial(self, key: str) -> Trial:
        plan = expand_trials(self.scenario, self.trials)
        for t in plan:
            if t.key == key:
                return t
        keys = ", ".join(t.key for t in plan[:6])
        raise UserError(f"no trial {key!r} in this run's plan (it has {len(plan)}: {keys}"
                        f"{', …' if len(plan) > 6 else ''})")


def plan_json(scenario: Scenario, trials: int, media_dir: Path | None, pcap: bool) -> dict:
    """run.json's part that `mpstream trial` reads: the scenario, and what each of its
    conditions resolved to (`resolved`, by label), which the trials take as they are. A sweep is
    written out as the conditions it expands to: run.json's objects are written with sorted
    keys, and a sweep's labels follow the order of its keys, so a sweep read back from it could
    name its conditions differently."""
    conditions = scenario.all_conditions()
    spec = scenario.model_dump(mode="json")
    spec["conditions"] = [c.model_dump(mode="json") for c in conditions]
    spec["sweep"] = None
    return {"scenario_spec": spec,
            "resolved": {c.label: scenario.resolved(c).model_dump(mode="json")
                         for c in conditions},
            "base_dir": str(scenario.base_dir), "trials": trials,
            "media_dir": str(media_dir) if media_dir else None, "pcap": pcap,
            **pair_set_json(scenario)}


def load_plan(run_dir: Path) -> RunPlan:
    run = read_json(Path(run_dir) / RUN_JSON)
    if run is None:
        raise UserError(f"{run_dir} is not a run folder (no {RUN_JSON}); give the --out folder "
                        "of `mpstream run`")
    if "scenario_spec" not in run:
        raise UserError(f"{run_dir}/{RUN_JSON} was written by an older mpstream: resume the run "
                        f"with `mpstream run SCENARIO --out {run_dir}` instead")
    scenario = Scenario.model_validate({**run["scenario_spec"], "base_dir": run["base_dir"]}
                                       ).with_pairs(pairs_of_run(run))
    # A run.json of an older mpstream holds no resolutions: its conditions are resolved here.
    resolved = {label: ResolvedCondition.read(found, f"{run_dir}/{RUN_JSON}: condition {label!r}")
                for label, found in (run.get("resolved") or {}).items()}
    scenario = resolve_scenario(scenario, origin=f"{run_dir}/{RUN_JSON}", known=resolved)
    media = Path(run["media_dir"]) if run.get("media_dir") else None
    if media is not None and not media.is_dir():
        raise UserError(f"the run's media {media} is not here: prepare it with `mpstream run` "
                        "(it encodes the scenario's media) before running its trials")
    return RunPlan(scenario, int(run["trials"]), media, bool(run.get("pcap")))


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--key", default=None, help="The planned trial to run (its folder's name).")
@click.option("--worker", is_flag=True,
              help="Run the keys read from standard input, one a line, one after another in "
                   "this process (what `mpstream run` does here): each trial's output goes to "
                   "RUN_DIR/trials/.KEY.log, and a line {\"done\": KEY} to standard output "
                   "once its folder is written.")
def trial(run_dir: Path, key: str | None, worker: bool) -> None:
    """Run one planned trial of RUN_DIR (what `mpstream run` does for each) and write its
    folder, trials/KEY/ with trial.json; exit 0 once trial.json says ok, 1 once it says
    failed."""
    if worker == (key is not None):
        raise UserError("give --key KEY (one trial) or --worker (keys on standard input)")
    run_dir = run_dir.resolve()
    plan = load_plan(run_dir)
    if key is None:
        serve_keys(run_dir, plan)
    elif one_trial(run_dir, plan, key, f"t{os.getpid()}").status != "ok":
        sys.exit(EXIT_FAILED)


def one_trial(run_dir: Path, plan: RunPlan, key: str, topology: str) -> TrialRecord:
    """The planned trial `key`, on a topology of that name, its lines on standard output."""
    planned = plan.trial(key)
    # First: which topology (namespaces mps-<topology>-*) is this trial's, for whoever must
    # find what an interrupted trial left.
    click.echo(json.dumps({"key": key, "topology": topology}), nl=True)
    sys.stdout.flush()
    # SIGTERM tears down like Ctrl-C and leaves no trial.json; a second signal (the terminal's
    # Ctrl-C reaches this process and its runner, which then sends SIGTERM) does not cut the
    # teardown short.
    with signals_interrupt(once=True):
        record = run_trial(plan.scenario, planned, run_id=run_dir.name, run_dir=run_dir,
                           media_dir=plan.media_dir, topo_name=topology,
                           pcap=plan.pcap)
    Console().print(json.dumps({"key": record.key, "status": record.status,
                                "reason": record.reason}), highlight=False, soft_wrap=True)
    return record


def serve_keys(run_dir: Path, plan: RunPlan) -> None:
    """`--worker`: the trials of the keys on standard input, each as `--key` runs it, in this
    process. What a trial's set-up paid for again at every trial is paid once: the interpreter
    and its imports, and the browser's driver (player/browsers.py `kept_playwright`). Nothing
    of a trial reaches the next through them: each still builds its own network, servers and
    browser (tests/integration/test_trial_worker.py). Its topology is named after this process
    and the trial's place in it, so that what a torn-down trial could leave behind never meets
    the next one's."""
    from mpstream.player.browsers import kept_playwright

    done = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    with signals_interrupt(), kept_playwright() as driver:
        for n, line in enumerate(sys.stdin):
            key = line.strip()
            with _output_to(trial_log(run_dir, key)):
                try:
                    record = one_trial(run_dir, plan, key, f"t{os.getpid()}n{n}")
                except UserError as exc:
                    click.echo(f"Error: {exc}", err=True)
                    record = None
            if record is None or record.status != "ok":
                driver.stop()  # a failure may have been the driver's: the next starts a new one
            done.write(json.dumps({"done": key}) + "\n")


@contextlib.contextmanager
def _output_to(log_path: Path) -> Iterator[None]:
    """Standard output and error (this process's and its children's) go to `log_path` inside
    the block; after it, both go to this process's standard error, so that nothing stray
    reaches the runner's pipe of done lines."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    own_err = os.dup(2)
    try:
        with log_path.open("w") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(own_err, 1)
                os.dup2(own_err, 2)
    finally:
        os.close(own_err)
