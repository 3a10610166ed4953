"""A scenario over trace pairs (docs/mobile.md): the paired design in its plan (every condition
plays every pair once a round, each round in its own seeded order), the pairs in run.json and
read back from it, `run --pair`, a trial's network on its pair, and the single-path baselines a
condition names (`single_path`)."""

import json
from pathlib import Path

import pytest

from mpstream.errors import UserError
from mpstream.runner.layout import RUN_JSON, write_json
from mpstream.runner.run import plan_run
from mpstream.runner.scenario import expand_trials, load_scenario, parse_scenario
from mpstream.runner.trial import (
    load_plan,
    pair_refusals,
    plan_json,
    plan_pairs_json,
    session_id_for,
    trial_condition,
)
from tests.scenarios import PHONE

pytestmark = pytest.mark.unit

PAIRS = """
seed = 3
window_s = 30
wifi_shapes = ["walk", "steady"]
[[cellular]]
trace = "TMobile-LTE-short"
offsets = 2
[[cellular]]
trace = "Verizon-LTE-short"
offsets = 1
"""


def _raw(**over):
    raw = {"name": "m", "trials": 2, "seed": 9, "duration_s": 20, "pairs": "pairs.toml",
           "media": {"source": "synthetic", "ladder": "tiny", "segment_duration": 2},
           "baseline": "best",
           "conditions": [{"label": "mp", "profile": "phone.toml"},
                          {"label": "best", "profile": "phone.toml", "single_path": "best"},
                          {"label": "cell", "profile": "phone.toml", "single_path": "cellular"},
                          {"label": "sum", "profile": "phone.toml", "single_path": "sum"}]}
    return {**raw, **over}


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "phone.toml").write_text(PHONE)
    (tmp_path / "pairs.toml").write_text(PAIRS)
    return tmp_path


def test_every_condition_plays_every_pair_once_a_round_in_an_order_of_its_own(base):
    sc = parse_scenario(_raw(), base_dir=base)
    plan = expand_trials(sc)
    assert len(plan) == 2 * 4 * 3
    for r in (0, 1):
        cells = [(t.condition.label, t.pair.name) for t in plan if t.round == r]
        assert len(set(cells)) == len(cells) == 12
    orders = [[t.key.split("-", 1)[1] for t in plan if t.round == r] for r in (0, 1)]
    assert orders[0] != orders[1]  # each round its own shuffle
    assert [t.key for t in expand_trials(sc)] == [t.key for t in plan]  # seeded
    pair = plan[0].pair
    assert plan[0].key.endswith(f"-{pair.name}") and pair.name.startswith("p0")


def test_a_scenario_without_pairs_plans_as_it_did():
    sc = load_scenario("thesis-latency")
    assert all(t.pair is None for t in expand_trials(sc))
    assert expand_trials(sc, 1)[0].key == "r00-unbalanced-dashjs"


def test_the_shipped_mobile_scenario_plans_24_pairs_a_condition_in_about_two_hours():
    sc = load_scenario("mobile")
    labels = [c.label for c in sc.all_conditions()]
    assert {"mptcp-tuned", "tcp-best-single-path", "tcp-cellular", "tcp-sum"} <= set(labels)
    assert sc.baseline == "tcp-best-single-path"
    plan = expand_trials(sc)
    assert len({t.pair.name for t in plan}) >= 24
    assert len(plan) == len(labels) * len(sc.pair_list())
    cost = plan_run(sc, Path("/nonexistent/mobile")).cost()
    assert cost.seconds <= 2.5 * 3600
    deadline = next(c for c in sc.all_conditions() if c.path_policy == "deadline")
    assert sc.resolved(deadline).deployment.name == "mptcp-tuned"
    assert sc.resolved(deadline).paths.metered == {1: 10.0}


@pytest.mark.parametrize(("change", "message"), [
    ({"pairs": "nope"}, "no pair set 'nope'"),
    ({"duration_s": 40}, "duration_s 40 is longer than the pairs' traces"),
    ({"conditions": [{"label": "a", "profile": "phone.toml", "single_path": "fastest"}]},
     "conditions.0.single_path: Value error, 'fastest' is no single path: choose one of best, "
     "cellular, sum"),
    ({"conditions": [{"label": "a", "profile": "phone.toml", "single_path": "best",
                      "transport": "mptcp"}]}, "give a one-path transport"),
    ({"conditions": [{"label": "a", "profile": "phone.toml", "single_path": "best",
                      "set": {"tcp_path": 1}}]}, "leave tcp_path out"),
    ({"baseline_abr": "bola"}, r"baseline_abr: 'bola' is not one of two or more rules in abrs "
                               r"\(default\); list it there"),
    ({"abrs": ["default", "multipath"], "baseline_abr": "throughput"},
     "'throughput' is not one of two or more rules in abrs"),
])
def test_a_bad_pair_set_or_single_path_is_refused_naming_it(base, change, message):
    with pytest.raises(UserError, match=message):
        parse_scenario(_raw(**change), base_dir=base)


