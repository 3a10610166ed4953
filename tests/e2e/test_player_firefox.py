"""Firefox as the second browser, for real: Debian's firefox-esr driven over WebDriver BiDi in
the client namespace of a two-path topology, under mptcpize. hls.js plays over MPTCP on both
paths; dash.js plays the MPD's HEVC set with frames decoded; a codec the browser lacks is
refused before anything is built; Firefox killed mid-session leaves no process behind and the
session ends with a failure record in the collector."""

import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from mpstream.netem.teardown import netns_pids
from mpstream.netem.topology import Topology
from mpstream.player.session import MANIFESTS
from mpstream.server.stack import ServerStack
from tests.sessions import collector_get, play, session_events

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]  # make test-firefox

PLAY_S = 12.0
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def balanced(tiny_media):
    name = f"ff{os.getpid() % 100000}"
    with Topology.up("thesis-bandwidth-balanced", name=name) as topo, \
            ServerStack(tiny_media, netns=topo.server_ns, host=topo.server_addr) as stack:
        yield topo, stack


def _play(balanced, player, tag, **kw):
    topo, stack = balanced
    session_id = f"e2e-ff-{tag}-{os.getpid()}"
    kw.setdefault("duration_s", PLAY_S)
    return play(topo, stack, player=player, manifest_path=MANIFESTS[player],
                        transport="mptcp", session_id=session_id, scenario="e2e", trial=0,
                        browser="firefox", **kw)


def _check_played(result, stack):
    assert result["failure"] is None, (result["failure"], result.get("console"))
    assert result["browser"] == "firefox" and result["errors"] == 0
    assert "Firefox/" in collector_get(stack, f"/sessions/{result['session']}")["user_agent"]
    assert 0 < result["startup_delay_ms"] < 10_000
    assert result["end_reason"] == "duration" and result["played_s"] >= PLAY_S - 4
    # MPTCP for real: MP_CAPABLE connections and MP_JOIN subflows counted in the client
    # namespace, and the media arrived over both paths.
    assert result["proof"]["mp_capable"] >= 1 and result["proof"]["mp_join"] >= 1, result
    assert all(p["rx_share"] >= 0.10 for p in result["paths"]), result["paths"]
    events = session_events(stack, result["session"])
    assert [e["seq"] for e in events] == list(range(result["page"]["next_seq"]))
    segments = [e["data"] for e in events if e["type"] == "segment"]
    assert sum(1 for s in segments if s["kind"] in ("video", "muxed")) >= 4
    for s in segments:
        assert s["t_request"] <= s["t_first_byte"] <= s["t_done"] and s["bytes"] > 0, s
    assert len([e for e in events if e["type"] == "buffer"]) >= PLAY_S - 4
    return events


def test_hlsjs_plays_in_firefox_over_both_paths(balanced):
    result = _play(balanced, "hlsjs", "hls")
    _check_played(result, balanced[1])
    assert result["codec"].startswith("avc1."), result["codec"]
    assert result["total_frames"] > 100


def test_dashjs_plays_hevc_in_firefox_with_frames_decoded(balanced):
    result = _play(balanced, "dashjs", "hevc", codec="hevc")
    events = _check_played(result, balanced[1])
    # The HEVC set was decoded (not AVC), and the decoder kept up on this machine.
    assert result["codec"].startswith(("hvc1.", "hev1.")), result["codec"]
    assert result["codec_requested"] == "hevc"
    assert result["page"]["codec_support"][result["codec"]] is True
    playback = [e["data"] for e in events if e["type"] == "playback"]
    assert playback[-1]["total_frames"] > 100
    assert result["dropped_frames"] == playback[-1]["dropped_frames"]
    assert result["dropped_frames"] <= 0.05 * result["total_frames"], result
    # Only HEVC video segments were fetched.
    urls = [e["data"]["url"] for e in events
            if e["type"] == "segment" and e["data"]["kind"] == "video"]
    assert urls and all("/dash/hevc-" in u for u in urls), urls[:3]


def test_a_codec_the_browser_lacks_is_refused_before_anything_starts(tiny_media):
    before = set(subprocess.run(["ip", "netns", "list"], capture_output=True,
                                text=True).stdout.split())
    proc = subprocess.run(
        [str(REPO / ".venv/bin/mpstream"), "play", "--media", str(tiny_media), "--player",
         "dashjs", "--browser", "chromium", "--codec", "hevc", "--profile",
         "thesis-bandwidth-balanced", "--name", f"ffr{os.getpid() % 10000}"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    message = " ".join(proc.stderr.split())
    assert "--codec hevc: chromium cannot decode" in message and "hvc1" in message, message
    assert "--browser firefox" in message
    after = set(subprocess.run(["ip", "netns", "list"], capture_output=True,
                               text=True).stdout.split())
    assert not {ns for ns in after - before if ns.startswith(f"mps-ffr{os.getpid() % 10000}")}


def _firefox_pid(netns: str) -> int | None:
    for pid in netns_pids(netns):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])
            parent = Path(f"/proc/{ppid}/comm").read_text().strip()
        except (OSError, IndexError, ValueError):
            continue
        if comm.startswith("firefox") and parent == "node":
            return pid  # the browser's main process (its children are content processes)
    return None


def test_firefox_killed_mid_session_leaves_nothing_and_records_a_failure(balanced):
    topo, stack = balanced
    session_id = f"e2e-ff-kill-{os.getpid()}"
    temp_before = set(Path(tempfile.gettempdir()).glob("mps-firefox-*"))
    out: dict = {}

    def run_session():
        out["result"] = play(topo, stack, player="dashjs", manifest_path=MANIFESTS["dashjs"],
                             transport="mptcp", duration_s=60.0, session_id=session_id,
                             browser="firefox")

    worker = threading.Thread(target=run_session)
    worker.start()
    deadline = time.monotonic() + 60
    started = False
    while time.monotonic() < deadline and not started:
        time.sleep(0.5)
        found = collector_get(stack, f"/sessions/{session_id}")
        started = bool(found and any(e["type"] == "startup" for e in found["events"]))
    assert started, "the session never started"
    pid = _firefox_pid(topo.client_ns)
    assert pid is not None, "no Firefox process in the client namespace"
    os.kill(pid, signal.SIGKILL)
    worker.join(60)
    assert not worker.is_alive(), "play_session did not return after Firefox was killed"

    result = out["result"]
    assert "Firefox exited" in result["failure"], result["failure"]
    # The collector's session ends with the failure: an error record, then the end.
    events = session_events(stack, session_id)
    assert events[-2]["type"] == "error" and events[-2]["data"]["code"] == "browser_exited"
    assert events[-2]["data"]["fatal"] is True
    assert events[-1]["type"] == "end" and events[-1]["data"]["reason"] == "error"
    summary = collector_get(stack, f"/sessions/{session_id}/summary")
    assert summary["end_reason"] == "error" and summary["errors"] == 1
    # Nothing left: no process in the client namespace (driver, browser, content processes),
    # no temporary profile.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and netns_pids(topo.client_ns):
        time.sleep(0.2)
    assert netns_pids(topo.client_ns) == []
    assert set(Path(tempfile.gettempdir()).glob("mps-firefox-*")) <= temp_before
