"""Workload kind "video": one headless player session per trial, with the network's competing
players beside it (runner: summary.json, events.json, session.json, access.log; each competitor
in <host>/). It needs the player page and the browsers, prepares the media (encoded once and
cached) or a live stream for the whole run, and computes the session's QoE figures from its
events through mpstream.qoe, the module the collector's summary calls too (docs/qoe.md)."""

from __future__ import annotations

import contextlib
import math
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from mpstream import phases
from mpstream.errors import UserError
from mpstream.netem.teardown import netns_pids
from mpstream.network import Network
from mpstream.player.abr import parse_abr_params, resolve_abr
from mpstream.proc import side_by_side, stop_pids
from mpstream.qoe.collector import CollectorClient, CollectorRefused
from mpstream.qoe.events import PlaybackEvent
from mpstream.qoe.metrics import (
    TRIAL_FIGURES,
    of_type,
    parse_events,
    session_figures,
    session_metrics,
    stalls_after,
)
from mpstream.qoe.scores import (
    SCORE_FIELDS,
    SCORE_METRICS,
    p1203_available,
    p1203_input,
    p1203_o46,
    session_scores,
)
from mpstream.runner.downloads import Downloads, competitor_flow
from mpstream.runner.layout import TrialData, read_json, write_json
from mpstream.runner.media import existing_tree, prepare_media
from mpstream.runner.metrics.common import (
    client_speaks_mptcp,
    cross_traffic_metrics,
    fairness_metrics,
    mean,
    num_or_nan,
    speaks_mptcp,
)
from mpstream.runner.metrics.evidence import HELD
from mpstream.runner.metrics.metric import Metric, declare
from mpstream.runner.record import MediaFacts
from mpstream.runner.resolved import ResolvedCondition
from mpstream.runner.scenario import LiveSpec, Scenario, Trial
from mpstream.runner.sites import site_class
from mpstream.runner.workloads import register
from mpstream.runner.workloads.base import (
    TRIAL_SLACK_S,
    TrialContext,
    TrialFailed,
    Workload,
    WorkloadOutcome,
)
from mpstream.transports.base import get_transport

if TYPE_CHECKING:
    from mpstream.player.session import PlayRequest, PlayResult
    from mpstream.server.stack import ServerStack


def in_mbits(session_figure: str, name: str) -> Metric:
    """A session's figure in bit/s (its declaration: qoe/metrics.py) as a trial reports it, in
    Mbit/s under a name of its own."""
    (figure,) = session_figures(session_figure)
    return replace(figure, name=name, unit="Mbit/s")


# The session's QoE, from mpstream.qoe, which declares each figure (name, label, unit) and
# whether a trial reports it (TRIAL_FIGURES): here, the order the report shows them in, by
# playback, quality, the media it got, its frames, its downloads and the parts of its startup.
PLAYBACK = declare(*session_figures(
    "startup_delay_ms", "stall_count", "stall_ms", "longest_stall_ms", "rebuffer_ratio"))
QUALITY = declare(in_mbits("mean_bitrate_bps", "mean_bitrate_mbps"),
                  *session_figures("switches", "down_switches", "bitrate_utilization"))
MEDIA = declare(*session_figures("segments", "played_s", "live_latency_mean_s",
                                 "live_latency_p95_s", "live_catchup_share"))
FRAMES = declare(Metric("decoded_frames", "decoded frames", "count"),
                 *session_figures("dropped_frames"))
DOWNLOADS = declare(in_mbits("mean_download_rate_bps", "download_rate_mbps"),
                    *session_figures("download_share"))
