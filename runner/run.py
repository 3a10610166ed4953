"""`mpstream run`: every condition × player × trial of a scenario, raw data kept per trial.

The run plans the trials (a seeded interleaving of the conditions, runner/scenario.py), checks
once what every trial needs, prepares the media (or starts the live stream), writes the plan to
run.json and then runs each trial as `mpstream trial RUN_DIR --key KEY` (runner/trial.py) in a
process of its own: here, one after another, or with `--cluster` on a cluster's hosts, one per
host at a time (runner/cluster.py; `local:N`, hosts in namespaces of this machine:
runner/localcluster.py). A trial that fails is recorded with its reason and the run goes on; a
trial folder without trial.json (the run was interrupted there) is done again on resume.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from mpstream import pathpolicy, provenance
from mpstream.errors import UserError
from mpstream.proc import signals_interrupt
from mpstream.runner.layout import (
    RUN_JSON,
    finished_keys,
    read_json,
    remove_partial_trials,
    write_json,
)
from mpstream.runner.media import prepare_media
from mpstream.runner.process import LocalTrials, TrialRunner
from mpstream.runner.record import TrialRecord
from mpstream.runner.scenario import Condition, Scenario, Trial, build_profile, expand_trials
from mpstream.runner.trial import plan_json, transport_for
from mpstream.transport import Transport

if TYPE_CHECKING:
    from mpstream.netem.profile import Profile

# Seconds a trial may run past the scenario's duration on a cluster before it is stopped and
# recorded as failed: its network, servers and browser start and stop within it.
TRIAL_MARGIN_S = 180.0


def trial_runner(cluster: str | None, margin_s: float = TRIAL_MARGIN_S,
                 balance: bool = False) -> TrialRunner:
    """This machine, a local cluster (`local:N`) or the cluster whose head is at ADDRESS;
    `balance`: whole rounds to hosts, so that each runs every condition equally often."""
    if cluster is None:
        if balance:
            raise UserError("--balance-hosts spreads rounds over a cluster's hosts: give "
                            "--cluster too")
        return LocalTrials()
    from mpstream.runner.localcluster import LocalClusterTrials, local_hosts

    hosts = local_hosts(cluster)
    if hosts is not None:
        return LocalClusterTrials(hosts, margin_s, balance)
    try:
        from mpstream.runner.cluster import RayTrials
    except ImportError as exc:
        from mpstream.runner.hosts import INSTALL_RAY

        raise UserError(f"--cluster needs Ray ({exc}): {INSTALL_RAY}") from None
    from mpstream.runner.hosts import saved_node

    # The driver joins the cluster from this machine's own node: its address, when known.
    node = saved_node()
    return RayTrials(cluster, margin_s, node.get("node_address")
                     if node.get("address") == cluster else None, balance)


def refuse_on_cluster(scenario: Scenario, option: str = "--cluster") -> None:
    """Trials bound to this machine cannot move to another host."""
    if scenario.live is not None:
        raise UserError(f"scenario {scenario.name!r} plays a live stream ([live]) that runs on "
                        "this machine for the whole run, so its trials cannot move to other "
                        f"hosts: run it without {option}")
    real = [c.label for c in scenario.all_conditions() if c.kind == "real"]
    if real:
        raise UserError(f"scenario {scenario.name!r}: condition(s) {', '.join(real)} are "
                        "kind = \"real\", bound to this machine's own interfaces, so their "
                        f"trials cannot move to other hosts: run it without {option}")


def _run_json(scenario: Scenario, scenario_path: Path | None, plan: list[Trial],
              trials: int, media_dir: Path | None, pcap: bool) -> dict:
    return {
        **plan_json(scenario, trials, media_dir, pcap),
        "scenario": scenario.name,
        "description": scenario.description,
        "kind": scenario.kind,
        "scenario_file": str(scenario_path) if scenario_path else None,
        "seed": scenario.seed,
        "duration_s": scenario.duration_s,
        "buffer_s": scenario.buffer_s,
        "live": scenario.live.model_dump(mode="json") if scenario.live else None,
        "players": scenario.players,
        "browsers": scenario.browsers,
        "codecs": scenario.codecs,
        "conditions": [c.model_dump(mode="json") for c in scenario.all_conditions()],
        "plan": [t.key for t in plan],
        "environment": provenance.environment(),
    }


def _path_policy_problem(scenario: Scenario, cond: Condition, transport: Transport,
                         profile: Profile | None) -> str | None:
    """Why the condition's path policy cannot run (None: it can), before any topology."""
    policy = cond.path_policy
    if policy in (None, pathpolicy.DEFAULT_POLICY):
        return None
    if profile is None:
        return (f"path policy {policy}: a real host's interfaces say nothing of which is "
                "metered: give the condition an emulated profile")
    if policy == "deadline" and scenario.kind != "video":
        return "path policy deadline follows a player's buffer, and an iperf trial has none"
    try:
        pathpolicy.check_for(policy, transport, profile)
    except UserError as exc:
        return str(exc)
    return None


