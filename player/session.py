"""One automated playback session: a headless browser (Debian's Chromium or Firefox ESR, see
player/browsers.py) in a topology's client namespace, every socket of it there, and MPTCP
(under `mptcpize run`) when asked for.

The session proves its transport rather than trusting the wrapper: with MPTCP, the client
namespace's MPTCP counters must show MP_CAPABLE connections (and MP_JOIN subflows when the
topology has more than one path) opened during the session, or the session fails saying so.
A browser whose network code escaped `mptcpize` (a process of its own that dropped LD_PRELOAD,
say) would otherwise measure plain TCP under an MPTCP label.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, TypedDict
from urllib.parse import urlencode

from mpstream import phases
from mpstream.errors import UserError
from mpstream.jsonlines import read_json_lines
from mpstream.netem.receivestall import receive_stall
from mpstream.network import Network, PathCounters, PathInfo
from mpstream.player.abr import parse_abr_params, resolve_abr
from mpstream.player.browsers import (
    BROWSERS,
    BrowserError,
    BrowserGone,
    BrowserTimeout,
    Page,
    check_browser,
    chromium_in_namespace,
    open_page,
)
from mpstream.player.codecs import CODECS, family
from mpstream.qoe.collector import CollectorClient, CollectorRefused
from mpstream.qoe.events import (
    BaseEvent,
    EndData,
    EndEvent,
    ErrorData,
    ErrorEvent,
    PlaybackEvent,
)
from mpstream.scratch import session_tempdir
from mpstream.transports import pathpolicy
from mpstream.transports.base import Carrier, Transport

DIST_DIR = Path(__file__).resolve().parent / "dist"
PLAYERS = {"hlsjs": "hls", "dashjs": "dash"}
MANIFESTS = {"hlsjs": "/media/hls/master.m3u8", "dashjs": "/media/dash/manifest.mpd"}
# Kept under its old name for callers that drive Chromium's Playwright Browser themselves.
browser_in_namespace = chromium_in_namespace

PAGE_LOAD_TIMEOUT_S = 60.0
STARTUP_TIMEOUT_S = 30.0
# The page drains its event queue for up to its report_timeout (15 s unless told) after the
# end; a little more on top.
REPORT_TIMEOUT_S = 15.0
DRAIN_MARGIN_S = 10.0
START_MARGIN_S = 15.0
SCREENSHOT_AFTER_S = 4.0
HUD_TEXT = """Object.fromEntries([...document.querySelectorAll('#hud dd')]
    .map((dd) => [dd.dataset.field, dd.textContent]))"""


# The name under which a PlayRequest field goes to the player page as a query parameter
# (docs/player.md), sent when it differs from the field's default.
PAGE_PARAMETER = "page_parameter"


def _page(name: str, default: Any = None) -> Any:
    """A field of PlayRequest that the page is told as its query parameter `name`."""
    return field(default=default, metadata={PAGE_PARAMETER: name})


@dataclass(frozen=True)
class PlayRequest:
    """One session to play. `manifest_path`: a path on the server, or any manifest's URL.
    `duration_s` counts from the play request. `buffer_s` caps how far ahead the player
    buffers (default: the library's own target); `target_latency_s` sets how far behind the
    live edge a live stream is played; `codec` (auto, avc, hevc) restricts the video codec
    family. `abr` names the adaptation rule (docs/abr.md; None: the player's default) and
    `abr_params` its numeric parameters. Events go to `collector_url` when given (a collector on
    another host), else to the page server's collector. A new page parameter is a field made
    by `_page`: page_url sends it."""

    player: str
    transport: Transport
    session_id: str
    duration_s: float = _page("duration", MISSING)
    manifest_path: str = ""
    scenario: str | None = _page("scenario")
    trial: int | None = _page("trial")
    screenshot: Path | None = None
    startup_timeout_s: float = STARTUP_TIMEOUT_S
    # How long the page keeps sending unsent events after the end (None: the page's 15 s).
    report_timeout_s: float | None = _page("report_timeout")
    buffer_s: float | None = _page("buffer")
    collector_url: str | None = None
    target_latency_s: float | None = _page("target_latency")
    # How a live stream's player catches up (player/livesync.py; None: the page's default).
    catchup_max_rate: float | None = _page("catchup_max_rate")
    catchup_min_rate: float | None = _page("catchup_min_rate")
    max_drift_s: float | None = _page("max_drift")
    browser: str = "chromium"
    codec: str = _page("codec", "auto")
    abr: str | None = _page("abr")
    abr_params: tuple[tuple[str, float], ...] = _page("abr_param", ())
    # Where the transport's carrier writes (the QUIC hop's statistics and qlog; None: nowhere
    # kept).
    workdir: Path | None = None
    # When the metered paths carry data (mpstream/transports/pathpolicy.py: a trial's condition
    # resolved it; a session of no condition runs `always`), the paths it holds back, the
    # metered paths' prices per GB by path index (None: a network that does not say), and the
    # deadline policy's marks.
    path_policy: pathpolicy.PathPolicy = field(default_factory=pathpolicy.Always)
    held_paths: tuple[int, ...] = ()
    metered: dict[int, float | None] | None = None
    deadline_marks: pathpolicy.DeadlineMarks = field(default_factory=pathpolicy.DeadlineMarks)

    @property
    def manifest(self) -> str:
        return self.manifest_path or MANIFESTS.get(self.player, "")


def page_url(base_url: str, request: PlayRequest, manifest: str | None = None,
             spared: Sequence[str] = (), paths_url: str | None = None) -> str:
    """The player page's URL for one session (query parameters: see docs/player.md);
    `manifest` in place of the request's own (a carrier's address of it); `spared` the client's
    addresses of the paths the path policy spares (`spared_addresses`); `paths_url` where the
    carrier answers with its own per-path figures (Carrier.paths_url)."""
    r = request
    params: dict[str, Any] = {
        "src": r.manifest if manifest is None else manifest,
        "player": r.player,
        "session": r.session_id,
        "transport": r.transport.name,
        "collector": r.collector_url or "/api/v1",
        "startup_timeout": f"{r.startup_timeout_s:g}",
    }
    if r.transport.carries_http_only:
        params["seen_by"] = "carrier"  # the server sees only the carrier's own connections
    if spared:
        params["spared"] = ",".join(spared)
    if paths_url:
        params["paths_url"] = paths_url
    for f in fields(r):
        value = getattr(r, f.name)
        if PAGE_PARAMETER in f.metadata and value != f.default:
            params[f.metadata[PAGE_PARAMETER]] = _query_value(value)
    return f"{base_url.rstrip('/')}/player/index.html?{urlencode(params, doseq=True)}"


def spared_addresses(paths: Sequence[PathInfo], request: PlayRequest) -> list[str]:
    """The client's addresses of the paths the request's path policy spares for the whole
    session (a metered path under backup or deadline): the multipath rule never lets them lift
    the rung (docs/abr.md#multipath); none for a policy that lets its held paths go."""
    if not request.path_policy.spares:
        return []
    return [p.client_addr for p in paths if p.index in request.held_paths]


def _query_value(value: object) -> str | list[str]:
    """A field's value as the page reads it: numbers shortest, parameter pairs as KEY=VALUE."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple | list):
        return [f"{key}={number:g}" for key, number in value]
    return str(value)


def library_shortfall(access_log: Path, received_bytes: int) -> str | None:
    """How much of the player library could have arrived, when not all of it: the page imports
    it after it has loaded (player/build.mjs: the chunks/ of DIST_DIR), so of what the client's
    paths received (`received_bytes`, headers too) the page's other files took their size
    first. The files asked for are in the server's access log (nginx logs a request once it
    ends: read it when the browser is gone). None when the library could all have arrived."""
    asked: dict[str, int] = {}
    for entry in read_json_lines(access_log):
        uri = str(entry.get("uri") or "")
        served = DIST_DIR / uri.removeprefix("/player/")
        if uri.startswith("/player/") and served.is_file():
            asked[uri] = served.stat().st_size
    library = {uri: size for uri, size in asked.items() if uri.startswith("/player/chunks/")}
    size = sum(library.values())
    at_most = max(0, received_bytes - (sum(asked.values()) - size))
    if not library or at_most >= size:
        return None
    # The bundler splits what the two players share into chunks of their own.
    scripts = "script" if len(library) == 1 else "scripts"
    return (f"at most {at_most / 1000:.0f} KB of its {size / 1000:.0f} KB {scripts} "
            f"{', '.join(library)} arrived, the client's paths receiving "
            f"{received_bytes / 1000:.0f} KB in all")


class PageServer(Protocol):
    """What serves the player page (and, usually, the media and the collector)."""

    @property
    def base_url(self) -> str: ...

    @property
    def collector_socket(self) -> Path | None: ...


class PathReport(TypedDict, total=False):
    index: int
    address: str
    interface: str
    rx_bytes: int
    tx_bytes: int
    rx_packets: int
    rx_share: float


JsonObject = dict[str, object]


@dataclass
class PlayResult:
    """A played session: the collector's summary of it (`summary`), the bytes each client path
    carried (from the kernel's interface counters), what proves the transport on the wire
    (`proof`, e.g. MP_CAPABLE and MP_JOIN), the codec decoded, the page's own account and
    `failure`: None, or why the session failed (manifest not found, no frame, collector down,
    the browser killed, the transport not really used, another codec than asked for)."""

    summary: JsonObject
    browser: str
    transport: str
    codec_requested: str
    codec: str | None
    paths: list[PathReport]
    proof: dict[str, int] | None
    page: JsonObject
    url: str
    failure: str | None = None
    hud: dict[str, str] | None = None
    console: list[str] = field(default_factory=list)
    screenshot_taken: bool = False
    # What carried the session when not the transport's own name (the QUIC library and draft).
    transport_implementation: str | None = None
    # The transport's path scheduler (None: a transport with none to choose).
    scheduler: str | None = None
    # Bytes sent more than once on purpose (None: the transport never does).
    redundant_bytes: int | None = None
    # The path policy, the metered paths' prices (None: unknown network) and what the
    # policy's controller did (its toggles, each with its reason and the buffer level).
    path_policy: str | None = None
    metered: dict[int, float | None] | None = None
    policy_report: dict[str, Any] | None = None

    def metered_figures(self) -> dict[str, float | None] | None:
        """metered_bytes, metered_share and metered_cost (None: the network does not say which
        paths are metered)."""
        if self.metered is None:
            return None
        return pathpolicy.metered_figures([dict(p) for p in self.paths], self.metered)

    def toggles(self) -> list[dict[str, Any]]:
        """The path policy's toggles, each with its reason and the buffer level."""
        return list((self.policy_report or {}).get("toggles") or [])

    def as_json(self) -> JsonObject:
        """The flat object of `play --json` and a trial's summary.json: the summary's fields,
        then the session's own."""
        out: JsonObject = dict(self.summary)
        out.update(browser=self.browser, codec_requested=self.codec_requested,
                   paths=self.paths, proof=self.proof, page=self.page, failure=self.failure,
                   url=self.url)
        out.setdefault("transport", self.transport)
        out["scheduler"] = self.scheduler
        out["redundant_bytes"] = self.redundant_bytes
        out["path_policy"] = self.path_policy
        figures = self.metered_figures()
        if figures is not None:
            out.update(figures)
        if self.policy_report is not None:
            out["path_policy_toggles"] = self.toggles()
        if self.transport_implementation:
            out["transport_implementation"] = self.transport_implementation
        out.setdefault("codec", self.codec)
        if self.screenshot_taken:
            out["hud"] = self.hud  # what the HUD said when the screenshot was taken
        if self.failure:
            out["console"] = self.console[-20:]
        return out


def check_prerequisites(player: str, manifest_path: str, browser: str = "chromium",
                        codec: str = "auto", abr: str | None = None,
                        abr_params: tuple[tuple[str, float], ...] = ()) -> None:
    if player not in PLAYERS:
        raise UserError(f"player {player!r}: choose one of {', '.join(PLAYERS)}")
    if not manifest_path.startswith(("/", "http://", "https://")):
        raise UserError(f"manifest_path {manifest_path!r}: give a path on the server, e.g. "
                        f"{MANIFESTS[player]}, or an http(s) URL")
    if not (DIST_DIR / "index.html").exists():
        raise UserError(f"the player page is not built ({DIST_DIR}/index.html is missing): "
                        "run `make player-bundle`")
    if codec not in CODECS:
        raise UserError(f"codec {codec!r}: choose one of {', '.join(CODECS)}")
    if browser not in BROWSERS:
        raise UserError(f"browser {browser!r}: choose one of {', '.join(BROWSERS)}")
    chosen = resolve_abr(player, abr)
    parse_abr_params(player, chosen, [f"{k}={v:g}" for k, v in abr_params])
    check_browser(browser)


def _collector(server: PageServer, r: PlayRequest) -> CollectorClient | None:
    """The session's collector: one elsewhere when `collector_url` names it; else straight
    over the collector's socket when the server has one (it answers even when the emulated
    paths are down, or the browser is gone); None: only the page reaches it."""
    if r.collector_url is not None:
        return CollectorClient.at(r.collector_url)
    if server.collector_socket is not None:
        return CollectorClient.over_socket(server.collector_socket)
    return None


def _summary(collector: CollectorClient | None, page: Page | None, session_id: str
             ) -> JsonObject | None:
    """The collector's summary of the session (None: it has none, or does not answer), asked
    through the page when only the page reaches the collector."""
    if collector is not None:
        with contextlib.suppress(OSError, ValueError, CollectorRefused):
            return collector.summary(session_id)
        return None
    if page is None:
        return None
    url = json.dumps(f"/api/v1/sessions/{session_id}/summary")
    return page.evaluate(f"fetch({url}).then((r) => (r.ok ? r.json() : null))")


def _new_events(server: PageServer, r: PlayRequest) -> pathpolicy.EventsAfter:
    """What the path-policy controller polls: the session's events after the last it saw
    (None while the collector has none to give: the page has not registered the session yet,
    or the collector does not answer this once)."""
    collector = _collector(server, r)

    def after(seq: int) -> list[BaseEvent] | None:
        if collector is None:
            return None
        with contextlib.suppress(OSError, ValueError, CollectorRefused):
            return collector.events_since(r.session_id, seq)
        return None

    return after


def _record_browser_failure(collector: CollectorClient, session_id: str, message: str) -> None:
    """The page cannot end a session whose browser died: its error and end events are added
    here, after the last event that reached the collector, so the session ends as failed."""
    # Refused or unanswered: the page never registered the session, or the collector is gone;
    # there is nothing to end then.
    with contextlib.suppress(OSError, ValueError, CollectorRefused):
        events = collector.events_since(session_id)
        if not any(isinstance(e, EndEvent) for e in events):
            collector.post_events(session_id, _failed_ending(events, message))


def _failed_ending(events: list[BaseEvent], message: str) -> list[BaseEvent]:
    """An error and an end, after `events`, at the last event's time and the last playback
    position."""
    seq = max((e.seq for e in events), default=-1) + 1
    t_ms = max((e.t_ms for e in events), default=0)
    position = max((e.data.position for e in events if isinstance(e, PlaybackEvent)), default=0)
    return [
        ErrorEvent(seq=seq, t_ms=t_ms, type="error", data=ErrorData(
            message=message[:2000], fatal=True, code="browser_exited")),
        EndEvent(seq=seq + 1, t_ms=t_ms, type="end",
                 data=EndData(reason="error", position=position)),
    ]


def _path_report(network: Network, before: list[PathCounters],
                 after: list[PathCounters]) -> list[PathReport]:
    paths: list[PathReport] = []
    for info, b, a in zip(network.paths, before, after, strict=True):
        paths.append({
            "index": info.index,
            "address": info.client_addr,
            "interface": info.client_ifname,
            "rx_bytes": a.get("rx_bytes", 0) - b.get("rx_bytes", 0),
            "tx_bytes": a.get("tx_bytes", 0) - b.get("tx_bytes", 0),
        })
        if "rx_packets" in a and "rx_packets" in b:
            paths[-1]["rx_packets"] = a["rx_packets"] - b["rx_packets"]
    total = sum(p.get("rx_bytes", 0) for p in paths) or 1
    for p in paths:
        p["rx_share"] = round(p.get("rx_bytes", 0) / total, 4)
    return paths


def play_session(network: Network, server: PageServer, request: PlayRequest,
                 page: Page | None = None) -> PlayResult:
    """Plays `request` from `server` in a headless browser on `network`'s client host until the
    page ends the session, and proves the transport on the wire (the client's counters before
    and after: a browser whose network code escaped the transport's wrapper would otherwise be
    measured under the wrong label). `page`: a page of a browser the caller started (with
    `open_page` in the client's namespace and the transport's wrapper, e.g. while the servers
    booted), which the caller closes; else one is opened here and closed before this returns."""
    r = request
    check_prerequisites(r.player, r.manifest, r.browser, r.codec, r.abr, r.abr_params)
    with contextlib.ExitStack() as held:
        workdir = r.workdir or Path(held.enter_context(session_tempdir("carrier")))
        carried = held.enter_context(
            r.transport.carrier(network, server.base_url, workdir, network.cc))
        return _play(network, server, r, carried, page)


def _play(network: Network, server: PageServer, r: PlayRequest, carried: Carrier,
          page: Page | None) -> PlayResult:
    # A carrier that carries media from a server other than the page's (mphttp with --url)
    # gives the manifest's address through itself.
    media_url = getattr(carried, "media_url", None)
    manifest = media_url(r.manifest) if media_url is not None else None
    # After the manifest's address: mphttp with --url starts its proxy for it.
    url = page_url(carried.base_url, r, manifest, spared_addresses(network.paths, r),
                   carried.paths_url)
    before = network.path_bytes()
    proof_before = r.transport.before(network)
    policy = _policy_controller(network, server, r, carried)
    with policy.running():
        visit = _visit(network, server, r, url, page)
    after = network.path_bytes()
    found = carried.proof() or r.transport.prove(network, proof_before, r.browser)
    codec = _decoded_codec(visit.summary, visit.report)
    failures = Failures(
        page=_text(visit.report.get("failure")), browser=visit.failure,
        collector=None if visit.summary is not None else _no_summary(r.session_id, visit.report),
        policy=policy.failure, carrier=carried.problem(), proof=found.problem,
        codec=_codec_failure(r.codec, codec))
    return PlayResult(
        summary=visit.summary or {"session": r.session_id, "player": r.player,
                                  "transport": r.transport.name},
        browser=r.browser, transport=r.transport.name, codec_requested=r.codec, codec=codec,
        paths=_path_report(network, before, after), proof=found.counters or None,
        page=visit.report, url=url, failure=failures.first(), hud=visit.hud,
        console=list(visit.console), screenshot_taken=r.screenshot is not None,
        transport_implementation=carried.implementation, scheduler=r.transport.scheduler_name,
        redundant_bytes=carried.redundant_bytes(),
        path_policy=r.path_policy.name, metered=r.metered,
        policy_report=policy.report())


@dataclass(frozen=True)
class Failures:
    """What went wrong in a session, each None when it did not, in the order that decides which
    one the session reports (`first`): the page's own account (it names the player's error),
    the browser (it died, or the page did not finish in time), the collector (it has no summary
    of the session), the path policy (a toggle failed), the transport's carrier (a program of it
    exited), the transport's proof on the wire, and a codec other than the one asked for."""

    page: str | None = None
    browser: str | None = None
    collector: str | None = None
    policy: str | None = None
    carrier: str | None = None
    proof: str | None = None
    codec: str | None = None

    def first(self) -> str | None:
        """The session's failure: the first reason in the order above, or None."""
        return next(filter(None, (getattr(self, f.name) for f in fields(self))), None)


@dataclass
class _Visit:
    """What the browser's visit of the page left: the page's report, what the HUD showed, the
    console, the collector's summary, and why the browser failed (None: it did not)."""

    console: list[str]
    report: JsonObject = field(default_factory=dict)
    hud: dict[str, str] | None = None
    summary: JsonObject | None = None
    failure: str | None = None
    gone: bool = False  # the browser died under the session


def _visit(network: Network, server: PageServer, r: PlayRequest, url: str,
           opened: Page | None = None) -> _Visit:
    """Opens the page in a browser on the client host (or takes the one `opened`) and follows
    it to the session's end."""
    with (contextlib.nullcontext(opened) if opened is not None
          else open_page(r.browser, network.netns("client"), wrap=r.transport.wrap)) as page:
        phases.mark(phases.BROWSER_UP)
        visit = _Visit(console=page.console)
        try:
            _load(page, url)
            phases.mark(phases.PAGE_READY)
            visit.report, visit.hud = _follow(page, r.duration_s, _start_within(r),
                                              r.screenshot, _finish_within(r))
        except BrowserTimeout:
            visit.report = _page_report(page)
            visit.failure = _timed_out(r, visit.report.get("state"))
            # A page stuck because the kernel's MPTCP stopped its connection says so
            # (docs/netem.md#the-clients-receive-buffer), with the figures of the stall.
            stall = receive_stall(network)
            if stall is not None:
                visit.failure = f"{stall.reason()}; {visit.failure}"
        except BrowserGone as exc:
            visit.failure, visit.gone = str(exc), True
        if visit.failure is None and visit.report.get("rejected"):
            # Events the collector refused are lost to the session's figures: never a quiet ok.
            visit.failure = (f"the collector refused {visit.report['rejected']} batch(es) of "
                             f"the page's events: {visit.report.get('sender_error')}")
        collector = _collector(server, r)
        if visit.gone and r.collector_url is None and collector is not None:
            _record_browser_failure(collector, r.session_id, f"{r.browser}: {visit.failure}")
        visit.summary = _summary(collector, None if visit.gone else page, r.session_id)
    return visit


def _load(page: Page, url: str) -> None:
    """The page loaded; a browser that died meanwhile fails the session, anything else that
    kept the page from loading is the server's (or the address's) problem."""
    try:
        page.goto(url, PAGE_LOAD_TIMEOUT_S)
    except (BrowserGone, BrowserTimeout):
        raise  # the session's failure, not the address's
    except BrowserError as exc:
        raise UserError(f"the player page {url} did not load from the server: {exc}") from exc


def _no_summary(session_id: str, report: JsonObject) -> str:
    return (f"the collector has no summary of session {session_id} "
            f"(page: {report.get('pending')} events unsent, "
            f"last error {report.get('sender_error')})")


def _decoded_codec(summary: JsonObject | None, report: JsonObject) -> str | None:
    """The codec decoded: the collector's account, else the page's startup event's."""
    decoded = summary.get("codec") if summary else None
    startup = report.get("startup")
    if decoded is None and isinstance(startup, dict):
        decoded = startup.get("codec")
    return _text(decoded)


def _codec_failure(asked: str, decoded: str | None) -> str | None:
    if asked != "auto" and decoded and family(decoded) != asked:
        return f"codec {asked} was asked for, but {decoded} was decoded"
    return None


def _policy_controller(network: Network, server: PageServer, r: PlayRequest,
                       carried: Carrier) -> pathpolicy.PathPolicyController:
    """The session's path policy: its controller reads the player's events from the collector
    (the probe's buffer level and segments) and the client's path counters, and holds the
    paths it holds back by the transport's lever."""
    return pathpolicy.PathPolicyController(
        policy=r.path_policy, held=r.held_paths,
        hold=r.transport.path_holder(network, carried), marks=r.deadline_marks,
        events=_new_events(server, r),
        counters=network.path_bytes)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _page_report(page: Page) -> dict[str, Any]:
    with contextlib.suppress(BrowserError):
        return page.evaluate("window.mpstream ? window.mpstream.report() : {}") or {}
    return {}


def _start_within(r: PlayRequest) -> float:
    """Seconds from the page loaded until it must play (or have ended): the page's own startup
    timeout, after its player library has arrived, and a margin for that."""
    return r.startup_timeout_s + START_MARGIN_S


def _finish_within(r: PlayRequest) -> float:
    """Seconds from the play request until the page must have ended and reported."""
    return r.duration_s + (r.report_timeout_s or REPORT_TIMEOUT_S) + DRAIN_MARGIN_S


def _timed_out(r: PlayRequest, state: object) -> str:
    """Which wait on the page ran out, as its state (player/src/session/load.js) tells: none
    (its script never ran), still loading its player library, starting, or playing."""
    if state is None:
        return f"the player page did not load within {PAGE_LOAD_TIMEOUT_S:g} s"
    if state == "loading":
        return f"the player page did not load its player library within {_start_within(r):g} s"
    if state == "starting":
        return f"the player page did not start playing within {_start_within(r):g} s"
    return f"the player page did not finish the session within {_finish_within(r):g} s"


def _follow(page: Page, duration_s: float, start_within_s: float,
            screenshot: Path | None, finish_within_s: float
            ) -> tuple[dict[str, Any], dict[str, str] | None]:
    """Waits for the page to play and to finish; the page's report and (with a screenshot)
    what the HUD showed."""
    hud = None
    page.wait_for("window.mpstream && ['playing', 'done'].includes(window.mpstream.state)",
                  start_within_s)
    if screenshot is not None and page.evaluate("window.mpstream.state") == "playing":
        page.sleep(min(SCREENSHOT_AFTER_S, duration_s / 2))
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(screenshot)
        hud = page.evaluate(HUD_TEXT)
    page.wait_for("window.mpstream.state === 'done'", finish_within_s)
    phases.mark(phases.PLAYBACK)
    return page.evaluate("window.mpstream ? window.mpstream.report() : {}") or {}, hud
