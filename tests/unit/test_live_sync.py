"""A trial's player is told of the live stream once (Scenario.live_sync): a low-latency
stream's target defaults to three parts plus the condition's round trip, the catch-up settings
come from the scenario's [live] table, and the page gets them all as its parameters."""

from urllib.parse import parse_qs, urlsplit

import pytest

from mpstream.encoder.lowlatency import DEFAULT_RTT_S
from mpstream.errors import UserError
from mpstream.player.livesync import LiveSync
from mpstream.player.session import PlayRequest, page_url
from mpstream.runner.scenario import network_rtt_s, parse_scenario
from mpstream.transports.base import get_transport
from tests.unit.test_runner_scenario import LOW_LATENCY, PROFILE, _raw


@pytest.fixture
def base(tmp_path):
    (tmp_path / "p.toml").write_text(PROFILE)
    return tmp_path


def _scenario(base, **live):
    return parse_scenario(_raw(media=None, live={**LOW_LATENCY, **live}), base_dir=base)


@pytest.mark.parametrize("part, target", [(0.2, 0.62), (0.25, 0.77), (0.33, 1.02)])
def test_a_low_latency_target_is_three_parts_and_the_networks_round_trip(base, part, target):
    """The profile's paths have 10 and 20 ms round trips: the larger is allowed for. A third of
    a second is a third of the 2 s segment's sixths, not 0.33."""
    scenario = _scenario(base, part_duration=part)
    for cond in scenario.all_conditions():
        sync = scenario.live_sync(scenario.resolved(cond))
        assert sync is not None and sync.target_s == pytest.approx(target)
        assert sync.catchup_max_rate is None  # the page's defaults


def test_a_given_target_and_catch_up_settings_are_handed_down(base):
    scenario = _scenario(base, part_duration=0.2, target_latency_s=0.8, catchup_max_rate=1.1,
                         catchup_min_rate=0.9, max_drift_s=1.5)
    sync = scenario.live_sync(scenario.resolved(scenario.conditions[0]))
    assert sync == LiveSync(target_s=0.8, catchup_max_rate=1.1, catchup_min_rate=0.9,
                            max_drift_s=1.5)


@pytest.mark.parametrize("live, says", [
    ({"target_latency_s": 0.5, "part_duration": 0.2}, "give at least 0.6 s"),
    ({"catchup_max_rate": 0.9}, "catchup_max_rate"),
    ({"catchup_min_rate": 1.5}, "catchup_min_rate"),
])
def test_bad_live_settings_are_refused_at_load(base, live, says):
    with pytest.raises(UserError, match=says):
        _scenario(base, **live)


def test_a_scenario_without_a_live_stream_tells_nothing(base):
    scenario = parse_scenario(_raw(), base_dir=base)
    assert scenario.live_sync(scenario.resolved(scenario.conditions[0])) is None


def test_a_network_that_is_not_emulated_has_the_default_round_trip():
    assert network_rtt_s(None) == DEFAULT_RTT_S


def test_the_page_gets_the_catch_up_settings_as_parameters():
    request = PlayRequest(player="hlsjs", transport=get_transport("mptcp"), session_id="s",
                          duration_s=10, target_latency_s=0.62, catchup_max_rate=1.1,
                          catchup_min_rate=0.9, max_drift_s=1.5)
    query = parse_qs(urlsplit(page_url("http://h", request)).query)
    assert query["target_latency"] == ["0.62"] and query["catchup_max_rate"] == ["1.1"]
    assert query["catchup_min_rate"] == ["0.9"] and query["max_drift"] == ["1.5"]
    plain = parse_qs(urlsplit(page_url("http://h", PlayRequest(
        player="hlsjs", transport=get_transport("mptcp"), session_id="s", duration_s=10))).query)
    assert not {"catchup_max_rate", "catchup_min_rate", "max_drift"} & set(plain)
