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
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from mpstream.errors import UserError
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

DIST_DIR = Path(__file__).resolve().parent / "dist"
TRANSPORTS = ("mptcp", "tcp")
PLAYERS = {"hlsjs": "hls", "dashjs": "dash"}
MANIFESTS = {"hlsjs": "/media/hls/master.m3u8", "dashjs": "/media/dash/manifest.mpd"}
# Kept under its old name for callers that drive Chromium's Playwright Browser themselves.
browser_in_namespace = chromium_in_namespace

PAGE_LOAD_TIMEOUT_S = 60.0
STARTUP_TIMEOUT_S = 30.0
# The page drains its event queue for up to 15 s after the end; a little more on top.
DRAIN_MARGIN_S = 25.0
SCREENSHOT_AFTER_S = 4.0
HUD_TEXT = """Object.fromEntries([...document.querySelectorAll('#hud dd')]
    .map((dd) => [dd.dataset.field, dd.textContent]))"""
# Client-side MPTCP counters (/proc/net/netstat, MPTcpExt) that prove MPTCP was spoken: the
# server's SYN/ACK carried MP_CAPABLE, and the server answered an MP_JOIN of an extra subflow.
MP_CAPABLE_COUNTER = "MPCapableSYNACKRX"
MP_JOIN_COUNTER = "MPJoinSynAckRx"


def page_url(
    base_url: str,
    *,
    player: str,
    manifest_path: str,
    session_id: str,
    transport: str,
    duration_s: float | None,
    scenario: str | None = None,
    trial: int | None = None,
    collector: str = "/api/v1",
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
    buffer_s: float | None = None,
    target_latency_s: float | None = None,
    codec: str = "auto",
) -> str:
    """The player page's URL for one session (query parameters: see docs/player.md)."""
    params: dict[str, Any] = {
        "src": manifest_path,
        "player": player,
        "session": session_id,
        "transport": transport,
        "collector": collector,
        "startup_timeout": f"{startup_timeout_s:g}",
    }
    if duration_s is not None:
        params["duration"] = f"{duration_s:g}"
    if scenario is not None:
        params["scenario"] = scenario
    if trial is not None:
        params["trial"] = str(trial)
    if buffer_s is not None:
        params["buffer"] = f"{buffer_s:g}"
    if target_latency_s is not None:
        params["target_latency"] = f"{target_latency_s:g}"
    if codec != "auto":
        params["codec"] = codec
    return f"{base_url.rstrip('/')}/player/index.html?{urlencode(params)}"


def check_prerequisites(player: str, transport: str, manifest_path: str,
                        browser: str = "chromium", codec: str = "auto") -> None:
    if player not in PLAYERS:
        raise UserError(f"player {player!r}: choose one of {', '.join(PLAYERS)}")
    if transport not in TRANSPORTS:
        raise UserError(f"transport {transport!r}: choose mptcp or tcp")
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
    check_browser(browser)


def _collector_get(stack: Any, page: Page | None, path: str,
                   collector_url: str | None = None) -> dict[str, Any] | None:
    """GET an API path: from a collector elsewhere when `collector_url` names one; else
    straight over the collector's socket when the stack has one (works even when the emulated
    paths are down, or the browser is gone), else from the page."""
    if collector_url is not None:
        import requests

        try:
            resp = requests.get(collector_url.rstrip("/") + path, timeout=10)
        except requests.RequestException:
            return None
        return resp.json() if resp.status_code == 200 else None
    socket_path = getattr(stack, "collector_socket", None)
    if socket_path is not None:
        from mpstream.server.stack import unix_get

        with contextlib.suppress(OSError):
            status, body = unix_get(Path(socket_path), "/api/v1" + path)
            return json.loads(body) if status == 200 else None
        return None
    if page is None:
        return None
    url = json.dumps("/api/v1" + path)
    return page.evaluate(f"fetch({url}).then((r) => (r.ok ? r.json() : null))")


