"""`mpstream run`: every condition × player × trial of a scenario, raw data kept per trial.

One trial = a fresh topology (namespaces, emulated paths) built from the condition's profile, the
kernel samplers on both ends, then either the server stack and one headless player session
(video) or one iperf3 transfer (iperf); everything is torn down before the next trial. A trial
that fails is recorded with its reason and the run goes on; a trial folder without trial.json
(the run was interrupted there) is done again on resume.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from mpstream.errors import UserError
from mpstream.netem import traces
from mpstream.proc import signals_interrupt, stop
from mpstream.runner.capture import CounterSnapshots, PacketCapture
from mpstream.runner.evidence import write_clock
from mpstream.runner.layout import (
    RUN_JSON,
    TRIAL_JSON,
    finished_keys,
    read_json,
    trial_dir,
    write_json,
)
from mpstream.runner.media import prepare_media
from mpstream.runner.sampler import SubflowSampler
from mpstream.runner.scenario import Scenario, Trial, build_profile, expand_trials

MANIFESTS = {"dashjs": "/media/dash/manifest.mpd", "hlsjs": "/media/hls/master.m3u8"}
# Seconds a trial may take beyond its play duration (startup of servers and browser, teardown).
TRIAL_SLACK_S = 120


def paths_in_use(profile) -> list[int]:
    if profile.mode == "tcp":
        return [profile.tcp_path]
    return [i for i, p in enumerate(profile.paths) if not p.backup] or [0]


def link_rate_bps(profile, index: int, direction: str) -> float | None:
    link = profile.link(index, direction)
    if link.trace is not None:
        return traces.mean_bps(link.trace)
    return float(link.rate_bps) if link.rate_bps else None


def capacity_bps(profile, direction: str = "downlink") -> float | None:
    """Sum of the nominal rates of the paths the transport may use (None if one is unlimited).

    With a shared server link, the sum is capped by that link's rate.
    """
    total = 0.0
    for i in paths_in_use(profile):
        rate = link_rate_bps(profile, i, direction)
        if rate is None:
            return None
        total += rate
    shared = profile.server_link_model(direction)
    if shared is not None and shared.rate_bps:
        total = min(total, float(shared.rate_bps))
    return total


def session_id_for(run_id: str, trial: Trial) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{run_id}-{trial.key}")[:64]


class TrialFailed(Exception):
    pass


def _fetch_session(stack, session_id: str) -> dict:
    """The session with its events, straight from the collector's own socket (the emulated
    paths may be down, and the server address is unreachable from outside the namespaces)."""
    from mpstream.server.stack import unix_get

    try:
        status, body = unix_get(Path(stack.collector_socket), f"/api/v1/sessions/{session_id}")
    except OSError as exc:
        raise TrialFailed(f"collector did not answer for session {session_id}: {exc}") from exc
    if status != 200:
        raise TrialFailed(f"collector has no session {session_id} (HTTP {status})")
    return json.loads(body)


def _media_facts(media_dir: Path) -> dict[str, Any]:
    """What the scores need of the encoded media and the probe does not record."""
    media = read_json(Path(media_dir) / "media.json", {}) or {}
    rates = [r.get("nominal_bitrate") for r in media.get("rungs", []) if r.get("nominal_bitrate")]
    return {"frame_rate": media.get("frame_rate"), "top_bitrate_bps": max(rates, default=None)}


def _run_video(topo, trial: Trial, scenario: Scenario, media_dir: Path, tdir: Path,
               transport: str, session_id: str, start_samplers, meta: dict) -> dict[str, Any]:
    from mpstream.player.session import play_session
    from mpstream.server.stack import ServerStack

    with ServerStack(media_dir, netns=topo.server_ns, host=topo.server_addr,
                     workdir=tdir / "server", mptcp=transport == "mptcp",
                     send=topo.profile.server) as stack:
        meta["media"] = _media_facts(media_dir)
        with start_samplers():
            topo.start_events()
            # The wall clock of the profile's t=0, to place its timed events on the page's
            # clock (runner/metrics.py: stalls after a path failure).
            meta["events_started_unix"] = time.time()
            result = play_session(
                topo, stack, player=trial.player, manifest_path=MANIFESTS[trial.player],
                transport=transport, duration_s=scenario.duration_s, session_id=session_id,
                scenario=scenario.name, trial=trial.round,
                screenshot=tdir / "last-frame.png", buffer_s=scenario.buffer_s,
                target_latency_s=scenario.live.target_latency_s if scenario.live else None,
                browser=trial.browser or "chromium", codec=trial.codec or "auto",
            )
        write_json(tdir / "summary.json", result)
        session = _fetch_session(stack, session_id)
        write_json(tdir / "events.json", session.pop("events", []))
        write_json(tdir / "session.json", session)
        if Path(stack.access_log).is_file():
            shutil.copyfile(stack.access_log, tdir / "access.log")
    return result


def _run_iperf(topo, scenario: Scenario, tdir: Path, transport: str, start_samplers) -> dict:
    mptcp = transport == "mptcp"
    port = "5211"  # not iperf3's default: other tools on the machine may hold that one
    server = topo.popen("server", ["iperf3", "-s", "-1", "-p", port], mptcp=mptcp,
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)  # iperf3 prints nothing when listening; give it time to bind
        with start_samplers():
            topo.start_events()
            proc = topo.run("client", ["iperf3", "-c", topo.server_addr, "-p", port,
                                       "-t", f"{scenario.duration_s:g}", "-R", "-J"],
                            mptcp=mptcp, capture_output=True, text=True, check=False,
                            timeout=scenario.duration_s + TRIAL_SLACK_S)
        (tdir / "iperf.json").write_text(proc.stdout)
        if proc.returncode != 0:
            raise TrialFailed(f"iperf3 exit {proc.returncode}: {proc.stderr.strip()[:300]}")
        return json.loads(proc.stdout)
    finally:
        stop(server, timeout=5)


def run_trial(scenario: Scenario, trial: Trial, *, run_id: str, run_dir: Path,
              media_dir: Path | None, topo_name: str, pcap: bool = False) -> dict:
    """Runs one trial and writes its folder; returns its trial.json content."""
    from mpstream.netem.topology import Topology

    tdir = trial_dir(run_dir, trial.key)
    if tdir.exists():
        shutil.rmtree(tdir)  # an interrupted attempt: start clean
    tdir.mkdir(parents=True)
    meta: dict[str, Any] = {
        "key": trial.key,
        "round": trial.round,
        "order": trial.order,
        "kind": scenario.kind,
        "condition": trial.condition.model_dump(mode="json"),
        "player": trial.player,
        "browser": trial.browser,
        "codec": trial.codec,
        "started_at": datetime.now(UTC).isoformat(),
        "status": "failed",
        "reason": "",
        # Both kinds send the bulk data from the server (iperf3 runs reversed, -R), so the
        # emulated downlink is the bottleneck, as for video.
        "sender": "server",
    }
    t_start = time.monotonic()
    if trial.condition.kind == "real":
        return _finish(meta, tdir, t_start, lambda: _run_real(trial, scenario, meta, tdir,
                                                              session_id_for(run_id, trial)))
    def emulated() -> None:
        profile = build_profile(scenario, trial.condition)
        transport = profile.mode
        meta.update(
            transport=transport,
            capacity_bps=capacity_bps(profile, "downlink"),
            paths=[{"index": i, "name": profile.path_label(i)} for i in range(len(profile.paths))],
            paths_in_use=paths_in_use(profile),
        )
        write_json(tdir / "profile.json", profile.model_dump(mode="json"))
        session_id = session_id_for(run_id, trial)
        meta["session_id"] = session_id if scenario.kind == "video" else None
        with Topology.up(profile, name=topo_name) as topo:
            addr_to_path = {str(p.client_addr): p.index for p in topo.paths}
            meta["paths"] = [{"index": p.index, "name": profile.path_label(p.index),
                              "client_addr": str(p.client_addr)} for p in topo.paths]

            def start_samplers():
                return _Samplers(topo, tdir, addr_to_path.get, pcap=pcap)

            if scenario.kind == "video":
                result = _run_video(topo, trial, scenario, media_dir, tdir, transport,
                                    session_id, start_samplers, meta)
                if result.get("failure"):
                    # A session that played and then broke (e.g. its only path died) is a
                    # result worth keeping; one that never showed a frame is not.
                    events = json.loads((tdir / "events.json").read_text())
                    if not any(e.get("type") == "startup" for e in events):
                        raise TrialFailed(f"player: {result['failure']}")
                    meta["player_failure"] = result["failure"]
            else:
                _run_iperf(topo, scenario, tdir, transport, start_samplers)
            try:
                meta["path_bytes"] = topo.path_bytes()
            except Exception as exc:  # a counter we lack is no reason to lose the trial
                meta["path_bytes_error"] = str(exc)

    return _finish(meta, tdir, t_start, emulated)


def _finish(meta: dict, tdir: Path, t_start: float, body) -> dict:
    """Runs `body` and records its outcome in trial.json: ok, or failed with the reason."""
    try:
        body()
        meta["status"] = "ok"
    except KeyboardInterrupt:
        raise  # no trial.json: the resumed run does this trial again
    except (UserError, TrialFailed) as exc:
        meta["reason"] = str(exc)
    except Exception as exc:
        meta["reason"] = f"{type(exc).__name__}: {exc}"
        (tdir / "error.txt").write_text(traceback.format_exc())
    meta["finished_at"] = datetime.now(UTC).isoformat()
    meta["elapsed_s"] = round(time.monotonic() - t_start, 2)
    write_json(tdir / TRIAL_JSON, meta)
    return meta


def _run_real(trial: Trial, scenario: Scenario, meta: dict, tdir: Path, session_id: str) -> None:
    """A real-network trial: the paths are checked, the session played from the condition's
    URL over the host's interfaces, the paths checked again; the checks go in trial.json."""
    from mpstream.hostnet import parse_interfaces, route_interface
    from mpstream.pathcheck import check_paths
    from mpstream.player.real import play_url

    cond = trial.condition
    transport = cond.transport or "mptcp"
    url = cond.url_for(trial.player)
    host = urlsplit(url).hostname or ""
    specs = parse_interfaces(cond.interfaces) if cond.interfaces else [route_interface(host)]
    meta.update(transport=transport, capacity_bps=None, session_id=session_id, url=url,
                paths=[{"index": i, "name": s.name} for i, s in enumerate(specs)],
                paths_in_use=list(range(len(specs) if transport == "mptcp" else 1)))
    checks = meta["path_checks"] = {}
    checks["before"] = check_paths(url, specs, seconds=cond.check_s, transport=transport)

    def keep(stack) -> None:
        session = _fetch_session(stack, session_id)
        write_json(tdir / "events.json", session.pop("events", []))
        write_json(tdir / "session.json", session)
        if Path(stack.access_log).is_file():
            shutil.copyfile(stack.access_log, tdir / "access.log")

    try:
        # The local server's files go to a temporary folder: a unix socket's path is short.
        result = play_url(url, player=trial.player, transport=transport,
                          interfaces=cond.interfaces, collector_url=None,
                          on_done=keep, browser=trial.browser or "chromium",
                          codec=trial.codec or "auto",
                          duration_s=scenario.duration_s, session_id=session_id,
                          scenario=scenario.name, trial=trial.round,
                          screenshot=tdir / "last-frame.png", buffer_s=scenario.buffer_s)
    finally:
        checks["after"] = check_paths(url, specs, seconds=cond.check_s, transport=transport)
    write_json(tdir / "summary.json", result)
    meta["path_bytes"] = [{"rx_bytes": p["rx_bytes"], "tx_bytes": p["tx_bytes"]}
                          for p in result["paths"]]
    if result.get("failure"):
        events = read_json(tdir / "events.json", []) or []
        if not any(e.get("type") == "startup" for e in events):
            raise TrialFailed(f"player: {result['failure']}")
        meta["player_failure"] = result["failure"]