def preflight(scenario: Scenario) -> None:
    """What every trial needs, checked once: otherwise each trial would fail the same way."""
    from mpstream.netem import coupled, teardown
    from mpstream.netem.system import require_cc

    problems = []
    if os.geteuid() != 0:
        problems.append("runs need root (network namespaces): run it with sudo")
    if not teardown.EMULATOR.exists():
        problems.append(f"the link emulator {teardown.EMULATOR} is not built: run `make emulator`")
    if scenario.kind == "video":
        from mpstream.player.session import DIST_DIR

        if not (DIST_DIR / "index.html").exists():
            problems.append(f"the player page is not built ({DIST_DIR}/index.html is missing): "
                            "run `make player-bundle`")
        from mpstream.player.browsers import check_browser

        for browser in scenario.browsers:
            try:
                check_browser(browser)
            except UserError as exc:
                problems.append(str(exc))
    transports = set()
    for cond in scenario.all_conditions():
        profile = None if cond.kind == "real" else build_profile(scenario, cond)
        try:  # a scheduler the transport lacks, refused before any topology
            transport = transport_for(cond, profile.mode if profile else None)
        except UserError as exc:
            problems.append(f"condition {cond.label}: {exc}")
            continue
        if profile is None and cond.scheduler is not None and transport.kernel_mptcp:
            problems.append(f"condition {cond.label}: scheduler {cond.scheduler}: on a real "
                            "host the kernel's MPTCP scheduler is the host's own setting")
        policy_problem = _path_policy_problem(scenario, cond, transport, profile)
        if policy_problem:
            problems.append(f"condition {cond.label}: {policy_problem}")
        transports.add(transport)
        refusal = transport.refuses_cc(profile.cc) if profile else None
        if refusal:
            problems.append(f"condition {cond.label}: {refusal}")
        elif profile is not None and not coupled.is_coupled(profile.cc):
            # Allowed now, from the machine's own namespace (as the topology would): the hosts
            # of a local cluster run in namespaces of their own, which may not widen the list.
            # A CC this kernel lacks stays that condition's failure, recorded per trial.
            with contextlib.suppress(UserError):
                require_cc(profile.cc)
        if profile is None and transport.runs_on_server:
            problems.append(f"condition {cond.label}: transport {transport.name} runs a gateway "
                            "on the server host, which mpstream does not run on a real "
                            "network's server: use an emulated profile")
        if scenario.kind != "video" and transport.carries_http_only:
            problems.append(f"condition {cond.label}: transport {transport.name} carries the "
                            f"player's HTTP only; a {scenario.kind} scenario needs mptcp or tcp")
    for transport in sorted(transports, key=lambda t: t.name):
        problems += transport.missing()
    for tool in ("ss", "nstat", "stdbuf", "iperf3" if scenario.kind == "iperf" else "ip"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} is missing: run `make setup`")
    if problems:
        raise UserError("cannot run: " + "; ".join(problems))


def check_codecs(scenario: Scenario, media_dir: Path, trials: list[Trial]) -> None:
    """Every browser × codec × player the trials ask for can play from the media, checked once
    before the first trial (a blank page of each browser says what it decodes)."""
    from mpstream.player.codecs import check_codec

    wanted = sorted({(t.browser or "chromium", t.codec or "auto", t.player) for t in trials
                     if t.codec and t.codec != "auto" and t.player})
    for browser, codec, player in wanted:
        try:
            check_codec(browser, codec, media_dir, player)
        except UserError as exc:
            raise UserError(f"cannot run: {player} in {browser}: {exc}") from None


def run_scenario(scenario: Scenario, out_dir: Path, *, trials: int | None = None,
                 scenario_path: Path | None = None, retry_failed: bool = False,
                 console: Console | None = None, progress: bool = True,
                 pcap: bool = False, cluster: str | None = None,
                 trial_margin_s: float = TRIAL_MARGIN_S, balance_hosts: bool = False,
                 plan_only: bool = False, only: list[str] | None = None) -> dict[str, str]:
    """Runs (or resumes) the scenario into out_dir; returns key -> status of every trial.

    `only`: run only the trials of these conditions (labels); the plan keeps them all, so that
    a run folder grows by a condition added to its scenario and its report shows them all.

    `pcap`: keep a header-only packet capture of every trial (trials/<key>/pcap/).
    `cluster`: run the trials on a cluster (its head's ADDRESS, or `local:N`), each stopped
    and recorded as failed once it runs `trial_margin_s` past the scenario's duration; with
    `balance_hosts`, round r on host r mod the number of hosts.
    `plan_only`: prepare the run folder (run.json, the media) and run no trial: they are run
    elsewhere with `mpstream trial` (a batch system's array job)."""
    if cluster is not None or plan_only:
        refuse_on_cluster(scenario, "--plan-only" if plan_only else "--cluster")
    runner = trial_runner(cluster, trial_margin_s, balance_hosts)
    # SIGTERM tears down like Ctrl-C, and the run stays resumable.
    with signals_interrupt():
        return _run_scenario(scenario, out_dir, trials=trials, scenario_path=scenario_path,
                             retry_failed=retry_failed, console=console, progress=progress,
                             pcap=pcap, runner=None if plan_only else runner, only=only)


