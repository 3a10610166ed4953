"""Trace pairs (netem/tracepairs.py) and what they are made of (netem/traces.py): a window of a
trace from an offset, the sum of two traces, outage time, the WiFi shapes, the pair sets drawn
from their seed, and a pair's traces put on a network. The published cellular traces are not
used: the trace_store fixture's made-up ones stand in under their names."""

import pytest

from mpstream.errors import UserError
from mpstream.netem import traces
from mpstream.netem.profile import profile_from_dict
from mpstream.netem.tracepairs import (
    PairSetSpec,
    draw,
    load_pair_set,
    pair_set_names,
    with_pair,
)

pytestmark = pytest.mark.unit


def test_a_window_from_an_offset_wraps_as_the_emulator_does_and_ends_at_its_length():
    # Period 10 ms: opportunities at 1, 2, 5, 10, then 11, 12, 15, 20, ... From 8 ms for 6 ms:
    # 10, 11, 12 -> 2, 3, 4, and the window's own period, 6.
    assert traces.window([1, 2, 5, 10], 8, 6) == [2, 3, 4, 6]
    assert traces.window([1, 2, 5, 10], 0, 10) == [1, 2, 5, 10]
    assert traces.window([1, 2, 5, 10], 25, 20) == [0, 5, 6, 7, 10, 15, 16, 17, 20]


def test_the_sum_of_two_traces_delivers_what_both_do_and_needs_one_period():
    assert traces.merged([1, 3, 10], [2, 3, 10]) == [1, 2, 3, 3, 10, 10]
    with pytest.raises(UserError, match="different periods"):
        traces.merged([1, 10], [1, 12])


def test_outage_time_counts_the_gaps_of_half_a_second_or_more():
    # Gaps: 100 (from 0), 800, 100, 600 ms.
    assert traces.outage_s([100, 900, 1000, 1600]) == pytest.approx(1.4)
    assert traces.outage_s([100, 900, 1000, 1600], gap_ms=700) == pytest.approx(0.8)


@pytest.mark.parametrize("shape", sorted(traces.WIFI_SHAPES))
def test_a_wifi_shape_is_one_trace_a_seed_and_both_directions_share_its_timing(shape):
    down = traces.wifi_like(shape, 10e6, 60, seed=3)
    assert down == traces.wifi_like(shape, 10e6, 60, seed=3)
    assert down != traces.wifi_like(shape, 10e6, 60, seed=4)
    assert down[-1] == 60_000
    up = traces.wifi_like(shape, 10e6, 60, seed=3, fading=1)
    assert up != down
    # One walk (or outage) both ways: the outage time is the shape's, give or take fading.
    assert traces.outage_s(up) == pytest.approx(traces.outage_s(down), abs=0.5)
    mean = traces.rate_statistics(down)["mean_bps"]
    assert mean <= 10.5e6
    if shape == "steady":
        assert mean == pytest.approx(10e6, rel=0.03)
        assert traces.outage_s(down) == 0
    if shape in ("walk", "outages"):
        assert traces.outage_s(down) >= 1.0


def test_an_unknown_shape_is_refused_naming_the_shapes():
    with pytest.raises(UserError, match="choose one of steady, fade, walk, outages"):
        traces.wifi_like("tunnel", 10e6, 60)


def test_the_shipped_set_holds_24_named_pairs_drawn_the_same_every_time():
    assert "mobile-24" in pair_set_names()
    pairs = load_pair_set("mobile-24").pairs
    names = [p.name for p in pairs]
    assert len(set(names)) == len(names) >= 24
    assert {p.cellular.trace for p in pairs} == {
        "Verizon-LTE-short", "TMobile-LTE-short", "ATT-LTE-driving-2016",
        "TMobile-UMTS-driving", "Verizon-EVDO-driving"}
    # Offsets within each trace's length; the four shapes six times each.
    assert all(p.cellular.offset_s < traces.PUBLISHED[p.cellular.trace].seconds for p in pairs)
    assert sorted(p.wifi.shape for p in pairs).count("walk") == 6
    assert all(3e6 <= p.wifi.rate_bps <= 15e6 for p in pairs)
    assert names[0].startswith("p01-") and f"-{pairs[0].cellular.offset_s}s" in names[0]