STARTUP = declare(*session_figures("manifest_ms", "first_segment_ms", "decode_ms"))
# The session's figures a trial gives under their own names, in the model's order; one the
# groups above do not place is shown after them.
QOE_COLUMNS = TRIAL_FIGURES
PLACED = {m.name for m in (*PLAYBACK, *QUALITY, *MEDIA, *FRAMES, *DOWNLOADS, *STARTUP)}
MORE_QOE = declare(*session_figures(*(name for name in TRIAL_FIGURES if name not in PLACED)))
AFTER_EVENT = declare(
    Metric("stalls_after_event", "stalls after the network event", "count"),
    Metric("stall_ms_after_event", "stall time after the network event", "ms"),
    Metric("longest_stall_after_event_ms", "longest stall after the network event", "ms"),
)
SCORES = declare(*SCORE_METRICS, Metric("p1203_o46", "ITU-T P.1203 O46", "MOS"))
USERS = declare(
    Metric("mptcp_user_bitrate_mbps", "time-weighted bitrate per MPTCP user", "Mbit/s"),
    Metric("tcp_user_bitrate_mbps", "time-weighted bitrate per TCP user", "Mbit/s"),
    Metric("mptcp_user_stall_ms", "stall time per MPTCP user", "ms"),
    Metric("tcp_user_stall_ms", "stall time per TCP user", "ms"),
)


class VideoSession(Workload):
    """A headless player session (runner: summary.json, events.json, session.json, access.log)."""

    kind = "video"
    actor = "player"
    plays_video = True
    tools = ("ip",)
    # The session's QoE first, then the segment evidence of its startup
    # (runner/metrics/evidence.py).
    shown = (*PLAYBACK, *QUALITY, *MEDIA, *FRAMES, *DOWNLOADS, *STARTUP, *MORE_QOE, *HELD,
             *AFTER_EVENT, *SCORES, *USERS)

    def check(self, scenario: Scenario) -> None:
        check_abrs(scenario)
        if scenario.media is not None and scenario.live is not None:
            raise ValueError("a video scenario needs either a [media] table (dir, or source and"
                             " ladder) or a [live] table (a live stream), not both")
        own_media = all(site_class(c.kind).brings_media for c in scenario.all_conditions())
        if scenario.media is None and scenario.live is None and not own_media:
            raise ValueError("a video scenario needs either a [media] table (dir, or source and"
                             " ladder) or a [live] table (a live stream)")

    def check_inputs(self, scenario: Scenario) -> None:
        if scenario.media is not None:
            existing_tree(scenario.media, scenario.base_dir)

    def refusal(self, scenario: Scenario, resolved: ResolvedCondition) -> str | None:
        """A low-latency live stream over a transport that cannot carry one (mphttp), the
        condition's own or a competing player's; a condition that plays a server of its own
        (a real network's URL) does not play the run's stream."""
        from mpstream.netem.competitors import with_transports

        stream = _low_latency_stream(scenario)
        if stream is None or site_class(resolved.kind).brings_media:
            return None
        network, transport = resolved.network, resolved.transport
        competing = with_transports(network) if network is not None else []
        players = [transport, *(speaks for user, speaks in competing if user.traffic == "same")]
        for speaks in players:
            refusal = speaks.low_latency_refusal()
            if refusal:
                who = "" if speaks is transport else "a competing player's "
                return f"{stream}: {who}{refusal}"
        return None

    def machine_refusals(self, scenario: Scenario) -> list[str]:
        from mpstream.player.browsers import check_browser
        from mpstream.player.session import DIST_DIR

        problems = []
        if not (DIST_DIR / "index.html").exists():
            problems.append(f"the player page is not built ({DIST_DIR}/index.html is missing): "
                            "run `make player-bundle`")
        for browser in scenario.browsers:
            try:
                check_browser(browser)
            except UserError as exc:
                problems.append(str(exc))
        return problems

    def bound_here(self, scenario: Scenario) -> str | None:
        if scenario.live is None:
            return None
        return ("it plays a live stream ([live]) that runs on this machine for the whole run")

    def prepare(self, scenario: Scenario, out_dir: Path, todo: list[Trial], console: Console,
                progress: bool, resources: contextlib.ExitStack) -> Path | None:
        if not todo:
            return None
        if scenario.live is not None:
            return resources.enter_context(live_stream(scenario.live, out_dir, console))
        if scenario.media is None:
            return None  # the conditions' servers have the media
        console.print("preparing media …")
        media_dir = prepare_media(scenario.media, scenario.base_dir, progress=progress)
        console.print(f"media: {media_dir}")
        check_codecs(media_dir, todo)
        return media_dir

    def metrics(self, rec: TrialData) -> dict[str, float]:
        return video_metrics(rec)

    def run(self, ctx: TrialContext) -> WorkloadOutcome:
        from mpstream.player.browsers import open_page
        from mpstream.player.session import library_shortfall, play_session

        player = ctx.trial.player or "dashjs"
        browser = ctx.trial.browser or "chromium"
        # The servers boot in a thread while the browser starts here: the two slowest steps of
        # a trial's set-up, and neither needs the other until the page is loaded.
        with side_by_side(
                ctx.site.serve_video(ctx.network, ctx.media_dir, ctx.tdir / "server", player),
                open_page(browser, ctx.network.netns("client"), wrap=ctx.transport.wrap)
        ) as ((server, manifest), page):
            phases.mark(phases.SERVERS_UP)
            media = media_facts(ctx.media_dir) if ctx.media_dir is not None else None
            request = play_request(ctx, player, browser, manifest)
            rivals = CompetingPlayers(ctx.network, server, request)
            cross = [competitor_flow(ctx, k, user, ctx.scenario.duration_s)
                     for k, user in enumerate(ctx.network.competitors) if user.cross_traffic]
            with Downloads(ctx.network, cross) as cross_traffic, ctx.watch():
                phases.mark(phases.WATCHING)
                ctx.network.start_events()
                # The wall clock of the profile's t=0, to place its timed events on the page's
                # clock (runner/metrics/common.py: stalls after a path failure).
                started_unix = time.time()
                cross_traffic.start()
                with rivals:
                    played = play_session(ctx.network, server, request, page)
                cross_traffic.wait(TRIAL_SLACK_S)
            # In the session's own order, which `play --json` prints.
            write_json(ctx.tdir / "summary.json", played.as_json(), sort_keys=False)
            try:
                events = keep_session(server, request, ctx.tdir)
            except TrialFailed:
                if played.failure is None:
                    raise
                events = []  # the page failed before it opened its session: that is the reason
            unplayed = rivals.keep(server, ctx.tdir)
            phases.mark(phases.RESULTS)
        phases.mark(phases.TORN_DOWN)
        started = any(e.get("type") == "startup" for e in events)
        failure = played.failure
        if failure and not started:
            # A page too slow to arrive says how much of it could have: read now, as nginx logs
            # a request only once the browser has closed its connection.
            short = library_shortfall(server.access_log,
                                      sum(p.get("rx_bytes", 0) for p in played.paths))
            failure = f"{failure}: {short}" if short else failure
        if started and unplayed:
            failure, started = "; ".join(unplayed), False
        return WorkloadOutcome(failure=failure, proof=played.proof, media=media,
                               transport_implementation=played.transport_implementation,
                               started=started, events_started_unix=started_unix,
                               metered=played.metered_figures(),
                               path_policy_toggles=played.toggles(),
                               redundant_bytes=played.redundant_bytes)