def _record_browser_failure(stack: Any, session_id: str, message: str) -> bool:
    """The page cannot end a session whose browser died: its error and end records are added
    here, after the last event that reached the collector, so the session ends as failed."""
    socket_path = getattr(stack, "collector_socket", None)
    if socket_path is None:
        return False
    from mpstream.server.stack import unix_get, unix_post

    try:
        status, body = unix_get(Path(socket_path), f"/api/v1/sessions/{session_id}")
        if status != 200:
            return False  # the page never registered the session
        events = json.loads(body).get("events", [])
        if any(e["type"] == "end" for e in events):
            return False
        seq = max((e["seq"] for e in events), default=-1) + 1
        t_ms = max((e["t_ms"] for e in events), default=0)
        position = max((e["data"].get("position", 0) for e in events
                        if e["type"] == "playback"), default=0)
        batch = {"events": [
            {"seq": seq, "t_ms": t_ms, "type": "error",
             "data": {"message": message[:2000], "fatal": True, "code": "browser_exited"}},
            {"seq": seq + 1, "t_ms": t_ms, "type": "end",
             "data": {"reason": "error", "position": position}},
        ]}
        status, _ = unix_post(Path(socket_path), f"/api/v1/sessions/{session_id}/events", batch)
        return status == 200
    except (OSError, ValueError, KeyError):
        return False


def mptcp_counters(topology: Any) -> dict[str, int]:
    """The client namespace's MPTcpExt counters (/proc/net/netstat read inside it; this
    process's own namespace when the topology has none, as on real hosts)."""
    if getattr(topology, "client_ns", None) is None:
        text = Path("/proc/net/netstat").read_text()
    else:
        text = topology.run("client", ["cat", "/proc/net/netstat"], capture_output=True,
                            text=True, check=True).stdout
    lines = text.splitlines()
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        if head.startswith("MPTcpExt:"):
            return dict(zip(head.split()[1:], map(int, values.split()[1:]), strict=True))
    return {}


def mptcp_evidence(before: dict[str, int], after: dict[str, int], paths: int,
                   browser: str) -> tuple[dict[str, int], str | None]:
    """MP_CAPABLE connections and MP_JOIN subflows opened during a session, and why that does
    not prove MPTCP (None when it does)."""
    evidence = {"mp_capable": after.get(MP_CAPABLE_COUNTER, 0) - before.get(MP_CAPABLE_COUNTER, 0),
                "mp_join": after.get(MP_JOIN_COUNTER, 0) - before.get(MP_JOIN_COUNTER, 0)}
    if evidence["mp_capable"] <= 0:
        return evidence, (f"transport mptcp, but {browser} opened no MPTCP connection (no "
                          f"MP_CAPABLE SYN/ACK counted in the client namespace): its sockets "
                          f"were plain TCP, so mptcpize did not reach the process that opens "
                          f"them")
    if paths > 1 and evidence["mp_join"] <= 0:
        return evidence, (f"transport mptcp, but no MP_JOIN subflow was opened over the "
                          f"{paths} paths during the session ({browser})")
    return evidence, None


def _path_report(topology: Any, before: list[dict[str, int]], after: list[dict[str, int]]):
    paths = []
    for info, b, a in zip(topology.paths, before, after, strict=True):
        paths.append({
            "index": info.index,
            "address": info.client_addr,
            "interface": info.client_ifname,
            "rx_bytes": a["rx_bytes"] - b["rx_bytes"],
            "tx_bytes": a["tx_bytes"] - b["tx_bytes"],
            **({"rx_packets": a["rx_packets"] - b["rx_packets"]}
               if "rx_packets" in a and "rx_packets" in b else {}),
        })
    total = sum(p["rx_bytes"] for p in paths) or 1
    for p in paths:
        p["rx_share"] = round(p["rx_bytes"] / total, 4)
    return paths


