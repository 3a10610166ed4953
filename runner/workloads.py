"""What a trial does on its network: a video session or a bulk transfer, behind one interface.

The trial runner (runner/trial.py) hands a workload a `TrialContext` (the network, the transport,
the trial's folder, where the video is served from, the samplers to run meanwhile) and gets back
a `WorkloadOutcome`; it never asks which workload it ran. A new workload is a subclass here and
an entry in `WORKLOADS` (keyed by the scenario's `kind`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from mpstream.errors import UserError
from mpstream.netem.teardown import netns_pids
from mpstream.network import Competitor, Network
from mpstream.pathpolicy import DeadlineMarks
from mpstream.player.session import PlayRequest, PlayResult, play_session
from mpstream.proc import stop, stop_pids
from mpstream.runner.layout import competitor_iperf_name, read_json, write_json
from mpstream.runner.record import MediaFacts
from mpstream.runner.scenario import Scenario, Trial
from mpstream.server.stack import ServerStack, unix_get
from mpstream.transport import Transport, for_network_mode

# Seconds a trial may take beyond its play duration (startup of servers and browser, teardown).
TRIAL_SLACK_S = 120
BULK_PORT = 5211  # not iperf3's default: other tools on the machine may hold that one


class TrialFailed(Exception):
    """The trial failed for a reason worth recording (not a bug)."""


class VideoSite(Protocol):
    """Where a condition's video is served from: nginx with the media and the collector on the
    emulated server, or the page and a collector on loopback with the media on a real server.
    Yields the server and the manifest to play (a path on it, or a URL)."""

    def serve_video(self, network: Network, media_dir: Path | None, workdir: Path,
                    player: str) -> AbstractContextManager[tuple[ServerStack, str]]:
        ...


@dataclass
class TrialContext:
    network: Network
    transport: Transport
    scenario: Scenario
    trial: Trial
    tdir: Path
    session_id: str
    media_dir: Path | None
    site: VideoSite
    watch: Callable[[], AbstractContextManager[object]]  # the samplers, for the workload's span
    # The path policy and the metered paths' prices per GB (None: a network that does not say).
    path_policy: str | None = None
    metered: dict[int, float | None] | None = None


class WorkloadOutcome(BaseModel):
    """`failure`: why the workload broke off (None: it did not). `started`: it got far enough
    for its data to be a result (a video session that showed a frame and then lost its only
    path is a result; one that never showed a frame is a failed trial)."""

    failure: str | None = None
    started: bool = True
    proof: dict[str, int] | None = None
    transport_implementation: str | None = None
    media: MediaFacts | None = None
    events_started_unix: float | None = None
    # The session's metered bytes, share and cost, and the path policy's toggles.
    metered: dict[str, float | None] | None = None
    path_policy_toggles: list[dict[str, Any]] = []
    # Bytes the transport sent more than once on purpose (None: it never does).
    redundant_bytes: int | None = None


class Workload(ABC):
    kind: ClassVar[str]  # the scenario kind that runs it
    actor: ClassVar[str]  # what failed, in a failed trial's reason ("player: …")

    @abstractmethod
    def run(self, ctx: TrialContext) -> WorkloadOutcome: ...


class VideoSession(Workload):
    """A headless player session (runner: summary.json, events.json, session.json, access.log)."""

    kind = "video"
    actor = "player"

    def run(self, ctx: TrialContext) -> WorkloadOutcome:
        player = ctx.trial.player or "dashjs"
        with ctx.site.serve_video(ctx.network, ctx.media_dir, ctx.tdir / "server",
                                  player) as (server, manifest):
            media = media_facts(ctx.media_dir) if ctx.media_dir is not None else None
            live = ctx.scenario.live
            abr, abr_params = ctx.scenario.abr_request(player, ctx.trial.abr)
            request = PlayRequest(
                player=player, transport=ctx.transport, manifest_path=manifest,
                duration_s=ctx.scenario.duration_s, session_id=ctx.session_id,
                scenario=ctx.scenario.name, trial=ctx.trial.round,
                screenshot=ctx.tdir / "last-frame.png", buffer_s=ctx.scenario.buffer_s,
                target_latency_s=live.target_latency_s if live else None,
                browser=ctx.trial.browser or "chromium", codec=ctx.trial.codec or "auto",
                abr=abr, abr_params=abr_params, workdir=ctx.tdir, path_policy=ctx.path_policy,
                metered=ctx.metered, deadline_marks=marks_of(ctx.trial))
            rivals = CompetingPlayers(ctx.network, server, request)
            cross = [competitor_flow(ctx, k, user, ctx.scenario.duration_s)
                     for k, user in enumerate(ctx.network.competitors) if user.cross_traffic]
            with Downloads(ctx.network, cross) as cross_traffic, ctx.watch():
                ctx.network.start_events()
                # The wall clock of the profile's t=0, to place its timed events on the page's
                # clock (runner/metrics.py: stalls after a path failure).
                started_unix = time.time()
                cross_traffic.start()
                with rivals:
                    played = play_session(ctx.network, server, request)
                cross_traffic.wait(TRIAL_SLACK_S)
            write_json(ctx.tdir / "summary.json", played.as_json())
            events = keep_session(server, ctx.session_id, ctx.tdir)
            unplayed = rivals.keep(server, ctx.tdir)
        started = any(e.get("type") == "startup" for e in events)
        failure = played.failure
        if started and unplayed:
            failure, started = "; ".join(unplayed), False
        return WorkloadOutcome(failure=failure, proof=played.proof, media=media,
                               transport_implementation=played.transport_implementation,
                               started=started, events_started_unix=started_unix,
                               metered=played.metered_figures(),
                               path_policy_toggles=played.toggles(),
                               redundant_bytes=played.redundant_bytes)


def marks_of(trial: Trial) -> DeadlineMarks:
    """The condition's deadline marks (none given: the defaults)."""
    marks = trial.condition.deadline_marks
    return DeadlineMarks(*marks) if marks else DeadlineMarks()