def play_request(ctx: TrialContext, player: str, browser: str, manifest: str) -> PlayRequest:
    """The trial's session as the player plays it: the scenario's, the condition's and the
    trial's settings, the session's names, what the site says of its paths."""
    from mpstream.player.livesync import LiveSync
    from mpstream.player.session import PlayRequest

    abr, abr_params = ctx.scenario.abr_request(player, ctx.trial.abr)
    resolved = ctx.resolved
    live = ctx.scenario.live_sync(resolved) or LiveSync()
    return PlayRequest(
        player=player, transport=ctx.transport, manifest_path=manifest,
        duration_s=ctx.scenario.duration_s, session_id=ctx.session.session_id,
        scenario=ctx.session.scenario, trial=ctx.session.trial,
        screenshot=ctx.session.screenshot, buffer_s=ctx.scenario.buffer_s,
        target_latency_s=live.target_s, catchup_max_rate=live.catchup_max_rate,
        catchup_min_rate=live.catchup_min_rate, max_drift_s=live.max_drift_s,
        report_timeout_s=ctx.scenario.report_timeout_s,
        collector_url=resolved.player.collector_url,
        browser=browser, codec=ctx.trial.codec or "auto",
        abr=abr, abr_params=abr_params, workdir=ctx.tdir, path_policy=resolved.path_policy,
        metered=resolved.paths.metered, held_paths=resolved.paths.held,
        deadline_marks=resolved.player.deadline_marks)


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
            view = network.competitor_network(user.host)
            # Its own folder in the trial's for what its transport writes (a hop's statistics).
            own = replace(request, transport=get_transport(user.transport), screenshot=None,
                          session_id=f"{request.session_id}-{user.host}"[:64],
                          workdir=request.workdir / user.host if request.workdir else None)
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
                events = keep_session(server, session.request, folder, access_log=False)
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
        from mpstream.player.session import play_session

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