def test_a_set_is_drawn_from_its_seed():
    spec = PairSetSpec(seed=5, wifi_shapes=["walk", "fade"],
                       cellular=[{"trace": "Verizon-LTE-short", "offsets": 3}])
    assert draw("x", spec) == draw("x", spec)
    assert draw("x", spec) != draw("x", spec.model_copy(update={"seed": 6}))


@pytest.mark.parametrize(("text", "message"), [
    ('wifi_shapes = ["walk"]\n[[cellular]]\ntrace = "mine"\noffsets = 2',
     "cellular.0.trace: 'mine': a pair's cellular trace is a published trace"),
    ('wifi_shapes = ["tunnel"]\n[[cellular]]\ntrace = "Verizon-LTE-short"\noffsets = 2',
     "wifi_shapes: no WiFi shape tunnel"),
    ('wifi_shapes = ["walk"]\nwifi_rate_mbit = [9, 3]\n[[cellular]]\n'
     'trace = "Verizon-LTE-short"\noffsets = 2', r"wifi_rate_mbit: give \[low, high\]"),
])
def test_a_bad_set_is_refused_naming_the_field(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        load_pair_set(str(path))
    with pytest.raises(UserError, match="no pair set 'nope': not a file, and not one of: "
                                        "mobile-24"):
        load_pair_set("nope")


PHONE = {"mode": "mptcp", "paths": [
    {"name": "wifi", "rate": "12mbit", "delay_ms": 5.0, "downlink": {"rate": "9mbit"}},
    {"name": "cellular", "rate": "5mbit", "delay_ms": 20.0, "metered": True}]}


def _one_pair(tmp_path):
    spec = PairSetSpec(window_s=20, wifi_shapes=["outages"],
                       cellular=[{"trace": "TMobile-LTE-short", "offsets": 1}])
    return draw("t", spec).pairs[0]


def test_a_pair_writes_its_three_traces_and_its_figures_come_from_them(tmp_path, trace_store):
    pair = _one_pair(tmp_path)
    files = pair.write(tmp_path / "pair")
    for base in files:
        for direction in ("down", "up"):
            stamps = [int(x) for x in base.with_name(f"{base.name}.{direction}").read_text()
                      .split()]
            assert stamps[-1] == 20_000
    down = {what: [int(x) for x in (tmp_path / "pair" / f"{what}.down").read_text().split()]
            for what in ("wifi", "cellular", "sum")}
    assert len(down["sum"]) == len(down["wifi"]) + len(down["cellular"])
    figures = pair.statistics()
    assert figures["sum_mean_mbps"] == pytest.approx(
        figures["wifi_mean_mbps"] + figures["cellular_mean_mbps"])
    assert figures["wifi_outage_s"] == traces.outage_s(down["wifi"])


def test_a_pair_goes_on_the_free_and_the_metered_path_and_its_sum_where_asked(tmp_path,
                                                                             trace_store):
    files = _one_pair(tmp_path).write(tmp_path)
    profile = profile_from_dict(PHONE)
    played = with_pair(profile, files)
    for direction in ("uplink", "downlink"):
        suffix = "down" if direction == "downlink" else "up"
        # The path's own downlink rate gives way to the pair's trace, as its rate does.
        assert played.link(0, direction).trace == tmp_path / f"wifi.{suffix}"
        assert played.link(0, direction).rate_bps is None
        assert played.link(1, direction).trace == tmp_path / f"cellular.{suffix}"
    assert played.link(1, "downlink").delay_ms == 20.0 and played.paths[1].metered
    assert with_pair(profile, files, sum_on=0).link(0, "downlink").trace == tmp_path / "sum.down"
    with pytest.raises(UserError, match="one of them metered"):
        with_pair(profile_from_dict({"paths": [{"rate": "1mbit"}, {"rate": "1mbit"}]}), files)


def test_a_pair_whose_cellular_trace_is_not_here_says_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MPSTREAM_TRACES", str(tmp_path))
    with pytest.raises(UserError, match="mpstream traces fetch TMobile-LTE-short"):
        _one_pair(tmp_path).write(tmp_path)
