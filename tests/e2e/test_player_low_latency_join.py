"""A viewer joining a low-latency stream at once: the browser is started first, `mpstream live
--low-latency` next, nginx and the origin as soon as the stream is described, and the player is
pointed at it the moment its manifests are out, while the stream's first segment is still
being written. dash.js's first segment is the one being written; hls.js's first playlist
request is held by the origin until the first segment is finished (hls.js gives up on a
playlist of parts only: server/origin/app.py). Both players must settle at the target without
a stall.

The join is checked, not assumed: nginx's access log gives the moment the player first asked
for its manifest, and the first segment's file the moment it was finished. Nothing slow stands
between the manifests and the player's first request (the browser is up, the collector shared
and started before the stream), so the player asks within about a second of them."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from mpstream.manifests.lltree import read_live_state, read_low_latency
from mpstream.netem.topology import Topology
from mpstream.player.browsers import open_page
from mpstream.player.session import MANIFESTS
from mpstream.proc import stop
from mpstream.server.accesslog import read_access_log
from mpstream.server.stack import ServerStack, shared_collector
from mpstream.transports.base import get_transport
from tests.sessions import play, session_events
from tests.waiting import wait_until

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]  # make test-live

# The first segment is long enough to hold the join on a loaded machine too (the player asked
# about 1 s after the manifests idle, and the manifests come 1 to 3 s after the start), and short
# enough that hls.js's held first playlist request answers within its 10 s to first byte.
SEGMENT_S = 10.0
PART_S = 0.5
TARGET_S = 2.0
PLAY_S = 26.0
SETTLED_S = 6  # the session's last seconds, when a player that joined early has caught up


@contextlib.contextmanager
def described_stream(out: Path) -> Iterator[subprocess.Popen]:
    """`mpstream live --low-latency` into `out`, yielded as soon as its live.json describes the
    stream (before ffmpeg has written anything), stopped as Ctrl-C stops it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mpstream.cli", "live", "synthetic", "--ladder", "small",
         "--segment-duration", f"{SEGMENT_S:g}", "--window", "120", "--low-latency",
         "--part-duration", f"{PART_S:g}", "--target-latency", f"{TARGET_S:g}",
         "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: proc.poll() is None and read_low_latency(out), 60,
                   "the low-latency stream described itself")
        yield proc
    finally:
        stop(proc, graceful=signal.SIGINT, timeout=20)


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
    tree = tmp_path / "tree"
    mptcp = get_transport("mptcp")
    with open_page("chromium", topology.client_ns, wrap=mptcp.wrap) as page, \
            described_stream(tree) as proc, \
            ServerStack(tree, netns=topology.server_ns, host=topology.server_addr,
                        shared_collector=collector) as stack:
        wait_until(lambda: proc.poll() is None and read_live_state(tree)["state"] == "running",
                   60, "the stream's manifests were out")
        out_at = time.time()
        result = play(topology, stack, page=page, player=player,
                      manifest_path=MANIFESTS[player], duration_s=PLAY_S,
                      target_latency_s=TARGET_S, scenario="e2e-ll-join",
                      session_id=f"e2e-lljoin-{player}-{os.getpid()}")
        assert result["failure"] is None, result
        joined = _first_request_s(stack.access_log,
                                  "index.m3u8" if player == "hlsjs" else ".mpd")
        finished = _first_segment_finished_s(tree)
        started = datetime.fromisoformat(read_live_state(tree)["started_at"]).timestamp()
        events = session_events(stack, result["session"])
    assert joined < finished, (
        f"joined {joined - started:.2f} s into the stream ({joined - out_at:.2f} s after its "
        f"manifests were out), {joined - finished:.2f} s after its first segment was finished")
    # Where the player is once it has had time to catch up (by playing faster) from its join.
    samples = [e for e in events if e["type"] == "live_latency"]
    settled = [e["data"]["latency_s"] for e in samples
               if e["t_ms"] >= samples[-1]["t_ms"] - SETTLED_S * 1000]
    assert settled and min(settled) > 0.5, settled  # a real distance from the edge
    assert max(settled) < TARGET_S + 0.5, settled
    assert result["stall_count"] == 0, result
