"""One automated playback session: Debian's Chromium, headless, in a topology's client namespace.

Playwright drives the browser over `--remote-debugging-pipe` (file descriptors 3 and 4). The
executable it starts is a small wrapper generated per session that enters the client namespace
(`ip netns exec`) and, for MPTCP, `mptcpize run` before exec'ing Chromium: both exec in place,
so the pipe and the process Playwright holds are Chromium's own, and every socket Chromium
opens lives in the namespace (and is MPTCP when asked for).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from mpstream.errors import UserError

DIST_DIR = Path(__file__).resolve().parent / "dist"
CHROMIUM = os.environ.get("MPSTREAM_CHROMIUM", "/usr/bin/chromium")
TRANSPORTS = ("mptcp", "tcp")
PLAYERS = {"hlsjs": "hls", "dashjs": "dash"}
MANIFESTS = {"hlsjs": "/media/hls/master.m3u8", "dashjs": "/media/dash/manifest.mpd"}

# Playwright adds --headless, --no-sandbox (it runs as root here), --remote-debugging-pipe and
# a fresh temporary --user-data-dir itself; these keep Chromium quiet, local and autoplaying.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",  # HTTP over TCP (MPTCP) only: QUIC would bypass what is measured
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--autoplay-policy=no-user-gesture-required",
]
VIEWPORT = {"width": 1280, "height": 720}
PAGE_LOAD_TIMEOUT_S = 60.0
STARTUP_TIMEOUT_S = 30.0
# The page drains its event queue for up to 15 s after the end; a little more on top.
DRAIN_MARGIN_S = 25.0
SCREENSHOT_AFTER_S = 4.0
HUD_TEXT = """Object.fromEntries([...document.querySelectorAll('#hud dd')]
    .map((dd) => [dd.dataset.field, dd.textContent]))"""


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
    return f"{base_url.rstrip('/')}/player/index.html?{urlencode(params)}"


def write_browser_wrapper(directory: Path, netns: str | None, mptcp: bool) -> Path:
    """A script that runs Chromium inside `netns` (or where this process runs, when None),
    under mptcpize when `mptcp`."""
    argv = ["ip", "netns", "exec", netns] if netns else []
    if mptcp:
        argv += ["mptcpize", "run"]
    argv.append(CHROMIUM)
    script = directory / "chromium-in-netns"
    script.write_text(f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n')
    script.chmod(0o755)
    return script


def check_prerequisites(player: str, transport: str, manifest_path: str) -> None:
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
    if not Path(CHROMIUM).exists():
        raise UserError(f"Chromium is not installed at {CHROMIUM}: run `make setup` (Debian "
                        "package chromium) or point MPSTREAM_CHROMIUM at a Chromium binary")


@contextlib.contextmanager
def browser_in_namespace(netns: str | None, *, mptcp: bool) -> Iterator[Any]:
    """Headless Chromium (a Playwright Browser) whose every socket lives in `netns`, and is
    MPTCP when `mptcp`; closed, with its temporary files, on the way out."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="mps-player-") as tmp, sync_playwright() as pw:
        wrapper = write_browser_wrapper(Path(tmp), netns, mptcp)
        try:
            browser = pw.chromium.launch(executable_path=str(wrapper), headless=True,
                                         args=CHROMIUM_FLAGS, timeout=60_000)
        except PlaywrightError as exc:
            raise UserError(f"Chromium did not start in namespace {netns or '(this one)'}: "
                            f"{str(exc).splitlines()[0]}") from exc
        try:
            yield browser
        finally:
            with contextlib.suppress(PlaywrightError):
                browser.close()


def _collector_get(stack: Any, page: Any, path: str,
                   collector_url: str | None = None) -> dict[str, Any] | None:
    """GET an API path: from a collector elsewhere when `collector_url` names one; else
    straight over the collector's socket when the stack has one (works even when the emulated
    paths are down), else from the page."""
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
    return page.evaluate(
        """async (url) => { const r = await fetch(url); return r.ok ? r.json() : null; }""",
        "/api/v1" + path,
    )