class _Samplers:
    """What watches a trial: both ends' kernel samplers sharing one time origin (the events'
    t=0), the MPTcpExt counters of both namespaces before and after, and with `pcap` the
    packet headers on every client path interface and the server's."""

    def __init__(self, topo, tdir: Path, path_of, *, pcap: bool = False):
        t0 = time.monotonic()
        write_clock(tdir, t0, time.time())
        self.tdir = tdir
        self.samplers = [
            SubflowSampler(ns, host, tdir / f"samples-{host}.csv", path_of, t0=t0,
                           mptcp_out=tdir / f"samples-{host}-mptcp.csv")
            for host, ns in (("client", topo.client_ns), ("server", topo.server_ns))
        ]
        self.counters = CounterSnapshots({"client": topo.client_ns, "server": topo.server_ns})
        self.capture = None
        if pcap:
            targets = [(topo.client_ns, p.client_ifname, f"client-{p.client_ifname}")
                       for p in topo.paths]
            targets.append((topo.server_ns, "eth0", "server-eth0"))
            self.capture = PacketCapture(targets, tdir / "pcap")

    def __enter__(self):
        self.counters.take_before()
        started = []
        try:
            if self.capture is not None:
                self.capture.start()
                started.append(self.capture)
            for s in self.samplers:
                s.start()
                started.append(s)
        except BaseException:
            for thing in reversed(started):
                thing.stop()
            raise
        return self

    def __exit__(self, *exc):
        for s in self.samplers:
            s.stop()
        if self.capture is not None:
            self.capture.stop()
        try:
            self.counters.take_after()
        finally:
            write_json(self.tdir / "mptcp-counters.json", self.counters.as_json())