def keep_session(server: ServerStack, request: PlayRequest, tdir: Path, *,
                 access_log: bool = True) -> list[dict[str, object]]:
    """The request's session and its events, from the collector it posted them to, and nginx's
    access log, into the trial's folder; returns the events."""
    session_id = request.session_id
    try:
        session = _collector(server, request.collector_url).session(session_id)
    except OSError as exc:
        raise TrialFailed(f"collector did not answer for session {session_id}: {exc}") from exc
    except CollectorRefused as exc:
        raise TrialFailed(f"collector has no session {session_id} (HTTP {exc.status})") from exc
    events = session.pop("events", [])
    write_json(tdir / "events.json", events)
    write_json(tdir / "session.json", session)
    if access_log and Path(server.access_log).is_file():
        shutil.copyfile(server.access_log, tdir / "access.log")
    return events


def _collector(server: ServerStack, collector_url: str | None) -> CollectorClient:
    """The collector the session posted to: one elsewhere when named; else the server's own,
    straight over its socket (the emulated paths may be down, and the server address is
    unreachable from outside the namespaces)."""
    if collector_url is None:
        return CollectorClient.over_socket(server.collector_socket)
    return CollectorClient.at(collector_url)


def media_facts(media_dir: Path) -> MediaFacts:
    """What the scores need of the encoded media and the probe does not record."""
    media = read_json(Path(media_dir) / "media.json", {}) or {}
    rates = [r.get("nominal_bitrate") for r in media.get("rungs", []) if r.get("nominal_bitrate")]
    return MediaFacts(frame_rate=media.get("frame_rate"), top_bitrate_bps=max(rates, default=None))


def check_abrs(scenario: Scenario) -> None:
    """Every rule in `abrs` and `abr_params` must be one each listed player has."""
    for player in scenario.players:
        for abr in scenario.abrs:
            try:
                resolve_abr(player, abr)
            except UserError as exc:
                raise ValueError(f"abrs: {exc}") from None
        for abr, params in scenario.abr_params.items():
            if abr not in scenario.abrs:
                raise ValueError(f"abr_params.{abr}: {abr} is not in abrs")
            try:
                parse_abr_params(player, resolve_abr(player, abr),
                                 [f"{k}={v:g}" for k, v in params.items()])
            except UserError as exc:
                raise ValueError(f"abr_params.{abr}: {exc}") from None


def check_codecs(media_dir: Path, trials: list[Trial]) -> None:
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



def _low_latency_stream(scenario: Scenario) -> str | None:
    """What makes the scenario's stream a low-latency one, as a refusal names it (None: it
    is none): its [live] table, or a media tree that a low-latency `mpstream live` writes."""
    from mpstream.manifests.lltree import read_low_latency

    if scenario.live is not None and scenario.live.low_latency:
        return "the [live] stream is low-latency (low_latency = true)"
    media = scenario.media.dir if scenario.media is not None else None
    if media is not None and read_low_latency(media) is not None:
        return f"the media {media} is a low-latency live stream"
    return None

@contextlib.contextmanager
def live_stream(live: LiveSpec, out_dir: Path, console: Console) -> Iterator[Path]:
    """The run's live stream: `mpstream live` writing into OUT/live-tree for as long as the
    trials run, then ended like Ctrl-C (its tree stays, ended, beside the trials)."""
    from mpstream.encoder.live import LiveConfig, live_in_background

    config = LiveConfig(source=live.source, ladder=live.ladder,
                        segment_duration=live.segment_duration, window_s=live.window_s,
                        out=out_dir / "live-tree", low_latency=live.low_latency_config())
    console.print(f"starting the live stream ({live.source}, ladder {live.ladder}) …")
    with live_in_background(config) as tree:
        # Every trial joins with a full window behind the edge, as a viewer of a running
        # channel would: the first trial waits for it once.
        time.sleep(min(live.window_s, 3 * live.segment_duration))
        console.print(f"live: {tree}")
        yield tree