class CompetingPlayers:
    """The players of a network's competing clients (those that are not cross traffic): each
    plays the same media from the same server as the trial's client, at the same time, in a
    browser in its own namespace, over its own transport (a thread each, started on entry). On
    the way out they are waited for; when the client's session broke off (an error, Ctrl-C)
    their browsers are stopped first."""

    JOIN_TIMEOUT_S = 60.0

    def __init__(self, network: Network, server: ServerStack, request: PlayRequest):
        self.server = server
        self.sessions = []
        for user in network.competitors:
            if user.cross_traffic is not None:
                continue  # a bulk download (Downloads), not a player
            transport = for_network_mode("mptcp" if user.mptcp else "tcp")
            view = network.competitor_network(user.host)
            own = replace(request, transport=transport, screenshot=None,
                          session_id=f"{request.session_id}-{user.host}"[:64])
            self.sessions.append(RivalSession(user.host, view, own))

    def __enter__(self) -> CompetingPlayers:
        for session in self.sessions:
            session.thread = threading.Thread(target=session.play, args=(self.server,),
                                              name=f"player-{session.host}", daemon=True)
            session.thread.start()
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is not None:
            for session in self.sessions:
                stop_pids(netns_pids(session.network.netns("client") or ""))
        for session in self.sessions:
            if session.thread is not None:
                session.thread.join(session.request.duration_s + self.JOIN_TIMEOUT_S
                                    if exc_type is None else self.JOIN_TIMEOUT_S)

    def keep(self, server: ServerStack, tdir: Path) -> list[str]:
        """Each competitor's summary, session and events into the trial folder's <host>/; a
        competitor whose player failed is recorded as such (its failure in summary.json).
        Returns why each competitor that never showed a frame did not."""
        unplayed = []
        for session in self.sessions:
            folder = tdir / session.host
            folder.mkdir(exist_ok=True)
            if session.result is not None:
                write_json(folder / "summary.json", session.result.as_json())
            else:
                write_json(folder / "summary.json", {"failure": session.failure or
                                                     "the player did not finish"})
            events: list[dict[str, object]] = []
            with contextlib.suppress(TrialFailed):  # a session the collector never saw
                events = keep_session(server, session.request.session_id, folder,
                                      access_log=False)
            reason = session.unplayed(events)
            if reason is not None:
                unplayed.append(reason)
        return unplayed