def _run_scenario(scenario: Scenario, out_dir: Path, *, trials: int | None,
                  scenario_path: Path | None, retry_failed: bool, console: Console | None,
                  progress: bool, pcap: bool = False,
                  runner: TrialRunner | None = None,
                  only: list[str] | None = None) -> dict[str, str]:
    """With no `runner`, only the run folder is prepared."""
    console = console or Console()
    labels = [c.label for c in scenario.all_conditions()]
    unknown = [label for label in only or [] if label not in labels]
    if unknown:
        raise UserError(f"scenario {scenario.name!r} has no condition "
                        f"{', '.join(map(repr, unknown))}; its conditions: {', '.join(labels)}")
    # Absolute: the servers of a trial run from their own working directories.
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    n = trials if trials is not None else scenario.trials
    plan = expand_trials(scenario, n)
    previous = read_json(out_dir / RUN_JSON)
    if previous and previous.get("scenario") != scenario.name:
        raise UserError(f"{out_dir} holds a run of scenario {previous.get('scenario')!r}, not "
                        f"{scenario.name!r}; give another --out folder")
    if scenario_path and Path(scenario_path).is_file():
        shutil.copyfile(scenario_path, out_dir / "scenario.toml")

    remove_partial_trials(out_dir)
    done = finished_keys(out_dir)
    selected = [t for t in plan if not only or t.condition.label in only]
    todo = [t for t in selected
            if t.key not in done or (retry_failed and done[t.key] == "failed")]
    if len(todo) < len(selected):
        console.print(f"resuming: {len(selected) - len(todo)} of {len(selected)} trials already "
                      "done")
    if todo:
        preflight(scenario)
    with contextlib.ExitStack() as resources:
        media_dir = None
        if scenario.kind == "video" and todo and scenario.live is not None:
            media_dir = resources.enter_context(_live_stream(scenario.live, out_dir, console))
        elif scenario.kind == "video" and scenario.media is not None and todo:
            console.print("preparing media …")
            media_dir = prepare_media(scenario.media, scenario.base_dir, progress=progress)
            console.print(f"media: {media_dir}")
            check_codecs(scenario, media_dir, todo)
        # Written before the first trial: it is the plan each `mpstream trial` reads.
        write_json(out_dir / RUN_JSON, _run_json(scenario, scenario_path, plan, n, media_dir,
                                                 pcap))
        if runner is None:
            console.print(f"planned: {len(todo)} trial(s) to run, keys in {out_dir / RUN_JSON} "
                          f"(`plan`); each: mpstream trial {out_dir} --key KEY")
            return dict(done)
        return _run_trials(scenario, out_dir, selected, todo, done, scenario_path, console,
                           progress, runner)


@contextlib.contextmanager
def _live_stream(live, out_dir: Path, console: Console):
    """The run's live stream: `mpstream live` writing into OUT/live-tree for as long as the
    trials run, then ended like Ctrl-C (its tree stays, ended, beside the trials)."""
    from mpstream.encoder.live import LiveConfig, live_in_background

    config = LiveConfig(source=live.source, ladder=live.ladder,
                        segment_duration=live.segment_duration, window_s=live.window_s,
                        out=out_dir / "live-tree")
    console.print(f"starting the live stream ({live.source}, ladder {live.ladder}) …")
    with live_in_background(config) as tree:
        # Every trial joins with a full window behind the edge, as a viewer of a running
        # channel would: the first trial waits for it once.
        time.sleep(min(live.window_s, 3 * live.segment_duration))
        console.print(f"live: {tree}")
        yield tree


def _run_trials(scenario: Scenario, out_dir: Path, plan: list[Trial], todo: list[Trial],
                done: dict[str, str], scenario_path: Path | None, console: Console,
                progress: bool, runner: TrialRunner) -> dict[str, str]:
    statuses = dict(done)
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
            runner.run(out_dir, todo, started, finished)
        except KeyboardInterrupt:
            bar.stop()
            console.print(f"interrupted during {', '.join(running) or 'the run'}; resume "
                          f"with: mpstream run {scenario_path or scenario.name} --out {out_dir}")
            raise
    failed = sum(1 for s in statuses.values() if s != "ok")
    console.print(f"{len(statuses)} trials in {out_dir}: {len(statuses) - failed} ok, "
                  f"{failed} failed")
    return statuses
