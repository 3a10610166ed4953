"""Profiles: presets as the thesis and the reproductions describe them, validation messages that
name the field and the rule, overrides, and what the emulator is told."""

import textwrap

import pytest

from mpstream.errors import UserError
from mpstream.netem.profile import (
    load_profile,
    parse_override,
    parse_rate,
    parse_size,
    preset_names,
    profile_from_dict,
)

TWO_PATHS = {"paths": [{"rate": "10mbit", "delay_ms": 5}, {"rate": "5mbit", "delay_ms": 10}]}


def write(tmp_path, text, name="p.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(data):
    with pytest.raises(UserError) as info:
        profile_from_dict(data)
    return str(info.value)


def test_every_preset_named_by_the_issue_exists_and_loads(trace_store):
    expected = {f"thesis-{kind}-{shape}" for kind in ("latency", "loss", "bandwidth")
                for shape in ("balanced", "unbalanced", "single")}
    expected |= {"np03-2x10", "mpcc-2x100", "wifi-cellular"}
    assert expected <= set(preset_names())
    for name in preset_names():
        assert load_profile(name).paths


@pytest.mark.parametrize(("preset", "rtts"), [
    ("thesis-latency-balanced", [10, 10]),
    ("thesis-latency-unbalanced", [15, 5]),
    ("thesis-latency-single", [10]),
])
def test_thesis_latency_presets_are_round_trip_times(preset, rtts):
    profile = load_profile(preset)
    assert [profile.rtt_ms(i) for i in range(len(profile.paths))] == rtts


@pytest.mark.parametrize(("preset", "losses"), [
    ("thesis-loss-balanced", [0.10, 0.10]),
    ("thesis-loss-unbalanced", [0.15, 0.05]),
    ("thesis-loss-single", [0.20]),
])
def test_thesis_loss_presets(preset, losses):
    profile = load_profile(preset)
    assert [profile.link(i, "downlink").loss for i in range(len(profile.paths))] == losses


@pytest.mark.parametrize(("preset", "rates"), [
    ("thesis-bandwidth-balanced", [15e6, 15e6]),
    ("thesis-bandwidth-unbalanced", [25e6, 5e6]),
    ("thesis-bandwidth-single", [30e6]),
    ("np03-2x10", [10e6, 10e6]),
    ("mpcc-2x100", [100e6, 100e6]),
])
def test_rate_presets(preset, rates):
    profile = load_profile(preset)
    assert [profile.link(i, "downlink").rate_bps for i in range(len(profile.paths))] == rates


def test_np03_has_a_100_mbit_server_link_and_mpcc_a_30_ms_base_rtt():
    assert load_profile("np03-2x10").server_link_model("downlink").rate_bps == 100e6
    mpcc = load_profile("mpcc-2x100")
    assert mpcc.rtt_ms(0) == mpcc.rtt_ms(1) == 30
    assert mpcc.link(0, "downlink").queue_bytes == 375_000


def test_mpcc_buffer_is_set_from_the_command_line_over_the_range():
    for value, size in (("375KB", 375_000), ("1MB", 1_000_000)):
        profile = load_profile("mpcc-2x100", dict([parse_override(f"paths.*.queue_bytes={value}")]))
        assert {profile.link(i, "downlink").queue_bytes for i in (0, 1)} == {size}
    assert load_profile("mpcc-2x100-buf1m").link(1, "downlink").queue_bytes == 1_000_000


def test_wifi_cellular_takes_the_up_and_down_traces_of_the_trace_store(trace_store):
    profile = load_profile("wifi-cellular")
    assert profile.link(1, "downlink").trace == (trace_store / "TMobile-LTE-short.down").resolve()
    assert profile.link(1, "uplink").trace == (trace_store / "TMobile-LTE-short.up").resolve()
    config = profile.link(1, "downlink").emulator_config()
    assert config["rate_bps"] is None and config["trace"].endswith("TMobile-LTE-short.down")
    other = load_profile("wifi-cellular", {"paths.1.trace": "Verizon-LTE-short"})
    assert other.link(1, "downlink").trace.name == "Verizon-LTE-short.down"


@pytest.mark.parametrize(("text", "bits"), [
    (25_000_000, 25_000_000), ("25mbit", 25_000_000), ("25 Mbit/s", 25_000_000),
    ("1.5M", 1_500_000), ("500kbit", 500_000), ("unlimited", None), (2.5e6, 2_500_000),
])
def test_rates_with_units(text, bits):
    assert parse_rate(text) == bits


def test_sizes_with_units():
    assert parse_size("375KB", "q") == 375_000
    assert parse_size("64KiB", "q") == 65_536
    assert parse_size(1500, "q") == 1500


def test_negative_rate_is_named():
    message = error_of({"paths": [{"rate": "-5mbit"}]})
    assert "paths.0.rate" in message and "negative" in message


def test_loss_above_one_is_named():
    message = error_of({"paths": [{"rate": "1mbit"}, {"rate": "1mbit", "loss": 10}]})
    assert "paths.1.loss" in message and "0 to 1" in message


def test_loss_in_a_direction_is_named():
    message = error_of({"paths": [{"downlink": {"loss": 1.5}}]})
    assert "paths.0.downlink.loss" in message


def test_unknown_key_is_named():
    message = error_of({"paths": [{"rate": "1mbit", "dealy_ms": 5}]})
    assert "paths.0.dealy_ms" in message and "unknown key" in message
    assert "unknown key" in error_of({**TWO_PATHS, "mtpcp": {}})


def test_missing_trace_file_is_named():
    message = error_of({"paths": [{"trace": "no-such-trace"}]})
    assert "paths.0.trace" in message and "not found" in message and "no-such-trace" in message


def test_event_for_a_path_that_does_not_exist():
    message = error_of({**TWO_PATHS, "events": [{"at_s": 5, "path": 2, "action": "down"}]})
    assert "events.0.path" in message and "no path 2" in message
    message = error_of({**TWO_PATHS, "events": [{"at_s": 5, "path": "lte", "action": "down"}]})
    assert "events.0.path" in message and "lte" in message


def test_other_rules():
    assert "tcp_path" in error_of({**TWO_PATHS, "mode": "tcp", "tcp_path": 3})
    assert "not both" in error_of({"paths": [{"queue_bytes": 1000, "queue_packets": 10}]})
    assert "rate or trace" in error_of({"paths": [{"rate": "1mbit",
                                                    "trace": "Verizon-LTE-short"}]})
    assert "negative" in error_of({"paths": [{"delay_ms": -1}]})
    assert "set" in error_of({**TWO_PATHS, "events": [{"at_s": 1, "path": 0,
                                                        "action": "change"}]})
    assert "paths" in error_of({"paths": []})
    assert "mode" in error_of({**TWO_PATHS, "mode": "quic"})


def test_a_file_profile_with_a_relative_trace_and_events(tmp_path):
    (tmp_path / "mine.down").write_text("1\n2\n3\n")
    path = write(tmp_path, """
        mode = "mptcp"
        [[paths]]
        name = "wifi"
        rate = "20mbit"
        delay_ms = 4
        [[paths]]
        name = "lte"
        trace = "mine.down"
        delay_ms = 20
        uplink = { rate = "2mbit", delay_ms = 25 }
        [[events]]
        at_s = 20
        path = "wifi"
        action = "down"
        [[events]]
        at_s = 10
        path = "wifi"
        action = "change"
        dir = "downlink"
        set = { rate = "5mbit", delay_ms = 8 }
        [[events]]
        at_s = 30
        path = 0
        action = "up"
    """)
    profile = load_profile(path)
    assert profile.name == "p"
    assert profile.link(1, "downlink").trace == (tmp_path / "mine.down").resolve()
    uplink = profile.link(1, "uplink")
    assert uplink.trace is None and uplink.rate_bps == 2_000_000 and uplink.delay_ms == 25
    assert profile.rtt_ms(1) == 45
    assert profile.emulator_events(0) == [
        {"at_s": 10, "dir": "b_to_a", "set": {"rate_bps": 5_000_000, "trace": None,
                                              "delay_ms": 8}},
        {"at_s": 20, "dir": "both", "set": {"down": True}},
        {"at_s": 30, "dir": "both", "set": {"down": False}},
    ]
    assert profile.emulator_events(1) == []


def test_invalid_toml_and_unknown_profile(tmp_path):
    with pytest.raises(UserError, match="not valid TOML"):
        load_profile(write(tmp_path, "paths = [", "bad.toml"))
    with pytest.raises(UserError, match="neither a preset nor a file"):
        load_profile("no-such-preset")


def test_overrides_reach_every_path_or_one():
    profile = load_profile("thesis-bandwidth-balanced", {"paths.1.loss": 0.05, "mode": "tcp",
                                                         "tcp_path": 1})
    assert profile.mode == "tcp" and profile.primary_path == 1
    assert profile.link(1, "downlink").loss == 0.05 and profile.link(0, "downlink").loss == 0
    with pytest.raises(UserError, match="no list item"):
        load_profile("thesis-bandwidth-balanced", {"paths.5.loss": 0.1})
    assert parse_override("paths.*.queue_bytes=1MB") == ("paths.*.queue_bytes", "1MB")
    assert parse_override("paths.0.loss=0.1") == ("paths.0.loss", 0.1)
    with pytest.raises(UserError, match="KEY=VALUE"):
        parse_override("loss")


def test_backup_paths_and_primary():
    profile = profile_from_dict({"paths": [{"backup": True}, {}]})
    assert profile.primary_path == 1
    assert "backup" in error_of({"paths": [{"backup": True}]})


def test_a_profile_survives_the_state_file_round_trip(trace_store):
    """`netem up` records the profile as JSON; `Topology.attach` reads it back."""
    from mpstream.netem.profile import Profile

    for name in preset_names():
        profile = load_profile(name, {"events": [{"at_s": 3, "path": 0, "action": "change",
                                                  "set": {"delay_ms": 9}}]})
        again = Profile.model_validate(profile.model_dump(mode="json", exclude_unset=True))
        for i in range(len(profile.paths)):
            for direction in ("uplink", "downlink"):
                assert again.link(i, direction) == profile.link(i, direction), (name, i)
            assert again.emulator_events(i) == profile.emulator_events(i)


def test_codel_per_direction_reaches_the_emulator():
    profile = profile_from_dict({"paths": [
        {"rate": "25mbit"},
        {"rate": "5mbit", "downlink": {"aqm": "codel", "codel_target_ms": 10}},
    ]})
    down = profile.link(1, "downlink").emulator_config()
    assert (down["aqm"], down["codel_target_ms"]) == ("codel", 10)
    assert "codel_interval_ms" not in down  # not set: the emulator's default runs
    assert profile.link(1, "uplink").emulator_config()["aqm"] == "none"
    assert profile.link(0, "downlink").emulator_config()["aqm"] == "none"
    assert "CoDel 10/100 ms" in profile.link(1, "downlink").describe()
    everywhere = load_profile("thesis-bandwidth-unbalanced", {"paths.*.aqm": "codel"})
    assert all(everywhere.link(i, d).aqm == "codel" for i in (0, 1) for d in ("uplink", "downlink"))


@pytest.mark.parametrize("aqm", ["none", "codel", "pie"])
def test_each_queue_discipline_reaches_the_emulator(aqm):
    profile = profile_from_dict({"paths": [{"rate": "10mbit", "uplink": {"aqm": aqm}}]})
    assert profile.link(0, "uplink").emulator_config()["aqm"] == aqm
    assert profile.link(0, "downlink").emulator_config()["aqm"] == "none"
    assert ("PIE" in profile.link(0, "uplink").describe()) == (aqm == "pie")


def test_an_unknown_queue_discipline_is_refused_naming_the_known_ones():
    message = error_of({"paths": [{"rate": "1mbit", "aqm": "red"}]})
    assert "paths.0.aqm" in message and "'red'" in message
    assert "'none', 'codel', 'pie'" in message, message


def test_bad_codel_settings_are_named():
    message = error_of({"paths": [{"rate": "1mbit", "downlink": {"codel_interval_ms": 0}}]})
    assert "paths.0.downlink.codel_interval_ms" in message and "above 0" in message
    message = error_of({"paths": [{"rate": "1mbit", "codel_target_ms": "fast"}]})
    assert "paths.0.codel_target_ms: must be a number" in message, message


def test_pie_parameters_reach_the_emulator_where_set():
    profile = profile_from_dict({
        "paths": [{"rate": "10mbit", "aqm": "pie", "pie_target_ms": 5,
                   "downlink": {"pie_tupdate_ms": 30}}],
        "events": [{"at_s": 2, "path": 0, "action": "change", "set": {"pie_target_ms": 20}}],
    })
    up, down = (profile.link(0, d).emulator_config() for d in ("uplink", "downlink"))
    assert (up["aqm"], up["pie_target_ms"]) == ("pie", 5.0) and "pie_tupdate_ms" not in up
    assert (down["pie_target_ms"], down["pie_tupdate_ms"]) == (5.0, 30.0)
    assert profile.emulator_events(0)[0]["set"] == {"pie_target_ms": 20}
    assert profile.link(0, "uplink").describe().endswith("PIE 5/15 ms")
    assert profile.link(0, "downlink").describe().endswith("PIE 5/30 ms")
    # A profile that sets none passes none: the emulator's defaults (RFC 8033's) run.
    plain = profile_from_dict({"paths": [{"rate": "10mbit", "aqm": "pie"}]})
    config = plain.link(0, "uplink").emulator_config()
    assert not {"pie_target_ms", "pie_tupdate_ms"} & config.keys()


@pytest.mark.parametrize(("link", "field", "rule"), [
    ({"aqm": "pie", "pie_alpha": 0.1}, "paths.0.pie_alpha",
     "not a parameter of pie (its parameters: pie_target_ms, pie_tupdate_ms)"),
    ({"downlink": {"codel_target": 10}}, "paths.0.downlink.codel_target",
     "not a parameter of codel (its parameters: codel_target_ms, codel_interval_ms)"),
    ({"none_limit_ms": 3}, "paths.0.none_limit_ms", "not a parameter: none takes none"),
    ({"pie_target_ms": 0}, "paths.0.pie_target_ms", "must be above 0 and at most 60000 ms"),
])
def test_an_unknown_or_bad_aqm_parameter_is_refused_naming_the_valid_ones(link, field, rule):
    message = error_of({"paths": [{"rate": "1mbit", **link}]})
    assert f"{field}: {rule}" in message, message
    # The same in an event's change.
    message = error_of({"paths": [{"rate": "1mbit"}], "events": [
        {"at_s": 1, "path": 0, "action": "change", "set": link.get("downlink", link)}]})
    assert rule in message and "events.0.set." in message, message


def test_a_profiles_sysctls_go_to_both_ends_of_its_deployment_and_bad_names_are_refused():
    profile = load_profile("thesis-bandwidth-single",
                           {"sysctls": {"net.ipv4.tcp_slow_start_after_idle": 0}})
    assert profile.deployment.server.sysctls == {"net.ipv4.tcp_slow_start_after_idle": 0}
    assert profile.deployment.client.sysctls == {"net.ipv4.tcp_slow_start_after_idle": 0}
    assert load_profile("thesis-bandwidth-single").deployment.server.sysctls == {}
    for bad in ("kernel.panic", "net.core.rmem_max", "net.ipv4.ip_forward"):
        message = error_of({**TWO_PATHS, "sysctls": {bad: 1}})
        assert "sysctls" in message and bad in message and "net.ipv4.tcp_" in message
