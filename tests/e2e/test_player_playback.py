"""Both players, for real: headless Chromium in the client namespace of a two-path topology,
nginx + collector in the server namespace, the `tiny` ladder. Over MPTCP both paths carry the
media; over plain TCP one path carries everything; what the collector stored is checked
against the contract (startup, segment downloads with rates, buffer samples, codec, errors).
Also: a collector cut during playback loses no event; a missing manifest and a collector that
is down end the session with a message and an error record."""

import itertools
import json
import os
import re
import shutil
import threading
import time

import numpy as np
import pytest
from PIL import Image

from mpstream.netem.topology import Topology
from mpstream.player.session import MANIFESTS, PlayRequest, browser_in_namespace, page_url
from mpstream.server.accesslog import read_access_log
from mpstream.server.stack import ServerStack
from mpstream.transports.base import get_transport
from tests.sessions import collector_get, play, playing, session_events
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(600)

# Long enough for the contract (several segments, a buffer that fills, 1 Hz samples) at the
# tiny ladder's 2 s segments; each second more is a second of every session here.
PLAY_S = 12.0
PLAYERS = ["dashjs", "hlsjs"]
# The session a collector cut interrupts: its play, the cut (three refused batches, a few
# seconds) and the restart all fall within it.
CUT_PLAY_S = 18.0


@pytest.fixture(scope="module")
def balanced(tiny_media):
    name = f"pl{os.getpid() % 100000}"
    with Topology.up("thesis-bandwidth-balanced", name=name) as topo, \
            ServerStack(tiny_media, netns=topo.server_ns, host=topo.server_addr) as stack:
        yield topo, stack


def _play(balanced, player, transport, tag, **kw):
    topo, stack = balanced
    session_id = f"e2e-{tag}-{player}-{transport}-{os.getpid()}"
    kw.setdefault("manifest_path", MANIFESTS[player])
    kw.setdefault("duration_s", PLAY_S)
    return play(topo, stack, player=player, transport=transport,
                        session_id=session_id, scenario="e2e", trial=0, **kw)


def _check_contract(result, stack, player):
    """What every successful session must have left in the collector."""
    assert result["failure"] is None, result
    assert result["errors"] == 0, result["page"]["errors"]
    assert result["codec"].startswith("avc1."), result["codec"]
    assert 0 < result["startup_delay_ms"] < 10_000
    assert result["end_reason"] == "duration"
    assert result["played_s"] >= PLAY_S - 5
    events = session_events(stack, result["session"])
    by_type = {}
    for e in events:
        by_type.setdefault(e["type"], []).append(e)
    # No gap in seq: every event the page numbered reached the collector.
    assert [e["seq"] for e in events] == list(range(result["page"]["next_seq"]))
    startup = by_type["startup"][0]["data"]
    assert startup["codec"] == result["codec"]
    assert startup["manifest_ms"] + startup["first_segment_ms"] + startup["decode_ms"] == \
        pytest.approx(startup["startup_delay_ms"], abs=1)
    segments = by_type["segment"]
    media_kinds = {"video", "muxed"}
    assert sum(1 for s in segments if s["data"]["kind"] in media_kinds) >= 5
    for s in segments:
        d = s["data"]
        assert d["t_request"] <= d["t_first_byte"] <= d["t_done"], d
        assert d["bytes"] > 0 and d["url"].startswith("http")
        assert "CMCD" not in d["url"]
    assert result["downloads"] == len(segments)
    played = {s["data"]["index"] for s in segments if s["data"]["kind"] in media_kinds}
    assert result["segments"] == len(played)  # video segments, by index (docs/qoe.md)
    assert len(result["segment_rates_bps"]) == len(played)
    assert all(rate > 0 for rate in result["segment_rates_bps"])
    assert result["mean_download_rate_bps"] > 0
    # 1 Hz buffer samples over the session, with the buffer filled.
    buffers = by_type["buffer"]
    assert len(buffers) >= PLAY_S - 5
    assert max(b["data"]["level_s"] for b in buffers) > 2
    assert by_type["manifest"] and by_type["playback"][-1]["data"]["total_frames"] > 100
    assert by_type["end"][0]["data"]["reason"] == "duration"
    # The ladder, once: the tree's AVC rungs (Chromium decodes no HEVC), lowest first, and the
    # summary's top rung and utilization come from it.
    [ladder] = by_type["ladder"]
    rungs = ladder["data"]["representations"]
    bitrates = [r["bitrate"] for r in rungs]
    assert len(rungs) == 3 and bitrates == sorted(bitrates), rungs
    assert all(r["codec"].startswith("avc1.") and r["height"] > 0 for r in rungs), rungs
    assert result["top_bitrate_bps"] == max(bitrates)
    assert 0 < result["bitrate_utilization"] <= 1.05, result
    return by_type


