"""A session under the deadline path policy, end to end, over kernel MPTCP and over multipath
QUIC: a free path that fades below the ladder a few seconds into playback and a metered path
held back. The player's buffer drains, the controller reads it from the probe's events and
releases the metered path (MPTCP: its endpoint's backup flag; mpquic: the hop gateway's hold),
with the reason and the buffer level recorded; the metered path carries the video, and the
session's metered bytes say so. Under `always` beside it the metered path carries data from
the start."""

import os

import pytest

from mpstream.jsonlines import read_json_lines
from mpstream.netem.profile import load_profile
from mpstream.netem.topology import Topology
from mpstream.player.session import MANIFESTS
from mpstream.server.stack import ServerStack
from mpstream.transports import pathpolicy
from mpstream.transports.base import get_transport
from tests.sessions import play

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]  # make test-paths

FADE_AT_S = 6.0
PLAY_S = 30.0
# The player buffers at most 8 s ahead (so the 30 s of media is not all fetched before the
# fade), and the marks sit below that.
BUFFER_S = 8.0
MARKS = pathpolicy.DeadlineMarks(low_s=3.0, high_s=6.0)


def _profile(tmp_path):
    path = tmp_path / "fading-wifi.toml"
    path.write_text(f"""
description = "a free path that fades below the ladder {FADE_AT_S} s in, a metered one"
mode = "mptcp"
[[paths]]
name = "wifi"
rate = "20mbit"
delay_ms = 5.0
queue_packets = 50
[[paths]]
name = "cellular"
rate = "10mbit"
delay_ms = 20.0
queue_packets = 100
metered = true
cost_per_gb = 10.0
[[events]]
at_s = {FADE_AT_S}
path = "wifi"
action = "change"
dir = "downlink"
set = {{ rate = "100kbit", queue_bytes = 30000 }}
""")
    return load_profile(path)


def _session(tmp_path, media, policy, transport="mptcp"):
    network, chosen = _profile(tmp_path), pathpolicy.policy_named(policy)
    held = tuple(chosen.held_paths(network))
    profile = chosen.starting(network, held)
    name = f"pp{policy[:2]}{transport[2]}{os.getpid() % 10000}"
    with Topology.up(profile, name=name) as topo, \
            ServerStack(media, netns=topo.server_ns, host=topo.server_addr,
                        mptcp=get_transport(transport).kernel_mptcp) as stack:
        topo.start_events()
        return play(topo, stack, player="dashjs", manifest_path=MANIFESTS["dashjs"],
                    transport=transport, duration_s=PLAY_S, buffer_s=BUFFER_S,
                    path_policy=chosen, held_paths=held, metered=profile.metered_paths(),
                    deadline_marks=MARKS,
                    workdir=tmp_path / "carrier",
                    session_id=f"e2e-policy-{policy}-{transport}-{os.getpid()}")


@pytest.mark.parametrize("transport", ["mptcp", "mpquic"])
def test_deadline_brings_the_metered_path_in_when_the_buffer_runs_low(tiny_media, tmp_path,
                                                                      transport):
    result = _session(tmp_path, tiny_media, "deadline", transport)
    assert result["failure"] is None, result
    assert result["path_policy"] == "deadline"
    toggles = result["path_policy_toggles"]
    assert toggles, "the buffer ran low and the metered path never joined"
    first = toggles[0]
    assert first["action"] == "nobackup" and first["path"] == 1
    assert first["buffer_s"] < MARKS.low_s or "deadline" in first["reason"] \
        or "needs" in first["reason"], first
    # The metered path carried the video after it joined: its bytes and the price of them.
    assert result["metered_bytes"] > 200_000, (result["paths"], toggles)
    assert 0 < result["metered_share"] < 1
    assert result["metered_cost"] == pytest.approx(result["metered_bytes"] / 1e9 * 10.0,
                                                   rel=1e-3)
    if transport == "mpquic":
        # The sender itself was told: the gateway logged the release of the metered address.
        said = read_json_lines(tmp_path / "carrier" / "quic-gateway.jsonl")
        changes = [e["event"] for e in said if e.get("event") in ("hold", "release")]
        assert changes[:1] == ["release"], said


def test_always_uses_the_metered_path_from_the_start(tiny_media, tmp_path):
    result = _session(tmp_path, tiny_media, "always")
    assert result["failure"] is None, result
    assert result["path_policy"] == "always" and result["path_policy_toggles"] == []
    assert result["metered_bytes"] > 100_000, result["paths"]