def _run_json(scenario: Scenario, scenario_path: Path | None, plan: list[Trial],
              trials: int) -> dict:
    return {
        "scenario": scenario.name,
        "description": scenario.description,
        "kind": scenario.kind,
        "scenario_file": str(scenario_path) if scenario_path else None,
        "trials": trials,
        "seed": scenario.seed,
        "duration_s": scenario.duration_s,
        "buffer_s": scenario.buffer_s,
        "live": scenario.live.model_dump(mode="json") if scenario.live else None,
        "players": scenario.players,
        "browsers": scenario.browsers,
        "codecs": scenario.codecs,
        "conditions": [c.model_dump(mode="json") for c in scenario.all_conditions()],
        "plan": [t.key for t in plan],
    }


def preflight(scenario: Scenario) -> None:
    """What every trial needs, checked once: otherwise each trial would fail the same way."""
    from mpstream.netem import teardown

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
                 pcap: bool = False) -> dict[str, str]:
    """Runs (or resumes) the scenario into out_dir; returns key -> status of every trial.

    `pcap`: keep a header-only packet capture of every trial (trials/<key>/pcap/)."""
    # SIGTERM tears down like Ctrl-C, and the run stays resumable.
    with signals_interrupt():
        return _run_scenario(scenario, out_dir, trials=trials, scenario_path=scenario_path,
                             retry_failed=retry_failed, console=console, progress=progress,
                             pcap=pcap)