@dataclass
class RivalSession:
    host: str
    network: Network
    request: PlayRequest
    thread: threading.Thread | None = None
    result: PlayResult | None = None
    failure: str | None = None

    def play(self, server: ServerStack) -> None:
        try:
            self.result = play_session(self.network, server, self.request)
        except Exception as exc:  # recorded beside the trial's own outcome
            self.failure = f"{type(exc).__name__}: {exc}"

    def unplayed(self, events: list[dict[str, object]]) -> str | None:
        """Why this competitor never showed a frame (None: it did). Such a trial measured no
        sharing (the others had the network to themselves), so it fails, and `run
        --retry-failed` runs it again; one that played and then broke is a result."""
        if any(e.get("type") == "startup" for e in events):
            return None
        why = self.failure or (self.result.failure if self.result is not None else None)
        return f"competing player {self.host}: {why or 'it showed no frame'}"


def keep_session(server: ServerStack, session_id: str, tdir: Path, *,
                 access_log: bool = True) -> list[dict[str, object]]:
    """The session and its events, straight from the collector's own socket (the emulated
    paths may be down, and the server address is unreachable from outside the namespaces), and
    nginx's access log, into the trial's folder; returns the events."""
    try:
        status, body = unix_get(Path(server.collector_socket),
                                f"/api/v1/sessions/{session_id}")
    except OSError as exc:
        raise TrialFailed(f"collector did not answer for session {session_id}: {exc}") from exc
    if status != 200:
        raise TrialFailed(f"collector has no session {session_id} (HTTP {status})")
    session = json.loads(body)
    events = session.pop("events", [])
    write_json(tdir / "events.json", events)
    write_json(tdir / "session.json", session)
    if access_log and Path(server.access_log).is_file():
        shutil.copyfile(server.access_log, tdir / "access.log")
    return events


def media_facts(media_dir: Path) -> MediaFacts:
    """What the scores need of the encoded media and the probe does not record."""
    media = read_json(Path(media_dir) / "media.json", {}) or {}
    rates = [r.get("nominal_bitrate") for r in media.get("rungs", []) if r.get("nominal_bitrate")]
    return MediaFacts(frame_rate=media.get("frame_rate"), top_bitrate_bps=max(rates, default=None))


class BulkTransfer(Workload):
    """One iperf3 transfer from the server to the client (-R), as long as the scenario's
    duration after its warm-up (iperf.json), over the trial's transport, proven on the wire
    like a session; and at the same time one from the server to each competing client of the
    network, over its own transport (iperf-<host>.json), cross traffic on its schedule."""

    kind = "iperf"
    actor = "iperf3"

    def run(self, ctx: TrialContext) -> WorkloadOutcome:
        net, scenario = ctx.network, ctx.scenario
        seconds = scenario.warmup_s + scenario.duration_s
        flows = [BulkFlow("client", ctx.transport, BULK_PORT, ctx.tdir / "iperf.json",
                          seconds=seconds, omit_s=scenario.warmup_s)]
        flows += [competitor_flow(ctx, k, user, seconds)
                  for k, user in enumerate(net.competitors)]
        with Downloads(net, flows) as downloads:
            before = ctx.transport.before(net)
            with ctx.watch():
                net.start_events()
                started_unix = time.time()
                downloads.start()
                downloads.wait(seconds + TRIAL_SLACK_S)
            proof = ctx.transport.prove(net, before, "iperf3")
        return WorkloadOutcome(failure=proof.problem, started=proof.problem is None,
                               proof=proof.counters or None, events_started_unix=started_unix)


