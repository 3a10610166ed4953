"""The multipath-aware adaptation rule in both players over kernel MPTCP (docs/abr.md#multipath):
a session starts on one path, whose rate carries the middle rung of the ladder at most, and a
second path comes up part-way (the client gains its address: its MPTCP endpoint is added, and
the kernel opens a subflow on it for the open connections, as a phone does when it joins a
network). The rule learns the second path from the server's per-path figures and chooses the
top rung, which the first path alone cannot carry; every decision replays offline. Over mphttp,
whose paths the server cannot tell apart from other connections, the rule reads the proxy's own
per-path figures instead (and over the QUIC hop: tests/e2e/test_player_quic.py)."""

import os
import subprocess
import threading

import pytest

from mpstream.netem.profile import load_profile
from mpstream.netem.topology import Topology
from mpstream.player.session import MANIFESTS
from mpstream.server.stack import ServerStack
from mpstream.transports.pathpolicy import mptcp_endpoint_id
from tests.sessions import play, playing, replay_abr, session_events

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]  # make test-paths

PLAY_S = 24.0
# The second path comes up this long after the first frame: the rule has decided a few
# segments on the first path alone by then (the page itself takes seconds to load at its rate).
COMES_UP_S = 6.0
# The tiny ladder is about 0.24, 0.45 and 0.81 Mbit/s: 0.7 Mbit/s alone affords at most the
# middle rung (0.85 x 0.7 = 0.6), with the second path's 1 Mbit/s the top one.
PROFILE = """
description = "one path, and a second that comes up part-way"
mode = "mptcp"
[[paths]]
name = "first"
rate = "700kbit"
delay_ms = 10.0
queue_packets = 30
[[paths]]
name = "second"
rate = "1mbit"
delay_ms = 10.0
queue_packets = 30
"""


def _endpoint(topo: Topology, verb: str) -> None:
    path = topo.paths[1]
    where = ([path.client_addr, "dev", path.client_ifname, "id", str(mptcp_endpoint_id(1)),
              "subflow"] if verb == "add" else ["id", str(mptcp_endpoint_id(1))])
    subprocess.run(["ip", "-n", topo.client_ns, "mptcp", "endpoint", verb, *where], check=True)


def _comes_up_once_playing(topo: Topology, stack: ServerStack, session_id: str,
                           stop: threading.Event) -> None:
    while not stop.is_set() and not playing(stack, session_id):
        stop.wait(0.2)
    if not stop.wait(COMES_UP_S):
        _endpoint(topo, "add")


@pytest.mark.parametrize("player", ["dashjs", "hlsjs"])
def test_the_rule_takes_a_higher_rung_once_the_second_path_comes_up(tiny_media, tmp_path, player):
    (tmp_path / "two.toml").write_text(PROFILE)
    name = f"mp{player[0]}{os.getpid() % 100000}"
    with Topology.up(load_profile(tmp_path / "two.toml"), name=name) as topo, \
            ServerStack(tiny_media, netns=topo.server_ns, host=topo.server_addr) as stack:
        _endpoint(topo, "delete")  # the client has one address to start with
        session_id = f"e2e-abr-multipath-{player}-{os.getpid()}"
        stop = threading.Event()
        comes_up = threading.Thread(target=_comes_up_once_playing,
                                    args=(topo, stack, session_id, stop))
        comes_up.start()
        try:
            result = play(topo, stack, player=player, manifest_path=MANIFESTS[player],
                          duration_s=PLAY_S, buffer_s=6.0, abr="multipath",
                          session_id=session_id)
        finally:
            stop.set()
            comes_up.join()
        events = session_events(stack, result["session"])
    assert result["failure"] is None, result
    assert result["abr"] == "multipath"
    decisions = [e for e in events if e["type"] == "abr_decision"]
    assert len(decisions) >= 6, len(decisions)
    top = len(decisions[-1]["data"]["inputs"]["ladder_bps"]) - 1

    def paths_at(d):
        return d["data"]["inputs"]["paths"] or []

    first, second = (path.client_addr for path in topo.paths)
    one = [d for d in decisions if all(p["address"] == first for p in paths_at(d))]
    two = [d for d in decisions
           if any(p["address"] == second and p["bps"] > 0 for p in paths_at(d))]
    assert one and two, [paths_at(d) for d in decisions]
    # On the first path alone the rule measured it and stayed below the top rung ...
    assert any(p["bps"] > 300_000 for d in one for p in paths_at(d))
    assert max(d["data"]["index"] for d in one) < top, [d["data"]["index"] for d in one]
    # ... and with the second path it went up to it, and the player fetched it.
    assert max(d["data"]["index"] for d in two) == top, \
        [(d["data"]["index"], paths_at(d)) for d in two]
    ladder = decisions[-1]["data"]["inputs"]["ladder_bps"]
    fetched = [e["data"]["bitrate"] for e in events if e["type"] == "segment"
               and e["data"]["kind"] in ("video", "muxed")]
    assert ladder[top] in fetched, fetched
    # Every decision, the paths it was given included, replays to the same choice.
    assert replay_abr(events, tmp_path) == (0, {"decisions": len(decisions), "mismatches": []})


def rule_reads_each_path_from_the_carrier(tiny_media, tmp_path, transport: str) -> None:
    """Both paths up from the start: the page asks the program beside the browser that carries
    the session (paths_url), and the rule, given both paths' rates, takes the top rung neither
    path alone carries. Also run over the QUIC hop, by tests/e2e/test_player_quic.py."""
    (tmp_path / "two.toml").write_text(PROFILE)
    name = f"mh{os.getpid() % 100000}"
    with Topology.up(load_profile(tmp_path / "two.toml"), name=name) as topo, \
            ServerStack(tiny_media, netns=topo.server_ns, host=topo.server_addr) as stack:
        result = play(topo, stack, transport=transport, player="dashjs",
                      manifest_path=MANIFESTS["dashjs"], duration_s=16.0, buffer_s=6.0,
                      abr="multipath", session_id=f"e2e-abr-{transport}-{os.getpid()}")
        events = session_events(stack, result["session"])
    assert result["failure"] is None, result
    decisions = [e for e in events if e["type"] == "abr_decision"]
    top = len(decisions[-1]["data"]["inputs"]["ladder_bps"]) - 1
    both = [d for d in decisions
            if {p["address"] for p in d["data"]["inputs"]["paths"] or [] if p["bps"] > 0}
            == {path.client_addr for path in topo.paths}]
    assert both, [d["data"]["inputs"]["paths"] for d in decisions]
    assert max(d["data"]["index"] for d in both) == top, \
        [(d["data"]["index"], d["data"]["inputs"]["paths"]) for d in both]
    assert replay_abr(events, tmp_path) == (0, {"decisions": len(decisions), "mismatches": []})


def test_over_mphttp_the_rule_reads_each_path_from_the_proxy(tiny_media, tmp_path):
    rule_reads_each_path_from_the_carrier(tiny_media, tmp_path, "mphttp")
