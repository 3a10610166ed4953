"""A path throttled below the lowest rung of the ladder makes both players stall, and the
collector gets each stall with its duration. The path starts fast (the page and the first
segments load quickly) and a timed netem event cuts its rate a few seconds into playback; the
page's buffer target is kept short so the buffer runs dry within the session."""

import json
import os

import pytest

from mpstream.netem.topology import Topology
from mpstream.player.session import MANIFESTS
from mpstream.qoe.events import SegmentEvent
from mpstream.qoe.metrics import of_type, parse_events, segment_rate_bps
from mpstream.server.stack import ServerStack
from tests.sessions import play, session_events

pytestmark = pytest.mark.timeout(600)

THROTTLE_AT_S = 7.0
PLAY_S = 24.0


def _lowest_rung_bps(media) -> int:
    """Nominal bit rate of the lowest rung plus the audio, from what the encoder made."""
    info = json.loads((media / "media.json").read_text())
    video = min(rung["nominal_bitrate"] for rung in info["rungs"])
    return int(video + info["audio"]["bitrate"])


def _throttled_profile(tmp_path, rate_bps: int):
    profile = tmp_path / "throttled.toml"
    profile.write_text(f"""
description = "one fast path that drops below the lowest rung {THROTTLE_AT_S} s in"
mode = "tcp"
[[paths]]
rate = "20mbit"
delay_ms = 5.0
queue_packets = 50
[[events]]
at_s = {THROTTLE_AT_S}
path = 0
action = "change"
dir = "downlink"
set = {{ rate = {rate_bps}, queue_bytes = 30000 }}
""")
    return profile


@pytest.fixture(scope="module")
def throttled(tiny_media, tmp_path_factory):
    """One topology and server for both players: each session restarts the event clock, which
    puts the path back to its fast rate and cuts it again THROTTLE_AT_S later."""
    rate = _lowest_rung_bps(tiny_media) // 3
    name = f"ps{os.getpid() % 100000}"
    profile = _throttled_profile(tmp_path_factory.mktemp("stalls"), rate)
    with Topology.up(profile, name=name) as topo, \
            ServerStack(tiny_media, netns=topo.server_ns, host=topo.server_addr,
                        mptcp=False) as stack:
        yield topo, stack, rate


@pytest.mark.parametrize("player", ["dashjs", "hlsjs"])
def test_throttled_path_stalls_with_durations(throttled, player):
    topo, stack, rate = throttled
    topo.start_events()
    result = play(topo, stack, player=player, manifest_path=MANIFESTS[player],
                  transport="tcp", duration_s=PLAY_S, buffer_s=4.0,
                  session_id=f"e2e-stall-{player}-{os.getpid()}")
    events = session_events(stack, result["session"])
    assert result["failure"] is None, result
    assert result["stall_count"] >= 1, result["page"]
    assert result["stall_ms"] > 500
    assert 0 < result["rebuffer_ratio"] < 1
    starts = [e for e in events if e["type"] == "stall_start"]
    ends = [e for e in events if e["type"] == "stall_end"]
    assert len(starts) == len(ends) == result["stall_count"]
    startup_t = next(e["t_ms"] for e in events if e["type"] == "startup")
    for start, end in zip(starts, ends, strict=True):
        assert startup_t < start["t_ms"] <= end["t_ms"]
        assert end["data"]["duration_ms"] == pytest.approx(end["t_ms"] - start["t_ms"], abs=2)
    assert sum(e["data"]["duration_ms"] for e in ends) == pytest.approx(result["stall_ms"], abs=5)
    # The stalls came after the cut: downloads slowed to about the throttled rate. Every
    # completed media download counts, audio too: a video download caught by the cut at a high
    # rung may be abandoned by the player or outlast the session, and then reports no rate.
    rates = [r for r in (segment_rate_bps(e.data)
                         for e in of_type(parse_events(events), SegmentEvent))
             if r is not None]
    assert min(rates) < rate * 2, sorted(rates)
