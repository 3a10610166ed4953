"""The dashboard in headless Chromium: the sessions table lists a session and its page draws
the timeline (buffer level, bitrate, per-segment download rate, stall bands); the screenshot
is checked for the charts' colours."""

import socket

import numpy as np
import pytest
import requests
from PIL import Image
from playwright.sync_api import sync_playwright

from mpstream.paths import BUILD_DIR
from mpstream.server.stack import ServerStack
from tests.servers import make_tiny_media

CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
SESSION = {
    "id": "dash-e2e", "player": "dashjs", "player_version": "5.2.1", "protocol": "dash",
    "manifest": "/media/dash/manifest.mpd", "scenario": "e2e", "trial": 0,
    "transport": "mptcp", "user_agent": "pytest", "started_at": "2026-11-22T02:00:00Z",
}  # fmt: skip
BUFFER_BLUE = (31, 119, 180)
BITRATE_GREEN = (44, 160, 44)
RATE_ORANGE = (255, 127, 14)
STALL_PINK = (246, 204, 203)  # rgba(220, 50, 47, 0.25) over white


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timeline_events():
    events, seq = [], 0

    def add(t_ms, type_, **data):
        nonlocal seq
        events.append({"seq": seq, "t_ms": t_ms, "type": type_, "data": data})
        seq += 1

    add(900, "startup", startup_delay_ms=900, manifest_ms=60, first_segment_ms=400,
        decode_ms=30, codec="avc1.64001f", width=640, height=360, bitrate=800_000)
    for i in range(20):
        t = 500 + i * 1500
        add(t + 400, "segment", url=f"/media/dash/chunk-{i}.m4s", kind="video",
            bitrate=800_000 if i < 8 else 2_000_000, bytes=200_000 + 40_000 * (i % 5),
            t_request=t, t_first_byte=t + 50, t_done=t + 400, index=i, duration_s=2.0)
    for k in range(30):
        level = 2 + (k % 10) if not 12 <= k <= 14 else 0
        add(1000 + k * 1000, "buffer", level_s=float(level), position=float(k))
    add(12000, "quality_switch", from_bitrate=800_000, to_bitrate=2_000_000, width=1280,
        height=720, codec="avc1.64001f")
    add(13000, "stall_start", position=12.0)
    add(16000, "stall_end", position=12.0, duration_ms=3000)
    add(31000, "end", reason="duration", position=27.0)
    return sorted(events, key=lambda e: e["seq"])  # fmt: skip


def count_near(img: Image.Image, rgb: tuple[int, int, int], tol: int = 12) -> int:
    pixels = np.asarray(img.convert("RGB"), dtype=int)
    return int((np.abs(pixels - np.array(rgb)).max(axis=2) <= tol).sum())


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    media = make_tiny_media(tmp_path_factory.mktemp("media"), seconds=2)
    with ServerStack(media, port=free_port()) as s:
        assert requests.post(s.api_url + "/sessions", json=SESSION).status_code == 201
        r = requests.post(f"{s.api_url}/sessions/{SESSION['id']}/events",
                          json={"events": timeline_events()})  # fmt: skip
        assert r.status_code == 200
        yield s


def test_dashboard_draws_the_session_timeline(stack, tmp_path):
    shots = BUILD_DIR / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(stack.dashboard_url)
            row = page.locator("#sessions tbody tr", has_text=SESSION["id"])
            assert row.count() == 1
            assert "dashjs" in row.inner_text() and "mptcp" in row.inner_text()
            row.locator("a").click()
            page.wait_for_selector("body[data-charts-ready='1']", timeout=15_000)
            assert errors == []
            page.screenshot(path=str(shots / "dashboard-session.png"), full_page=True)
            buffer_png = tmp_path / "buffer.png"
            rate_png = tmp_path / "rate.png"
            page.locator("#chart-buffer canvas").first.screenshot(path=str(buffer_png))
            page.locator("#chart-rate canvas").first.screenshot(path=str(rate_png))
        finally:
            browser.close()
    buffer_img, rate_img = Image.open(buffer_png), Image.open(rate_png)
    assert count_near(buffer_img, BUFFER_BLUE) > 300  # the buffer line
    assert count_near(buffer_img, STALL_PINK, tol=8) > 2000  # the stall band (3 s of 31)
    assert count_near(rate_img, BITRATE_GREEN) > 300  # the rendition bitrate step line
    assert count_near(rate_img, RATE_ORANGE) > 200  # the per-segment download rate points
