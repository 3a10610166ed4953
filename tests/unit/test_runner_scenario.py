"""Scenario files: validation errors that name the field, shipped scenarios, trial order."""

import json
from pathlib import Path

import pytest

from mpstream.errors import UserError
from mpstream.runner.layout import RUN_JSON, write_json
from mpstream.runner.scenario import (
    SCENARIOS_DIR,
    condition_of_key,
    expand_trials,
    load_scenario,
    parse_scenario,
)
from mpstream.runner.trial import load_plan, plan_json
from mpstream.transports.base import get_transport

PROFILE = """
mode = "mptcp"
cc = "cubic"
[[paths]]
rate = "10mbit"
delay_ms = 5.0
[[paths]]
rate = "5mbit"
delay_ms = 10.0
"""


def _raw(**over):
    raw = {
        "name": "t",
        "trials": 3,
        "seed": 4,
        "media": {"source": "synthetic", "ladder": "tiny", "segment_duration": 2},
        "conditions": [
            {"label": "a", "profile": "p.toml"},
            {"label": "b", "profile": "p.toml", "transport": "tcp"},
        ],
    }
    raw.update(over)
    return raw


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "p.toml").write_text(PROFILE)
    return tmp_path


def test_every_shipped_scenario_loads_and_builds_its_profiles(trace_store):
    names = sorted(p.stem for p in SCENARIOS_DIR.glob("*.toml"))
    assert {"thesis-latency", "thesis-loss", "thesis-bandwidth", "path-failure",
            "wifi-cellular", "mpcc-buffer-sweep"} <= set(names)
    for name in names:
        sc = load_scenario(name)
        for cond in sc.all_conditions():
            profile = sc.resolved(cond).network
            # A condition's transport sets the network's mode (mpquic: every path, as mptcp).
            wanted = get_transport(cond.transport).network_mode if cond.transport else None
            assert profile.mode == (wanted or profile.mode)


def test_a_trials_key_names_its_condition_in_every_shipped_scenario(trace_store):
    # quic-bandwidth's single-tcp and single-tcp-hop, abr's players and rules after the label:
    # a summary reads a plan's conditions from its keys (runner/report/summary.py).
    for path in sorted(SCENARIOS_DIR.glob("*.toml")):
        sc = load_scenario(path.stem)
        labels = [c.label for c in sc.all_conditions()]
        for t in expand_trials(sc, 1):
            assert condition_of_key(t.key, labels) == t.condition.label, (path.stem, t.key)
    assert condition_of_key("r00-other-dashjs", ["single"]) is None


def test_thesis_single_path_is_tcp_and_mptcp_conditions_are_not(base):
    sc = load_scenario("thesis-bandwidth")
    modes = {c.label: sc.resolved(c).network.mode for c in sc.all_conditions()}
    assert modes == {"balanced": "mptcp", "unbalanced": "mptcp", "single": "tcp",
                     "balanced-bbr": "mptcp", "unbalanced-bbr": "mptcp"}


def test_path_failure_has_a_down_event_on_the_first_path():
    sc = load_scenario("path-failure")
    for cond in sc.all_conditions():
        events = sc.resolved(cond).network.emulator_events(0)
        assert any(e["set"] == {"down": True} and e["at_s"] == 20.0 for e in events)


def test_sweep_expands_to_every_combination_with_overrides_applied():
    sc = load_scenario("mpcc-buffer-sweep")
    conds = sc.all_conditions()
    assert len(conds) == 36  # six buffers × six congestion controls
    assert next(c for c in conds if c.label == "1000k-olia").set["deployment.server.cc"] == "olia"
    c = next(c for c in conds if c.label == "550k-bbr")
    profile = sc.resolved(c).network
    assert profile.cc == "bbr"
    assert [profile.link(i, "downlink").queue_bytes for i in range(2)] == [550000, 550000]


def test_a_pattern_names_a_sweeps_column_and_a_name_matching_nothing_is_refused():
    from mpstream.runner.run import conditions_named

    sc = load_scenario("mpcc-buffer-sweep")
    # Patterns name a column (one cc at every buffer), in the scenario's order; a plain label
    # still names itself only (1000k-bbr, not also 1000k-bbr-like labels).
    assert conditions_named(sc, ["*-bbr"]) == [f"{b}-bbr" for b in
                                              ("375k", "400k", "550k", "700k", "850k", "1000k")]
    assert conditions_named(sc, ["1000k-lia", "375k-*"])[-1] == "1000k-lia"
    assert len(conditions_named(sc, ["1000k-lia", "375k-*"])) == 7
    with pytest.raises(UserError, match=r"no condition '\*-reno'; its conditions: 375k-cubic"):
        conditions_named(sc, ["*-lia", "*-reno"])


