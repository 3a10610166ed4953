"""Adaptation rules in the real players (docs/abr.md): each rule of the catalog, asked for by
name, is the one the player reports back after configuration; a session with a rule of ours
records one decision event per segment, and each recorded choice is what the same function
gives for the recorded inputs (replayed offline by player/replay-abr.mjs)."""

import os

import pytest

from mpstream.netem.topology import Topology
from mpstream.player.abr import abr_names, catalog, default_abr
from mpstream.player.session import MANIFESTS
from mpstream.server.stack import ServerStack
from tests.sessions import play, replay_abr, session_events

pytestmark = pytest.mark.timeout(900)

# The rule is reported as the player is configured, and a rule of ours decides the first
# segments within a second of the play request: a session no longer than that.
RULE_S = 2.0
RULES = [(player, name) for player in ("dashjs", "hlsjs") for name in abr_names(player)]


@pytest.fixture(scope="module")
def unbalanced(tiny_media):
    # Paths of unequal rate: the rules have different rates to react to.
    name = f"ab{os.getpid() % 100000}"
    with Topology.up("thesis-bandwidth-unbalanced", name=name) as topo, \
            ServerStack(tiny_media, netns=topo.server_ns, host=topo.server_addr) as stack:
        yield topo, stack


def _play(env, player, abr, duration_s, tag="named", **kw):
    topo, stack = env
    return play(topo, stack, player=player, transport="mptcp", manifest_path=MANIFESTS[player],
                session_id=f"e2e-abr-{tag}-{player}-{abr}-{os.getpid()}", duration_s=duration_s,
                abr=abr, **kw)


@pytest.mark.parametrize(("player", "abr"), RULES, ids=[f"{p}-{a}" for p, a in RULES])
def test_the_player_reports_the_rule_it_was_asked_for(unbalanced, player, abr):
    result = _play(unbalanced, player, abr, RULE_S)
    assert result["failure"] is None, result
    assert result["abr"] == abr
    events = session_events(unbalanced[1], result["session"])
    reported = [e["data"] for e in events if e["type"] == "abr"]
    assert len(reported) == 1
    ours = catalog()[player][abr].kind == "mpstream"
    if ours:
        assert any("Mpstream" in r for r in reported[0]["player_rules"]), reported
        assert "fastSwitch" not in reported[0]["player_rules"]
        assert result["abr_decisions"] >= 1
    else:
        assert result["abr_decisions"] == 0
        assert not any("Mpstream" in r for r in reported[0]["player_rules"])
    assert len(result["ladder"]) >= 3


def test_no_rule_named_is_the_players_default_and_its_knobs_are_read_back(unbalanced):
    result = _play(unbalanced, "hlsjs", None, RULE_S, abr_params=(("abrBandWidthFactor", 0.8),))
    assert result["failure"] is None, result
    assert result["abr"] == default_abr("hlsjs") == "ewma"
    events = session_events(unbalanced[1], result["session"])
    params = next(e["data"]["params"] for e in events if e["type"] == "abr")
    # Asked for, and hls.js's own defaults for the rest (its config, read back).
    assert params["abrBandWidthFactor"] == 0.8
    assert params["abrEwmaDefaultEstimate"] > 0 and params["abrBandWidthUpFactor"] > 0


@pytest.mark.parametrize(("player", "abr"), [("dashjs", "robustmpc"), ("hlsjs", "bba0")])
def test_recorded_decisions_replay_to_the_same_choices(unbalanced, tmp_path, player, abr):
    result = _play(unbalanced, player, abr, 16.0, tag="replay",
                   abr_params=(("horizon", 4.0),) if abr == "robustmpc" else ())
    assert result["failure"] is None, result
    events = session_events(unbalanced[1], result["session"])
    decisions = [e["data"] for e in events if e["type"] == "abr_decision"]
    assert len(decisions) == result["abr_decisions"] >= 4
    if abr == "robustmpc":
        assert all(d["params"]["horizon"] == 4 for d in decisions)
    # One decision per downloaded video segment, each given the downloads before it (at most
    # the engine's ten).
    seen = [len(d["inputs"]["past"]) for d in decisions]
    assert seen == sorted(seen) and seen[0] <= 1 and seen[-1] >= 3, seen
    # Each video segment is fetched once (no fast-switch replacement of buffered ones), so
    # every decision is for the next segment.
    indices = [e["data"]["index"] for e in events if e["type"] == "segment"
               and e["data"]["kind"] in ("video", "muxed")]
    assert len(indices) == len(set(indices)), indices
    # The chosen rungs are the ones fetched next.
    ladder = decisions[-1]["inputs"]["ladder_bps"]
    fetched = {e["data"]["bitrate"] for e in events if e["type"] == "segment"
               and e["data"]["kind"] in ("video", "muxed")}
    assert fetched <= set(ladder)
    assert replay_abr(events, tmp_path) == (0, {"decisions": len(decisions), "mismatches": []})
    # A recorded choice the function would not make is caught.
    tampered = [dict(e, data={**e["data"], "index": (e["data"]["index"] + 1) % len(ladder)})
                if e["type"] == "abr_decision" else e for e in events]
    status, caught = replay_abr(tampered, tmp_path)
    assert status == 1 and len(caught["mismatches"]) == len(decisions)