# --- the figures ----------------------------------------------------------------------------


def event_page_ms(rec: TrialData) -> float | None:
    """Page time (ms, the events' clock) of the scenario's first timed network event (a path
    failure): the play request's page time plus the wall-clock time between the play request
    and the event. None when the trial had no timed event or the times are missing."""
    at = [e["at_s"] for e in rec.profile.get("events") or [] if e.get("at_s") is not None]
    t0 = rec.record.events_started_unix
    started = (rec.session or {}).get("started_at")
    startup = next((e for e in rec.events if e.get("type") == "startup"), None)
    if not at or t0 is None or not started or startup is None:
        return None
    play_request_ms = startup["t_ms"] - startup["data"]["startup_delay_ms"]
    play_request_unix = datetime.fromisoformat(started).timestamp()
    return play_request_ms + (t0 + min(at) - play_request_unix) * 1000


def video_fairness(rec: TrialData) -> dict[str, float]:
    """How the players of one network shared it: the MPTCP users' share of the media bytes
    all players downloaded, Jain's index over those bytes, and each class's mean bitrate and
    stall time per user. Empty when a player has no events (it never played)."""
    users = [(client_speaks_mptcp(rec), rec.events)]
    users += [(speaks_mptcp(u.transport), rec.competitor_events(u.host))
              for u in rec.record.competitors
              if not u.cross_traffic]
    if not all(events for _, events in users):
        return {}
    downloaded = [(multipath, float(sum(e["data"].get("bytes") or 0 for e in events
                                        if e.get("type") == "segment")))
                  for multipath, events in users]
    # Bytes, not rates: the class figures of a video trial are its bitrates and stalls.
    m = {k: v for k, v in fairness_metrics(downloaded).items()
         if k in ("mptcp_share", "jain_index")}
    qoe = [(multipath, session_metrics(events)) for multipath, events in users]
    for cls, wanted in (("mptcp", True), ("tcp", False)):
        mine = [q for multipath, q in qoe if multipath == wanted]
        m[f"{cls}_user_bitrate_mbps"] = mean([num_or_nan(q.mean_bitrate_bps) / 1e6
                                              for q in mine])
        m[f"{cls}_user_stall_ms"] = mean([q.stall_ms for q in mine])
    return m


def video_metrics(rec: TrialData) -> dict[str, float]:
    events = parse_events(rec.events)
    q = session_metrics(events, capacity_bps=rec.record.capacity_bps)
    m: dict[str, float] = {k: num_or_nan(getattr(q, k)) for k in QOE_COLUMNS}
    m["mean_bitrate_mbps"] = num_or_nan(q.mean_bitrate_bps) / 1e6
    m["download_rate_mbps"] = num_or_nan(q.mean_download_rate_bps) / 1e6
    # The media element's counters (getVideoPlaybackQuality): the decoder kept up or not;
    # NaN without a playback sample (the session never played).
    played_any = bool(of_type(events, PlaybackEvent))
    m["decoded_frames"] = float(q.total_frames) if played_any else math.nan
    m["dropped_frames"] = float(q.dropped_frames) if played_any else math.nan
    scores = session_scores(events)
    m.update({k: num_or_nan(scores[k]) for k in SCORE_FIELDS})
    if p1203_available():
        fps = rec.record.media.frame_rate if rec.record.media else None
        o46, _ = p1203_o46(p1203_input(events, fps=fps))
        m["p1203_o46"] = num_or_nan(o46)
    t_event = event_page_ms(rec)
    if t_event is not None:
        after = stalls_after(events, t_event)
        m["stalls_after_event"] = float(after["count"])
        m["stall_ms_after_event"] = after["ms"]
        m["longest_stall_after_event_ms"] = after["longest_ms"]
    if any(not u.cross_traffic for u in rec.record.competitors):
        m.update(video_fairness(rec))
    m.update(cross_traffic_metrics(rec))
    return m


register(VideoSession())
