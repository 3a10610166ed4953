"""`mpstream tune`'s parts that need no trial: the space parser and its refusals, the settings
a candidate gets, the objectives measured from per-trial figures, dominance, the front."""

from pathlib import Path

import pytest

from mpstream.deployment import Deployment, load_deployment
from mpstream.errors import UserError
from mpstream.runner.report.analysis import Analysis, Group
from mpstream.runner.tune.search import (
    OBJECTIVES,
    Measured,
    candidate_label,
    dominates,
    measure,
    optimistic,
    pareto_front,
)
from mpstream.runner.tune.space import apply_settings, decode, load_space, parse_space, space_names


def _space(settings, proc_sys=None, base=None):
    kwargs = {} if proc_sys is None else {"proc_sys": proc_sys}
    return parse_space({"settings": settings}, name="s", base=base or Deployment(), **kwargs)


def test_the_shipped_mptcp_space_loads_against_the_tuned_preset():
    assert "mptcp" in space_names()
    space = load_space("mptcp", load_deployment("mptcp-tuned"))
    assert "server.cc" in space.names() and "client.backup" in space.names()


@pytest.mark.parametrize("settings, said", [
    ({"server.ccc": ["bbr"]}, "server.ccc: no such setting; a space may change path_policy, "
                              "server.cc"),
    ({"server.cc": ["Bad Name"]}, "server.cc: the value 'Bad Name' is refused"),
    ({"client.mptcp.path_manager": ["mptcpd"]}, "the value 'mptcpd' is refused"),
    ({"server.sysctls.kernel.panic": [1]}, "'kernel.panic' is not a per-namespace TCP setting"),
    ({"server.sysctls.net.ipv4.tcp_imaginary": [1]}, "this kernel has no "
                                                     "net.ipv4.tcp_imaginary"),
    ({"server.cc": []}, "give at least one value"),
    ({"server.cc": "bbr"}, "give a list of values or a range"),
    ({"server.sysctls.net.ipv4.tcp_rto_max_ms": {"low": 5000, "high": 1000}},
     "low (5000) must be below high (1000)"),
    ({"server.sysctls.net.ipv4.tcp_rto_max_ms": {"low": 0, "high": 1000, "log": True}},
     "a log range needs low above 0"),
    ({"server.sysctls.net.ipv4.tcp_rto_max_ms": {"low": 1, "top": 2}}, "unknown: top"),
    ({"scheduler": [1]}, "scheduler: give a list of names"),
])
def test_a_bad_space_is_refused_naming_the_setting_and_what_is_allowed(tmp_path, settings, said):
    (tmp_path / "net" / "ipv4").mkdir(parents=True)
    (tmp_path / "net" / "ipv4" / "tcp_rto_max_ms").write_text("120000\n")
    with pytest.raises(UserError) as info:
        _space(settings, proc_sys=tmp_path)
    assert said in str(info.value)


def test_a_space_without_settings_is_refused():
    with pytest.raises(UserError, match=r"give a \[settings\] table"):
        parse_space({"description": "x"}, name="s", base=Deployment())
    with pytest.raises(UserError, match="unknown key"):
        parse_space({"setting": {}}, name="s", base=Deployment())


def test_a_candidate_is_the_base_deployment_with_its_settings_changed():
    base = load_deployment("mptcp-tuned")
    changed = apply_settings(base, {"server.cc": "bbr", "client.backup": [1],
                                    "client.sysctls.net.ipv4.tcp_retries2": 15,
                                    "scheduler": "default"}, name="c1")
    assert changed.name == "c1" and changed.server.cc == "bbr"
    assert changed.client.backup == [1]
    assert changed.client.sysctls["net.ipv4.tcp_retries2"] == 15
    assert changed.client.sysctls["net.ipv4.tcp_rto_max_ms"] == 1000  # kept from the base
    assert base.server.cc == "cubic"  # the base is untouched


def test_values_go_through_the_sampler_and_back():
    space = _space({"client.backup": [[], [1]], "server.cc": ["cubic", "bbr"]})
    backup = space.choices[0]
    assert [decode(backup, v) for v in backup.encoded()] == [[], [1]]
    assert candidate_label({"a": [1], "b": "x"}) == candidate_label({"b": "x", "a": [1]})
    assert candidate_label({"a": [1]}) != candidate_label({"a": []})


def _analysis(rows: dict[str, list[dict]]) -> Analysis:
    """The analysis of a search's run folder whose conditions' ok trials gave `rows`."""
    per_trial = {Group(label): [{"key": f"r{i:02d}-{label}", **row} for i, row in enumerate(got)]
                 for label, got in rows.items()}
    return Analysis(Path(), {}, [], frozenset(), 2, {}, list(per_trial), per_trial, {}, {}, [],
                    [], {}, {})


def test_a_candidates_objectives_are_ratios_to_its_own_baseline_trials():
    rows = {
        "c1": [{"startup_delay_ms": 1100, "download_rate_mbps": 27, "longest_stall_ms": 0},
               {"startup_delay_ms": 1300, "download_rate_mbps": 24, "longest_stall_ms": 200}],
        "c1-baseline": [{"startup_delay_ms": 1000, "download_rate_mbps": 30,
                         "longest_stall_ms": 0},
                        {"startup_delay_ms": 1400, "download_rate_mbps": 18,
                         "longest_stall_ms": 0}],
    }
    m = measure(_analysis(rows), "c1", OBJECTIVES)
    assert m is not None and m.trials == 2
    assert m.values == pytest.approx([1200 / 1200, 25.5 / 24, 100])
    assert m.low[0] < 1 < m.high[0]
    assert measure(_analysis({"c1": rows["c1"]}), "c1", OBJECTIVES) is None  # no baseline
    one = measure(_analysis({k: v[:1] for k, v in rows.items()}), "c1", OBJECTIVES)
    assert one is not None and optimistic(one, OBJECTIVES) is None  # one trial: no interval


def test_dominance_and_the_front_follow_each_objectives_direction():
    # startup ratio (lower better), share ratio (higher better), longest stall (lower better)
    a, b, c = [1.0, 0.95, 0.0], [1.1, 0.90, 0.0], [0.9, 0.80, 500.0]
    assert dominates(a, b, OBJECTIVES) and not dominates(b, a, OBJECTIVES)
    assert not dominates(a, c, OBJECTIVES) and not dominates(c, a, OBJECTIVES)
    assert not dominates(a, a, OBJECTIVES)
    assert pareto_front({"a": a, "b": b, "c": c}, OBJECTIVES) == ["a", "c"]


def test_a_candidate_is_dominated_only_at_its_most_favourable():
    m = Measured(values=[1.3, 0.85, 0.0], low=[1.2, 0.80, 0.0], high=[1.4, 0.90, 0.0], trials=3)
    best = optimistic(m, OBJECTIVES)
    assert best == [1.2, 0.90, 0.0]
    assert dominates([1.0, 0.95, 0.0], best, OBJECTIVES)  # a front member beats even that
    assert not dominates([1.25, 0.95, 0.0], best, OBJECTIVES)  # not on startup