def _run_scenario(scenario: Scenario, out_dir: Path, *, trials: int | None,
                  scenario_path: Path | None, retry_failed: bool, console: Console | None,
                  progress: bool, pcap: bool = False) -> dict[str, str]:
    console = console or Console()
    # Absolute: the servers of a trial run from their own working directories.
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    n = trials if trials is not None else scenario.trials
    plan = expand_trials(scenario, n)
    previous = read_json(out_dir / RUN_JSON)
    if previous and previous.get("scenario") != scenario.name:
        raise UserError(f"{out_dir} holds a run of scenario {previous.get('scenario')!r}, not "
                        f"{scenario.name!r}; give another --out folder")
    write_json(out_dir / RUN_JSON, _run_json(scenario, scenario_path, plan, n))
    if scenario_path and Path(scenario_path).is_file():
        shutil.copyfile(scenario_path, out_dir / "scenario.toml")
    run_id = out_dir.resolve().name

    done = finished_keys(out_dir)
    todo = [t for t in plan
            if t.key not in done or (retry_failed and done[t.key] == "failed")]
    if len(todo) < len(plan):
        console.print(f"resuming: {len(plan) - len(todo)} of {len(plan)} trials already done")
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
        return _run_trials(scenario, out_dir, plan, todo, done, run_id, media_dir,
                           scenario_path, console, progress, pcap)


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
                done: dict[str, str], run_id: str, media_dir: Path | None,
                scenario_path: Path | None, console: Console,
                progress: bool, pcap: bool = False) -> dict[str, str]:

    statuses = dict(done)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=not progress) as bar:
        task = bar.add_task("trials", total=len(plan), completed=len(plan) - len(todo))
        for trial in todo:
            bar.update(task, description=f"{trial.key}")
            try:
                meta = run_trial(scenario, trial, run_id=run_id, run_dir=out_dir,
                                 media_dir=media_dir, topo_name=f"run{os.getpid()}", pcap=pcap)
            except KeyboardInterrupt:
                bar.stop()
                console.print(f"interrupted during {trial.key}; resume with: mpstream run "
                              f"{scenario_path or scenario.name} --out {out_dir}")
                raise
            statuses[trial.key] = meta["status"]
            if meta["status"] != "ok":
                console.print(f"[red]trial {trial.key} failed:[/] {meta['reason'][:300]}",
                              highlight=False)
            bar.advance(task)
    failed = sum(1 for s in statuses.values() if s != "ok")
    console.print(f"{len(statuses)} trials in {out_dir}: {len(statuses) - failed} ok, "
                  f"{failed} failed")
    return statuses