def test_a_sweep_keeps_its_trial_keys_through_the_run_folders_plan(tmp_path):
    # The sweep lists the buffer before the cc, against the alphabet; run.json's keys are
    # sorted, and every planned key must still be found by `mpstream trial`.
    sc = load_scenario("mpcc-buffer-sweep")
    write_json(tmp_path / RUN_JSON, plan_json(sc, 2, None, False))
    plan = load_plan(tmp_path)
    keys = [t.key for t in expand_trials(sc, 2)]
    assert "r01-1000k-olia" in keys
    assert [plan.trial(k).key for k in keys] == keys


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"trials": 0}, "trials"),
        ({"players": ["vlc"]}, "players.0"),
        ({"duration_s": -1}, "duration_s"),
        ({"media": {"source": "sample", "dir": "x"}}, "media"),
        ({"conditions": [{"label": "a b", "profile": "p.toml"}]}, "conditions.0.label"),
        ({"conditions": [{"label": "a", "profile": "p.toml", "transport": "udp"}]},
         "conditions.0.transport"),
        ({"conditions": [{"label": "a", "profile": "p.toml"}] * 2}, "repeated: a"),
        ({"conditions": []}, "no conditions"),
        ({"colour": "red"}, "colour"),
        ({"browsers": ["safari"]}, "browsers.0"),
        ({"browsers": []}, "browsers"),
        ({"codecs": ["vp9"]}, "codecs.0"),
        ({"codecs": ["hevc", "hevc"]}, "codecs"),
    ],
)
def test_bad_input_names_the_field(base, change, field):
    with pytest.raises(UserError) as err:
        parse_scenario(_raw(**change), base_dir=base)
    assert field in str(err.value)


def test_unknown_profile_and_bad_override_are_caught_at_load(base):
    with pytest.raises(UserError, match=r"'b'.*nope"):
        parse_scenario(_raw(conditions=[{"label": "b", "profile": "nope"}]), base_dir=base)
    with pytest.raises(UserError, match="loss"):
        parse_scenario(
            _raw(conditions=[{"label": "a", "profile": "p.toml", "set": {"paths.*.loss": 3}}]),
            base_dir=base,
        )


def test_unknown_scenario_lists_the_shipped_ones():
    with pytest.raises(UserError, match="thesis-bandwidth"):
        load_scenario("no-such-scenario")


def test_trials_interleave_conditions_reproducibly(base):
    sc = parse_scenario(_raw(players=["dashjs", "hlsjs"]), base_dir=base)
    trials = expand_trials(sc)
    assert len(trials) == 2 * 2 * 3
    assert len({t.key for t in trials}) == len(trials)
    # Every round holds each cell once, and rounds follow one another.
    for r in range(3):
        cells = [(t.condition.label, t.player) for t in trials if t.round == r]
        assert sorted(cells) == sorted((c, p) for c in "ab" for p in ("dashjs", "hlsjs"))
    assert [t.round for t in trials] == sorted(t.round for t in trials)
    # Same seed, same order; more trials keep the earlier rounds' order.
    assert [t.key for t in expand_trials(sc)] == [t.key for t in trials]
    assert [t.key for t in expand_trials(sc, 5)][:12] == [t.key for t in trials]
    # The order is shuffled, not the listing order, in at least one round.
    listing = [("a", "dashjs"), ("a", "hlsjs"), ("b", "dashjs"), ("b", "hlsjs")]
    rounds = [[(t.condition.label, t.player) for t in trials if t.round == r] for r in range(3)]
    assert any(r != listing for r in rounds)
    other = parse_scenario(_raw(players=["dashjs", "hlsjs"], seed=5), base_dir=base)
    assert [t.key for t in expand_trials(other, 8)] != [t.key for t in expand_trials(sc, 8)]


