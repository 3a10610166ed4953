"""A live stream played for real: `mpstream live synthetic` (the `small` ladder, 1 s segments)
written into the tree nginx serves in the server namespace of a two-path topology; headless
Chromium in the client namespace plays it over MPTCP with hls.js and with dash.js, told to
stay `TARGET_S` behind the live edge. The probe's `live_latency` samples must reach the
collector once a second and stay within the target plus one segment; both paths carry media."""

import itertools
import os

import pytest

from mpstream.encoder.live import LiveConfig, live_in_background
from mpstream.netem.topology import Topology
from mpstream.player.session import MANIFESTS
from mpstream.server.stack import ServerStack
from tests.sessions import play, session_events

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]  # make test-live

SEGMENT_S = 1.0
TARGET_S = 4.0
PLAY_S = 16.0
# The players need a few seconds to reach their target after the first frame (dash.js starts
# at it; hls.js may start a segment further back and catch up by playing faster).
SETTLE_S = 4


@pytest.fixture(scope="module")
def live_stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live-e2e")
    tmp.chmod(0o755)
    name = f"lv{os.getpid() % 100000}"
    config = LiveConfig(source="synthetic", ladder="small", segment_duration=SEGMENT_S,
                        window_s=20, out=tmp / "tree")
    with live_in_background(config) as tree, \
            Topology.up("thesis-bandwidth-balanced", name=name) as topo, \
            ServerStack(tree, netns=topo.server_ns, host=topo.server_addr) as stack:
        yield topo, stack


@pytest.mark.parametrize("player", ["hlsjs", "dashjs"])
def test_live_latency_stays_within_target_plus_one_segment(live_stack, player):
    topo, stack = live_stack
    result = play(topo, stack, player=player, manifest_path=MANIFESTS[player],
                          transport="mptcp", duration_s=PLAY_S, target_latency_s=TARGET_S,
                          session_id=f"e2e-live-{player}-{os.getpid()}", scenario="e2e-live")
    assert result["failure"] is None, result
    assert result["end_reason"] == "duration"
    events = session_events(stack, result["session"])
    samples = [e for e in events if e["type"] == "live_latency"]
    startup_t = next(e["t_ms"] for e in events if e["type"] == "startup")
    # Once a second from the first frame on.
    assert len(samples) >= PLAY_S - 6, len(samples)
    gaps = [b["t_ms"] - a["t_ms"] for a, b in itertools.pairwise(samples)]
    assert all(800 <= g <= 1300 for g in gaps), gaps
    assert all(s["data"]["target_s"] == pytest.approx(TARGET_S, abs=0.5) for s in samples)
    settled = [s["data"]["latency_s"] for s in samples
               if s["t_ms"] >= startup_t + SETTLE_S * 1000]
    assert settled and max(settled) <= TARGET_S + SEGMENT_S, settled
    assert min(settled) > 0.5, settled  # a real distance from the edge, not a placeholder
    assert result["live_latency_samples"] == len(samples)
    assert result["live_latency_p95_s"] <= TARGET_S + SEGMENT_S + 2
    # Over MPTCP both emulated paths carried media.
    assert all(p["rx_bytes"] > 100_000 for p in result["paths"]), result["paths"]