def competitor_flow(ctx: TrialContext, k: int, user: Competitor, trial_s: float) -> BulkFlow:
    """Competitor `k`'s download in a trial of `trial_s` seconds: what the client does (from
    0, with the client's warm-up left out), or its cross traffic's schedule."""
    transport = for_network_mode("mptcp" if user.mptcp else "tcp")
    output = ctx.tdir / competitor_iperf_name(user.host)
    port = BULK_PORT + 1 + k
    if user.cross_traffic is None:
        return BulkFlow(user.host, transport, port, output, seconds=trial_s,
                        omit_s=ctx.scenario.warmup_s)
    start_s, stop_s = user.cross_traffic
    end_s = min(stop_s, trial_s) if stop_s is not None else trial_s
    if end_s - start_s < 1:
        raise UserError(f"{user.name}'s cross traffic starts at {start_s:g} s, and the trial's "
                        f"transfers end at {trial_s:g} s: start it earlier or make the scenario "
                        "longer")
    return BulkFlow(user.host, transport, port, output, seconds=end_s - start_s,
                    start_s=start_s)


@dataclass
class BulkFlow:
    """One user's download: iperf3 -R from the server's port `port` to `host`, starting
    `start_s` after the others' start, for `seconds` (the first `omit_s` left out of iperf3's
    figures); its JSON goes to `output`."""

    host: str
    transport: Transport
    port: int
    output: Path
    seconds: float
    start_s: float = 0.0
    omit_s: float = 0.0

    def argv(self, net: Network) -> list[str]:
        argv = ["iperf3", "-c", net.server_addr, "-p", str(self.port), "-R", "-J",
                "-t", f"{self.seconds:g}"]
        if self.omit_s:
            argv += ["-O", f"{self.omit_s:g}"]
        return argv


class Downloads:
    """Bulk downloads from the server, one iperf3 server and client each: the servers listen on
    entry, `start()` starts each client at its `start_s`, `wait()` waits for all and writes
    their JSON; on the way out everything still running is stopped (an error, Ctrl-C)."""

    def __init__(self, net: Network, flows: list[BulkFlow]):
        self.net, self.flows = net, flows
        self.servers: list[subprocess.Popen[str]] = []
        self.clients: dict[str, subprocess.Popen[str]] = {}
        self.timers: list[threading.Timer] = []
        self.lock = threading.Lock()
        self.closed = False

    def __enter__(self) -> Downloads:
        try:
            for flow in self.flows:
                self.servers.append(self.net.popen(
                    "server", ["iperf3", "-s", "-1", "-p", str(flow.port)],
                    wrap=flow.transport.wrap, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    text=True))
                self.net.wait_listening("server", flow.port, server=self.servers[-1])
        except BaseException:
            self.__exit__()
            raise
        return self

    def start(self) -> None:
        for flow in self.flows:
            if flow.start_s <= 0:
                self._start(flow)
            else:
                timer = threading.Timer(flow.start_s, self._start, args=(flow,))
                timer.daemon = True
                self.timers.append(timer)
                timer.start()

    def _start(self, flow: BulkFlow) -> None:
        with self.lock:
            if not self.closed:
                self.clients[flow.host] = self.net.popen(
                    flow.host, flow.argv(self.net), wrap=flow.transport.wrap,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait(self, timeout_s: float) -> None:
        """Until every download has ended (each within `timeout_s` of now); their JSON into
        their files; an iperf3 that failed fails the trial with its own words."""
        for timer in self.timers:
            timer.join()
        for flow in self.flows:
            client = self.clients[flow.host]
            out, err = client.communicate(timeout=timeout_s)
            flow.output.write_text(out)
            if client.returncode != 0:
                who = "" if flow.host == "client" else f" ({flow.host})"
                raise TrialFailed(f"iperf3{who} exit {client.returncode}: "
                                  f"{_iperf_error(out, err)}")

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.closed = True
        for timer in self.timers:
            timer.cancel()
        for proc in [*self.clients.values(), *self.servers]:
            stop(proc, timeout=5)


def _iperf_error(stdout: str, stderr: str) -> str:
    """iperf3's own words: its JSON's `error`, else what it printed on stderr."""
    try:
        return str(json.loads(stdout)["error"])[:300]
    except (ValueError, KeyError, TypeError):
        return stderr.strip()[:300]


WORKLOADS: dict[str, Workload] = {w.kind: w for w in (VideoSession(), BulkTransfer())}