def test_live_scenario_plays_a_live_stream_instead_of_media():
    from mpstream.runner.scenario import load_scenario

    live = load_scenario("live")
    assert live.media is None and live.live.target_latency_s == 6
    labels = [c.label for c in live.all_conditions()]
    assert labels == ["balanced", "unbalanced", "single", "failure-mptcp", "failure-single"]
    raw = live.model_dump(mode="json", exclude={"media"})
    both = {**raw, "media": {"source": "synthetic"}}
    with pytest.raises(UserError, match=r"either a \[media\] table .* or a \[live\] table"):
        parse_scenario(both, base_dir=live.base_dir)
    bad = {**raw, "live": {**raw["live"], "window_s": 1}}
    with pytest.raises(UserError, match="window_s"):
        parse_scenario(bad, base_dir=live.base_dir)


def test_browsers_and_codecs_are_crossed_like_players(base):
    sc = parse_scenario(_raw(browsers=["chromium", "firefox"], codecs=["avc", "hevc"]),
                        base_dir=base)
    trials = expand_trials(sc, 1)
    cells = {(t.condition.label, t.player, t.browser, t.codec) for t in trials}
    assert cells == {(c, "dashjs", b, k) for c in "ab" for b in ("chromium", "firefox")
                     for k in ("avc", "hevc")}
    keys = {t.key for t in trials}
    assert len(keys) == 8
    assert "r00-a-dashjs-firefox-hevc" in keys and "r00-b-dashjs-avc" in keys


def test_defaults_keep_the_keys_and_order_of_scenarios_without_browsers(base):
    sc = parse_scenario(_raw(players=["dashjs", "hlsjs"]), base_dir=base)
    trials = expand_trials(sc)
    assert {(t.browser, t.codec) for t in trials} == {("chromium", "auto")}
    assert all(t.key.endswith(("-dashjs", "-hlsjs")) for t in trials)


def test_abrs_are_crossed_like_players_and_named_in_keys(base):
    sc = parse_scenario(_raw(abrs=["default", "bola", "robustmpc"],
                             abr_params={"robustmpc": {"horizon": 3}}), base_dir=base)
    trials = expand_trials(sc, 1)
    assert {(t.condition.label, t.abr) for t in trials} == {
        (c, a) for c in "ab" for a in ("default", "bola", "robustmpc")}
    keys = {t.key for t in trials}
    assert {"r00-a-dashjs", "r00-a-dashjs-bola", "r00-b-dashjs-robustmpc"} <= keys
    assert sc.abr_request("dashjs", "robustmpc") == ("robustmpc", (("horizon", 3.0),))
    assert sc.abr_request("dashjs", "default") == (None, ())
    # Without abrs a scenario plans what it planned before the factor existed: same keys, same
    # order (the seeded shuffle sees as many cells as before).
    plain = expand_trials(parse_scenario(_raw(players=["dashjs", "hlsjs"]), base_dir=base))
    assert all(t.abr == "default" for t in plain)
    assert [t.key for t in plain] == [
        "r00-a-hlsjs", "r00-b-hlsjs", "r00-a-dashjs", "r00-b-dashjs",
        "r01-a-dashjs", "r01-b-dashjs", "r01-b-hlsjs", "r01-a-hlsjs",
        "r02-b-dashjs", "r02-a-hlsjs", "r02-b-hlsjs", "r02-a-dashjs"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"players": ["dashjs", "hlsjs"], "abrs": ["bola"]},
         "abrs: abr 'bola': hlsjs supports ewma, bba0, robustmpc, rate-based"),
        ({"abrs": ["no-such-rule"]},
         "abr 'no-such-rule': dashjs supports dynamic, throughput, bola"),
        ({"abrs": ["bba0", "bba0"]}, "listed twice"),
        ({"abrs": []}, "abrs: default or a rule"),
        ({"abrs": ["bba0"], "abr_params": {"robustmpc": {"horizon": 3}}},
         "abr_params.robustmpc: robustmpc is not in abrs"),
        ({"abrs": ["bba0"], "abr_params": {"bba0": {"horizon": 3}}},
         "abr_params.bba0: abr parameter 'horizon=3': give KEY=VALUE with KEY one of bba0's"),
    ],
)
def test_a_rule_a_player_lacks_is_refused_at_load_naming_what_it_has(base, change, message):
    with pytest.raises(UserError) as err:
        parse_scenario(_raw(**change), base_dir=base)
    assert message in str(err.value)


LOW_LATENCY = {"source": "synthetic", "ladder": "small", "segment_duration": 2,
               "window_s": 20, "low_latency": True, "part_duration": 0.5}
