"""A viewer joining a low-latency stream at once: `mpstream live --low-latency` is started and
each player is pointed at it as soon as its manifests are out, while the stream's first
segment is still being written. dash.js's first segment is the one being written; hls.js's
first playlist request is held by the origin until the first segment is finished (hls.js gives
up on a playlist of parts only: server/origin/app.py). Both players must settle at the target
without a stall.

The join is checked, not assumed: nginx's access log gives the moment the player first asked
for its manifest, and the first segment's file the moment it was finished. The collector is
started once, before the stream (a stack's nginx and origin then start in well under a
second), so that the player asks within the first seconds of the stream."""

import os
from datetime import datetime
from pathlib import Path

import pytest

from mpstream.encoder.live import LiveConfig, live_in_background
from mpstream.encoder.lowlatency import LowLatency
from mpstream.manifests.lltree import read_live_state, read_low_latency
from mpstream.netem.topology import Topology
from mpstream.player.session import MANIFESTS
from mpstream.server.accesslog import read_access_log
from mpstream.server.stack import ServerStack, shared_collector
from tests.sessions import play, session_events

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]  # make test-live

# Segments long enough that the players' first requests (once the manifests are out, nginx and
# the origin started and the browser launched: about 3 s, 5 s on a loaded machine) fall inside
# the first one; the parts are the usual 0.5 s.
SEGMENT_S = 8.0
TARGET_S = 2.0
PLAY_S = 24.0
SETTLE_S = 8  # catching up by playback rate from a join in the first segment takes longer


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    collector_dir = tmp_path_factory.mktemp("lljoin-collector")
    collector_dir.chmod(0o755)
    with Topology.up("thesis-bandwidth-balanced", name=f"lj{os.getpid() % 100000}") as topo, \
            shared_collector(collector_dir) as collector:
        yield topo, collector


def _first_request_s(access_log: Path, suffix: str) -> float:
    """When the first request for a URI ending in `suffix` reached nginx (epoch seconds): its
    logged end less its time, as a held playlist ends long after it was asked for."""
    return min(float(e["msec"]) - float(e["request_time"]) for e in read_access_log(access_log)
               if e["uri"].endswith(suffix))


def _first_segment_finished_s(tree: Path) -> float:
    described = read_low_latency(tree)
    assert described is not None
    ll = described[0]
    finished = tree / "dash" / ll.segment_name(ll.renditions[0].rep, 1)
    assert finished.is_file(), "the first segment was never finished"
    return finished.stat().st_mtime


@pytest.mark.parametrize("player", ["hlsjs", "dashjs"])
def test_a_viewer_joining_during_the_first_segment_settles_at_the_target(
        network, tmp_path, player):
    topology, collector = network
    tmp_path.chmod(0o755)
    config = LiveConfig(source="synthetic", ladder="small", segment_duration=SEGMENT_S,
                        window_s=120, out=tmp_path / "tree",
                        low_latency=LowLatency(part_duration=0.5, target_latency_s=TARGET_S))
    with live_in_background(config) as tree, \
            ServerStack(tree, netns=topology.server_ns, host=topology.server_addr,
                        shared_collector=collector) as stack:
        result = play(topology, stack, player=player, manifest_path=MANIFESTS[player],
                      transport="mptcp", duration_s=PLAY_S, target_latency_s=TARGET_S,
                      session_id=f"e2e-lljoin-{player}-{os.getpid()}", scenario="e2e-ll-join")
        assert result["failure"] is None, result
        joined = _first_request_s(stack.access_log,
                                  "index.m3u8" if player == "hlsjs" else ".mpd")
        finished = _first_segment_finished_s(tree)
        started = datetime.fromisoformat(read_live_state(tree)["started_at"]).timestamp()
        events = session_events(stack, result["session"])
    assert joined < finished, (f"joined {joined - started:.2f} s into the stream, "
                               f"{joined - finished:.2f} s after its first segment was finished")
    startup_t = next(e["t_ms"] for e in events if e["type"] == "startup")
    settled = [e["data"]["latency_s"] for e in events if e["type"] == "live_latency"
               and e["t_ms"] >= startup_t + SETTLE_S * 1000]
    assert settled and min(settled) > 0.5, settled  # a real distance from the edge
    assert max(settled) < TARGET_S + 0.5, settled
    assert result["stall_count"] == 0, result