def play_session(
    topology: Any,
    stack: Any,
    *,
    player: str,
    manifest_path: str,
    transport: str,
    duration_s: float,
    session_id: str,
    scenario: str | None = None,
    trial: int | None = None,
    screenshot: Path | None = None,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
    buffer_s: float | None = None,
    collector_url: str | None = None,
    target_latency_s: float | None = None,
    browser: str = "chromium",
    codec: str = "auto",
) -> dict[str, Any]:
    """Plays `manifest_path` (a path on `stack`, or any manifest's URL) from `stack` in
    headless `browser` inside `topology`'s client namespace for `duration_s` seconds (counted
    from the play request). `buffer_s` caps how far ahead the player buffers (default: the
    library's own target). `target_latency_s` sets how far behind the live edge a live stream
    is played (default: the library's own). `codec` (auto, avc, hevc) restricts the video codec
    family the player may use.

    Returns the collector's summary of the session plus `browser`, `paths` (bytes each client
    path carried during the session, from the kernel's interface counters), `mptcp` (MP_CAPABLE
    and MP_JOIN counted in the client namespace), `codec` (what was decoded), `page` (the page's
    own account: events sent, codecs the browser can decode) and `failure`: None, or a message
    saying why the session failed (manifest not found, no frame, collector down, the browser
    killed, MPTCP not really used, another codec than asked for). Events go to
    `collector_url` when given (a collector on another host), else to `stack`'s.
    """
    check_prerequisites(player, transport, manifest_path, browser, codec)
    url = page_url(stack.base_url, player=player, manifest_path=manifest_path,
                   session_id=session_id, transport=transport, duration_s=duration_s,
                   scenario=scenario, trial=trial, startup_timeout_s=startup_timeout_s,
                   buffer_s=buffer_s, collector=collector_url or "/api/v1",
                   target_latency_s=target_latency_s, codec=codec)
    mptcp = transport == "mptcp"
    before = topology.path_bytes()
    counters_before = mptcp_counters(topology) if mptcp else {}
    report: dict[str, Any] = {}
    failure: str | None = None
    summary: dict[str, Any] | None = None
    hud: dict[str, str] | None = None
    console: list[str] = []
    gone = False  # the browser died under the session
    with open_page(browser, topology.client_ns, mptcp=mptcp) as page:
        console = page.console
        try:
            page.goto(url, PAGE_LOAD_TIMEOUT_S)
        except BrowserTimeout as exc:
            raise UserError(f"the player page {url} did not load from the server: {exc}") from exc
        except BrowserGone as exc:
            failure, gone = str(exc), True
        except BrowserError as exc:
            raise UserError(f"the player page {url} did not load from the server: {exc}") from exc
        if failure is None:
            try:
                report, hud = _follow(page, duration_s, startup_timeout_s, screenshot)
            except BrowserTimeout:
                failure = (f"the player page did not finish the session within "
                           f"{duration_s + DRAIN_MARGIN_S:g} s")
                report = _page_report(page)
            except BrowserGone as exc:
                failure, gone = str(exc), True
        if gone and collector_url is None:
            _record_browser_failure(stack, session_id, f"{browser}: {failure}")
        failure = report.get("failure") or failure
        summary = _collector_get(stack, None if gone else page, f"/sessions/{session_id}/summary",
                                 collector_url)
    after = topology.path_bytes()
    if summary is None and failure is None:
        failure = (f"the collector has no summary of session {session_id} "
                   f"(page: {report.get('pending')} events unsent, "
                   f"last error {report.get('sender_error')})")
    result: dict[str, Any] = dict(summary or {"session": session_id, "player": player,
                                             "transport": transport})
    result["browser"] = browser
    result["codec_requested"] = codec
    startup = report.get("startup") or {}
    result.setdefault("codec", startup.get("codec"))
    result["paths"] = _path_report(topology, before, after)
    if mptcp:
        result["mptcp"], problem = mptcp_evidence(counters_before, mptcp_counters(topology),
                                                  len(topology.paths), browser)
        failure = failure or problem
    if codec != "auto" and result.get("codec") and family(result["codec"]) != codec:
        failure = failure or (f"codec {codec} was asked for, but {result['codec']} was decoded")
    result["page"] = report
    if screenshot is not None:
        result["hud"] = hud  # what the HUD said when the screenshot was taken
    result["failure"] = failure
    result["url"] = url
    if failure:
        result["console"] = list(console)[-20:]
    return result


def _page_report(page: Page) -> dict[str, Any]:
    with contextlib.suppress(BrowserError):
        return page.evaluate("window.mpstream ? window.mpstream.report() : {}") or {}
    return {}


def _follow(page: Page, duration_s: float, startup_timeout_s: float,
            screenshot: Path | None) -> tuple[dict[str, Any], dict[str, str] | None]:
    """Waits for the page to play and to finish; the page's report and (with a screenshot)
    what the HUD showed."""
    hud = None
    page.wait_for("window.mpstream && ['playing', 'done'].includes(window.mpstream.state)",
                  startup_timeout_s + 15)
    if screenshot is not None and page.evaluate("window.mpstream.state") == "playing":
        page.sleep(min(SCREENSHOT_AFTER_S, duration_s / 2))
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(screenshot)
        hud = page.evaluate(HUD_TEXT)
    page.wait_for("window.mpstream.state === 'done'", duration_s + DRAIN_MARGIN_S)
    return page.evaluate("window.mpstream ? window.mpstream.report() : {}") or {}, hud