COMPETING = PROFILE + """
[[competitors]]
name = "other"
transport = "{transport}"
traffic = "{traffic}"
[[competitors.paths]]
via = 0
"""


@pytest.mark.parametrize("name", ["mptcp", "tcp", "mpquic", "quic", "mptcp-hop", "tcp-hop"])
def test_every_transport_but_mphttp_carries_a_low_latency_stream(name):
    assert get_transport(name).low_latency_refusal() is None


def test_mphttp_is_refused_for_a_low_latency_stream_before_any_trial_says_why(base):
    """A range split needs the object's size, which a segment being written does not have:
    mphttp is refused for a low-latency live stream (the condition's transport, or a competing
    player's), with the reason and the transports to use instead; the same scenario without
    low_latency and a competitor that only downloads (cross traffic) are not refused for it;
    an iperf scenario refuses mphttp for its own reason."""
    from mpstream.runner.workloads import workload_for

    for transport, traffic in (("mphttp", "same"), ("mphttp", "bulk"), ("tcp", "same")):
        (base / f"{transport}-{traffic}.toml").write_text(
            COMPETING.format(transport=transport, traffic=traffic))
    conditions = [{"label": "own", "profile": "p.toml", "transport": "mphttp"},
                  {"label": "mpquic", "profile": "p.toml", "transport": "mpquic"},
                  {"label": "player", "profile": "mphttp-same.toml", "transport": "mptcp"},
                  {"label": "cross", "profile": "mphttp-bulk.toml", "transport": "mptcp"},
                  {"label": "tcp-user", "profile": "tcp-same.toml", "transport": "mphttp"}]
    video = workload_for("video")

    def refusals(live):
        sc = parse_scenario(_raw(media=None, live=live, conditions=conditions), base_dir=base)
        return {c.label: video.refusal(sc, sc.resolved(c)) for c in sc.all_conditions()}

    low = refusals(LOW_LATENCY)
    assert {label for label, r in low.items() if r} == {"own", "player", "tcp-user"}, low
    own = low["own"]
    assert own is not None
    assert own.startswith("the [live] stream is low-latency (low_latency = true): transport "
                          "mphttp cannot carry")
    assert "a range split of an object of unknown length cannot be planned" in own
    assert "Use mptcp or mpquic (multipath), or tcp or quic (one path)" in own
    assert "a competing player's transport mphttp" in (low["player"] or "")
    plain = {k: v for k, v in LOW_LATENCY.items() if k not in ("low_latency", "part_duration")}
    assert not any(refusals(plain).values())
    iperf = parse_scenario(_raw(kind="iperf", media=None, conditions=conditions[:1]),
                           base_dir=base)
    bulk = workload_for("iperf").refusal(iperf, iperf.resolved(iperf.conditions[0]))
    assert "carries a player's HTTP only" in (bulk or "")


def test_a_media_tree_written_by_a_low_latency_stream_refuses_mphttp_too(tmp_path, base):
    """`play --media` and a [media] dir play a low-latency tree as they find it: mphttp is
    refused for it by the same rule, named by the tree; a tree without live.json is not."""
    from mpstream.manifests.lltree import LIVE_JSON, LOW_LATENCY_KEY, LowLatencyTree, Rendition
    from mpstream.runner.workloads import workload_for

    tree = LowLatencyTree(stamp="T", segment_duration=2.0, part_duration=0.5, part_target=0.52,
                          target_latency_s=1.5, window_segments=10,
                          renditions=(Rendition(playlist="360p", rep="0", kind="video"),))
    media = tmp_path / "tree"
    media.mkdir()
    sc = parse_scenario(_raw(media={"dir": str(media)},
                             conditions=[{"label": "own", "profile": "p.toml",
                                          "transport": "mphttp"}]), base_dir=base)
    video, mphttp = workload_for("video"), sc.resolved(sc.conditions[0])
    assert video.refusal(sc, mphttp) is None  # no live.json: no live tree
    (media / LIVE_JSON).write_text(json.dumps({"state": "running",
                                               "extra": {LOW_LATENCY_KEY: tree.model_dump()}}))
    mptcp = mphttp.model_copy(update={"transport": get_transport("mptcp")})
    assert video.refusal(sc, mptcp) is None
    refusal = video.refusal(sc, mphttp) or ""
    assert refusal.startswith(f"the media {media} is a low-latency live stream: transport "
                              "mphttp cannot carry")
    assert "unknown length" in refusal