@pytest.mark.parametrize("player", PLAYERS)
def test_mptcp_plays_over_both_paths(balanced, player, tmp_path):
    shot = tmp_path / "page.png"
    result = _play(balanced, player, "mptcp", "mp", screenshot=shot)
    _check_contract(result, balanced[1], player)
    assert result["transport"] == "mptcp" and result["player"] == player
    paths = result["paths"]
    assert len(paths) == 2
    # The media came over both paths' subflows (each at least a tenth of the bytes).
    assert all(p["rx_share"] >= 0.10 for p in paths), paths
    assert sum(p["rx_bytes"] for p in paths) > 200_000

    # CMCD: nginx's log has the player's view of each media request, tagged with the session.
    log = [json.loads(line) for line in balanced[1].access_log.read_text().splitlines() if line]
    tagged = [r for r in log if r["uri"].startswith("/media/") and result["session"] in r["cmcd"]]
    assert len(tagged) >= result["downloads"] - 2, log[-3:]
    # The page's first transport question was answered before it asked for the manifest: no
    # request of its own holds a connection while the player starts.
    def start(r):
        return r["msec"] - float(r["request_time"])
    page = [start(r) for r in log
            if r["uri"].endswith("/player/index.html") and result["session"] in r["args"]]
    asked = [r for r in log if r["uri"] == f"/api/v1/sessions/{result['session']}/transport"]
    manifests = [r for r in log if r["uri"].endswith((".mpd", ".m3u8"))
                 and page and start(r) >= page[0]]
    assert page and asked and manifests, (page, asked, manifests)
    assert min(r["msec"] for r in asked) <= min(start(r) for r in manifests), (asked[0], manifests)

    if player == "dashjs":
        # The MPD offers HEVC too; Chromium here cannot decode it, so AVC is what played.
        support = result["page"]["codec_support"]
        assert any(c.startswith(("hvc1", "hev1")) for c in support), support
        assert not any(ok for c, ok in support.items() if c.startswith(("hvc1", "hev1")))
        # Its segments came through the per-request XHR loader put in place of its own.
        loader = result["page"]["segment_loader"]
        assert loader["xhr"] == "per-request" and loader["instances"] >= 1, loader

    # The screenshot: the video shows frames, the HUD shows numbers.
    hud = result["hud"]
    assert re.fullmatch(r"\d+(\.\d+)? (k|M)bit/s", hud["bitrate"]), hud
    assert re.fullmatch(r"\d+×\d+", hud["resolution"]), hud
    assert re.fullmatch(r"\d+\.\d s", hud["buffer"]), hud
    assert re.fullmatch(r"\d+(\.\d+)? (k|M)bit/s", hud["rate"]), hud
    assert re.fullmatch(r"\d+ ms", hud["startup"]), hud
    assert hud["transport"].startswith("MPTCP, ") and hud["stalls"].startswith("0")  # measured
    image = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    height, width, _ = image.shape
    video = image[height // 2:, width // 2:]  # away from the HUD in the top-left corner
    assert video.std() > 20 and len(np.unique(video.reshape(-1, 3), axis=0)) > 50
    hud_box = image[12:150, 12:270]
    assert (hud_box.max(axis=2) > 200).mean() > 0.01  # light text on the dark panel


@pytest.mark.parametrize("player", PLAYERS)
def test_single_path_tcp_uses_one_path(balanced, player):
    result = _play(balanced, player, "tcp", "tcp")
    _check_contract(result, balanced[1], player)
    assert result["transport"] == "tcp"
    shares = sorted(p["rx_share"] for p in result["paths"])
    assert shares[-1] >= 0.98, result["paths"]


def test_collector_cut_during_playback_loses_nothing(balanced):
    stack = balanced[1]
    outcome = {}

    def run_session():
        outcome["result"] = _play(balanced, "dashjs", "mptcp", "cut", duration_s=CUT_PLAY_S)

    # The session plays in a thread; the collector is cut and restarted from this one (its
    # daemons die with the thread that started them).
    player = threading.Thread(target=run_session)
    player.start()
    session_id = f"e2e-cut-dashjs-mptcp-{os.getpid()}"

    def refused_batches():
        try:
            requests = read_access_log(stack.access_log)
        except ValueError:  # caught while nginx writes a line
            return 0
        return sum(r["status"] == 502 and r["uri"] == f"/api/v1/sessions/{session_id}/events"
                   for r in requests)

    try:
        wait_until(lambda: playing(stack, session_id), 60, "the session plays", 0.5)
        # The gunicorn master and its workers go; nginx answers 502 meanwhile.
        stack.stop_collector()
        # Until the page has sent, and re-sent twice, events that found no collector.
        wait_until(lambda: refused_batches() >= 3, 20,
                   "nginx answered 502 to three of the page's event batches", 0.2)
    finally:
        stack.start_collector()
        player.join()
    result = outcome["result"]
    page = result["page"]
    assert page["sender_error"], "the page noticed the collector was gone"
    by_type = _check_contract_after_cut(result, stack)
    # Samples taken while the collector was down are there: no second of the session missing.
    seconds = sorted(round(b["t_ms"] / 1000) for b in by_type["buffer"])
    gaps = [b - a for a, b in itertools.pairwise(seconds)]
    assert max(gaps) <= 2, seconds


def _check_contract_after_cut(result, stack):
    assert result["failure"] is None, result
    events = session_events(stack, result["session"])
    assert [e["seq"] for e in events] == list(range(result["page"]["next_seq"]))
    assert result["page"]["pending"] == 0
    by_type = {}
    for e in events:
        by_type.setdefault(e["type"], []).append(e)
    assert by_type["end"][0]["data"]["reason"] == "duration"
    assert len(by_type["buffer"]) >= CUT_PLAY_S - 5
    return by_type


def test_missing_manifest_ends_with_an_error(balanced):
    result = _play(balanced, "hlsjs", "mptcp", "404", manifest_path="/media/hls/nothing.m3u8",
                   duration_s=15.0)
    assert result["failure"] and "404" in result["failure"], result["failure"]
    assert result["errors"] >= 1 and result["end_reason"] == "error"
    events = session_events(balanced[1], result["session"])
    error = next(e for e in events if e["type"] == "error")["data"]
    assert error["fatal"] is True and "nothing.m3u8" in error["message"]


def test_collector_down_is_reported(balanced):
    stack = balanced[1]
    stack.stop_collector()
    try:
        result = _play(balanced, "dashjs", "mptcp", "down", duration_s=6.0, report_timeout_s=3.0)
    finally:
        stack.start_collector()
    assert result["failure"] and "collector" in result["failure"], result["failure"]
    page = result["page"]
    assert page["pending"] > 0 and page["ended"]["reason"] == "error"
    assert any(e["code"] == "collector_unreachable" for e in page["errors"])
    assert collector_get(stack, f"/sessions/{result['session']}") is None


def test_stream_that_never_starts_ends_with_an_error(balanced, tiny_media, tmp_path):
    # A media tree whose manifest and init segments are there but no media segment is.
    broken = tmp_path / "media"
    shutil.copytree(tiny_media, broken)
    for segment in (broken / "dash").rglob("seg_*"):
        segment.unlink()
    topo = balanced[0]
    with ServerStack(broken, netns=topo.server_ns, host=topo.server_addr, port=8081) as stack:
        result = play(topo, stack, player="dashjs", manifest_path=MANIFESTS["dashjs"],
                              transport="mptcp", duration_s=20.0, startup_timeout_s=6.0,
                              session_id=f"e2e-nostart-{os.getpid()}")
        events = session_events(stack, result["session"])
    assert result["failure"] and "no frame rendered within 6 s" in result["failure"]
    assert result["end_reason"] == "error" and result["startup_delay_ms"] is None
    fatal = [e["data"] for e in events if e["type"] == "error" and e["data"]["fatal"]]
    assert [e["code"] for e in fatal] == ["startup_timeout"]
    assert events[-1]["type"] == "end" and events[-1]["data"]["reason"] == "error"


def test_closing_the_page_sends_the_rest_by_beacon(balanced):
    topo, stack = balanced
    session_id = f"e2e-beacon-{os.getpid()}"
    url = page_url(stack.base_url, PlayRequest(
        player="hlsjs", transport=get_transport("mptcp"), manifest_path=MANIFESTS["hlsjs"],
        session_id=session_id, duration_s=120.0))
    with browser_in_namespace(topo.client_ns, wrap=get_transport("mptcp").wrap) as browser:
        page = browser.new_page()
        page.goto(url)
        page.wait_for_function("window.mpstream && window.mpstream.state === 'playing'",
                               timeout=45_000)
        # Closed while the sender has delivered batches and holds events it has not sent yet:
        # those are the rest the beacon must carry.
        page.wait_for_function("(r => r.acknowledged > 0 && r.pending > 0)"
                               "(window.mpstream.report())", timeout=30_000)
        next_seq = page.evaluate("window.mpstream.report().next_seq")
        # pagehide: the page records the end and beacons what is queued; it is gone after.
        page.close(run_before_unload=True)
        deadline = time.monotonic() + 15
        events = []
        while time.monotonic() < deadline:
            events = session_events(stack, session_id)
            if events and events[-1]["type"] == "end":
                break
            time.sleep(0.5)
    assert events[-1]["type"] == "end" and events[-1]["data"]["reason"] == "closed", events[-3:]
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(len(seqs))) and len(seqs) > next_seq