def _path_report(topology: Any, before: list[dict[str, int]], after: list[dict[str, int]]):
    paths = []
    for info, b, a in zip(topology.paths, before, after, strict=True):
        paths.append({
            "index": info.index,
            "address": info.client_addr,
            "interface": info.client_ifname,
            "rx_bytes": a["rx_bytes"] - b["rx_bytes"],
            "tx_bytes": a["tx_bytes"] - b["tx_bytes"],
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
) -> dict[str, Any]:
    """Plays `manifest_path` (a path on `stack`, or any manifest's URL) from `stack` in
    headless Chromium inside `topology`'s client namespace for `duration_s` seconds (counted
    from the play request). `buffer_s` caps how far ahead the player buffers (default: the
    library's own target). `target_latency_s` sets how far behind the live edge a live
    stream is played (default: the library's own).

    Returns the collector's summary of the session plus `paths` (bytes each client path
    carried during the session, from the kernel's interface counters), `codec`, `page` (the
    page's own account: events sent, codecs the browser can decode) and `failure`: None, or
    a message saying why the session failed (manifest not found, no frame, collector down).
    Events go to `collector_url` when given (a collector on another host), else to `stack`'s.
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    check_prerequisites(player, transport, manifest_path)
    url = page_url(stack.base_url, player=player, manifest_path=manifest_path,
                   session_id=session_id, transport=transport, duration_s=duration_s,
                   scenario=scenario, trial=trial, startup_timeout_s=startup_timeout_s,
                   buffer_s=buffer_s, collector=collector_url or "/api/v1",
                   target_latency_s=target_latency_s)
    before = topology.path_bytes()
    report: dict[str, Any] = {}
    failure: str | None = None
    summary: dict[str, Any] | None = None
    hud: dict[str, str] | None = None
    console: list[str] = []
    with browser_in_namespace(topology.client_ns, mptcp=transport == "mptcp") as browser:
        page = browser.new_page(viewport=VIEWPORT)
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"[:500]))
        try:
            page.goto(url, wait_until="load", timeout=PAGE_LOAD_TIMEOUT_S * 1000)
        except PlaywrightError as exc:
            raise UserError(f"the player page {url} did not load from the server: "
                            f"{str(exc).splitlines()[0]}") from exc
        try:
            page.wait_for_function(
                "window.mpstream && ['playing', 'done'].includes(window.mpstream.state)",
                timeout=(startup_timeout_s + 15) * 1000)
            if screenshot is not None and page.evaluate("window.mpstream.state") == "playing":
                page.wait_for_timeout(min(SCREENSHOT_AFTER_S, duration_s / 2) * 1000)
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot))
                hud = page.evaluate(HUD_TEXT)
            page.wait_for_function("window.mpstream.state === 'done'",
                                   timeout=(duration_s + DRAIN_MARGIN_S) * 1000, polling=250)
        except PlaywrightTimeout:
            failure = (f"the player page did not finish the session within "
                       f"{duration_s + DRAIN_MARGIN_S:g} s")
        report = page.evaluate("window.mpstream ? window.mpstream.report() : {}") or {}
        failure = report.get("failure") or failure
        summary = _collector_get(stack, page, f"/sessions/{session_id}/summary", collector_url)
    after = topology.path_bytes()
    if summary is None and failure is None:
        failure = (f"the collector has no summary of session {session_id} "
                   f"(page: {report.get('pending')} events unsent, "
                   f"last error {report.get('sender_error')})")
    result: dict[str, Any] = dict(summary or {"session": session_id, "player": player,
                                             "transport": transport})
    startup = report.get("startup") or {}
    result.setdefault("codec", startup.get("codec"))
    result["paths"] = _path_report(topology, before, after)
    result["page"] = report
    if screenshot is not None:
        result["hud"] = hud  # what the HUD said when the screenshot was taken
    result["failure"] = failure
    result["url"] = url
    if failure:
        result["console"] = console[-20:]
    return result