def test_the_shipped_mobile_abr_scenario_sets_each_rule_beside_the_players_own():
    sc = load_scenario("mobile-abr")
    assert sc.baseline_abr == "default" and sc.abrs == ["default", "multipath"]


def test_the_single_paths_are_the_wifi_the_cellular_path_and_their_sum(base):
    sc = parse_scenario(_raw(pairs=None), base_dir=base)
    got = {}
    for cond in sc.all_conditions():
        r = sc.resolved(cond)
        got[cond.label] = (r.transport.name, r.network.mode, r.network.primary_path,
                           r.network.link(r.network.primary_path, "downlink").rate_bps)
    assert got == {"mp": ("mptcp", "mptcp", 0, 12_000_000), "best": ("tcp", "tcp", 0, 12_000_000),
                   "cell": ("tcp", "tcp", 1, 5_000_000), "sum": ("tcp", "tcp", 0, 17_000_000)}


def test_a_single_path_the_network_cannot_give_is_refused(base, trace_store):
    (base / "free.toml").write_text(PHONE.replace("metered = true", ""))
    with pytest.raises(UserError, match="one metered path"):
        parse_scenario(_raw(pairs=None, baseline=None, conditions=[
            {"label": "c", "profile": "free.toml", "single_path": "cellular"}]), base_dir=base)
    traced = PHONE.replace('rate = "5mbit"', 'trace = "Verizon-LTE-short"')
    (base / "traced.toml").write_text(traced)
    with pytest.raises(UserError, match="two traces have no fixed sum"):
        parse_scenario(_raw(pairs=None, baseline=None, conditions=[
            {"label": "s", "profile": "traced.toml", "single_path": "sum"}]), base_dir=base)


def test_run_json_holds_the_pairs_and_a_trial_plays_them_as_written(base, tmp_path):
    sc = parse_scenario(_raw(), base_dir=base)
    plan = expand_trials(sc)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_json(run_dir / RUN_JSON, {**plan_json(sc, 2, None, False), **plan_pairs_json(plan)})
    run = json.loads((run_dir / RUN_JSON).read_text())
    assert [p["key"] for p in run["plan_pairs"]] == [t.key for t in plan]
    assert len(run["pair_set"]["pairs"]) == 3
    # The trial reads the pairs from run.json, not from the set's file, which may have changed.
    (base / "pairs.toml").write_text(PAIRS.replace("seed = 3", "seed = 4"))
    again = load_plan(run_dir)
    assert [again.trial(t.key).pair for t in plan] == [t.pair for t in plan]


def test_run_pair_runs_only_that_pairs_trials(base, tmp_path):
    sc = parse_scenario(_raw(), base_dir=base)
    name = sc.pair_list()[1].name
    run = plan_run(sc, tmp_path / "run", pairs=[name])
    assert {t.pair.name for t in run.selected} == {name}
    assert len(run.selected) == 2 * 4 and len(run.plan) == 2 * 4 * 3
    assert len(plan_run(sc, tmp_path / "run", pairs=["p0*"], only=["mp"]).selected) == 2 * 3
    with pytest.raises(UserError, match="has no pair 'nope'; its pairs: p01-"):
        plan_run(sc, tmp_path / "run", pairs=["nope"])
    with pytest.raises(UserError, match="plays no trace pairs"):
        plan_run(load_scenario("thesis-latency"), tmp_path / "other", pairs=["x"])


def test_a_trial_plays_its_pair_on_its_conditions_network(base, trace_store):
    sc = parse_scenario(_raw(), base_dir=base)
    by_label = {}
    for t in expand_trials(sc, 1):
        if t.pair == sc.pair_list()[0]:
            with trial_condition(sc, t) as resolved:
                net = resolved.network
                by_label[t.condition.label] = [net.link(i, "downlink").trace.name for i in (0, 1)]
                folder = net.link(0, "downlink").trace.parent
                assert folder.is_dir()
            assert not folder.exists()  # the pair's traces go with the trial
    both = ["wifi.down", "cellular.down"]
    assert by_label == {"mp": both, "best": both, "cell": both,
                        "sum": ["sum.down", "cellular.down"]}
    assert pair_refusals(sc) == []


def test_the_pairs_cellular_traces_are_checked_before_the_first_trial(base, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("MPSTREAM_TRACES", str(tmp_path / "empty"))
    sc = parse_scenario(_raw(), base_dir=base)
    assert "mpstream traces fetch TMobile-LTE-short Verizon-LTE-short" in pair_refusals(sc)[0]


def test_a_long_session_id_stays_within_64_characters_and_apart_from_its_neighbours(base):
    sc = parse_scenario(_raw(), base_dir=base)
    run_id = "mobile-20261202T031139Z-with-a-long-name"
    ids = {session_id_for(run_id, t) for t in expand_trials(sc)}
    assert len(ids) == len(expand_trials(sc)) and max(map(len, ids)) <= 64
