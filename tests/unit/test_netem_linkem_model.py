"""The link emulator's model and config, without root: the C model under a fake clock
(build/linkem-test) and mpstream-linkem's config validation (--check). The real data path is
exercised in tests/integration/test_netem_linkem_path.py."""

import json
import subprocess

import pytest

from mpstream.netem import traces
from mpstream.netem.disciplines import AQMS, MAX_MS
from mpstream.netem.profile import profile_from_dict
from mpstream.paths import BUILD_DIR, REPO_ROOT

MODEL_TESTS = [
    "fixed_rate_serialization",
    "fixed_rate_exact_over_busy_period",
    "delay",
    "zero_delay_unlimited_is_immediate",
    "queue_packet_limit",
    "queue_byte_limit",
    "loss_fraction_seeded",
    "trace_opportunities_and_wrap",
    "trace_byte_accounting",
    "trace_wasted_when_idle",
    "trace_capacity_real_file",
    "jitter_never_reorders",
    "down_drops_queue_keeps_flight",
    "rate_change_event",
    "mode_switches",
    "default_queue",
    "config_events",
    "aqm_params_registry",
    "config_aqm_params",
    "wakeups_only_for_deliveries",
    "codel_drop_schedule",
    "codel_good_queue_no_drops",
    "codel_leaves_and_resumes",
    "pie_drops_a_standing_queue",
    "pie_lets_short_bursts_through",
    "pie_parameters_apply",
    "queue_delay_known_burst",
    "queue_delay_idle_packet_and_trace_capacity",
    "queue_delay_buckets",
]

EMULATOR = BUILD_DIR / "mpstream-linkem"
MODEL_TEST_BIN = BUILD_DIR / "linkem-test"


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "emulator"], cwd=REPO_ROOT, check=True, timeout=300)


def test_every_model_test_is_run_here():
    listed = subprocess.run(
        [MODEL_TEST_BIN, "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert listed == MODEL_TESTS


@pytest.mark.parametrize("name", MODEL_TESTS)
def test_link_model(name, tmp_path):
    # The model's trace test reads a file of known mean capacity (5.0 Mbit/s over 12 s).
    traces.write(tmp_path / "varying-5mbit.down", traces.synthetic(5e6, 12, seed=7))
    r = subprocess.run(
        [MODEL_TEST_BIN, name],
        capture_output=True,
        text=True,
        timeout=60,
        env={"LINKEM_TRACES_DIR": str(tmp_path)},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == f"ok {name}"
    assert "skipped" not in r.stdout


def check(tmp_path, config, raw: str | None = None):
    path = tmp_path / "linkem.json"
    path.write_text(raw if raw is not None else json.dumps(config))
    return subprocess.run(
        [EMULATOR, "--config", path, "--check"], capture_output=True, text=True, timeout=30
    )


BASE = {"tun_a": "ta", "tun_b": "tb"}


def test_check_fills_in_default_queue(tmp_path):
    r = check(
        tmp_path,
        BASE
        | {
            "a_to_b": {"rate_bps": 100_000_000, "delay_ms": 20},
            "b_to_a": {"rate_bps": 10_000_000, "delay_ms": 20, "queue_packets": 50},
        },
    )
    assert r.returncode == 0, r.stderr
    resolved = json.loads(r.stdout)
    # one BDP of the 40 ms round trip at 100 Mbit/s
    assert resolved["a_to_b"]["queue_bytes"] == 500_000
    assert resolved["b_to_a"]["queue_bytes"] == -1
    assert resolved["b_to_a"]["queue_packets"] == 50


def test_check_reports_codel_settings(tmp_path):
    r = check(tmp_path, BASE | {"b_to_a": {"rate_bps": 5_000_000, "aqm": "codel",
                                           "codel_target_ms": 10, "codel_interval_ms": 200}})
    assert r.returncode == 0, r.stderr
    resolved = json.loads(r.stdout)
    assert resolved["b_to_a"]["aqm"] == "codel"
    assert (resolved["b_to_a"]["codel_target_ms"], resolved["b_to_a"]["codel_interval_ms"]) \
        == (10, 200)
    assert resolved["a_to_b"]["aqm"] == "none"  # off unless asked for, per direction


@pytest.mark.parametrize("aqm", sorted(AQMS.names()))
def test_the_emulator_knows_each_discipline_a_profile_may_name(tmp_path, aqm):
    r = check(tmp_path, BASE | {"a_to_b": {"rate_bps": 5_000_000, "aqm": aqm}})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["a_to_b"]["aqm"] == aqm


def test_the_profiles_disciplines_are_the_emulators():
    # Each discipline's parameters and defaults are the emulator's (its C file); the profile's
    # table repeats them to validate and describe a link, and must say what the emulator does.
    listed = json.loads(subprocess.run([EMULATOR, "--list-aqms"], capture_output=True,
                                       text=True, check=True, timeout=30).stdout)
    assert {name: {key: spec["default"] for key, spec in params.items()}
            for name, params in listed.items()} \
        == {aqm.name: dict(aqm.params) for aqm in AQMS.values()}
    for params in listed.values():
        for spec in params.values():
            assert 0 < spec["min"] <= 0.001 and spec["max"] == MAX_MS


def test_a_profiles_pie_settings_reach_the_emulator_parsed(tmp_path):
    profile = profile_from_dict({"paths": [{"rate": "10mbit", "aqm": "pie", "pie_target_ms": 5,
                                            "downlink": {"pie_tupdate_ms": 30}}]})
    r = check(tmp_path, BASE | {"a_to_b": profile.link(0, "uplink").emulator_config(),
                                "b_to_a": profile.link(0, "downlink").emulator_config()})
    assert r.returncode == 0, r.stderr
    resolved = json.loads(r.stdout)
    assert (resolved["a_to_b"]["aqm"], resolved["a_to_b"]["pie_target_ms"],
            resolved["a_to_b"]["pie_tupdate_ms"]) == ("pie", 5, 15)  # RFC 8033's default
    assert (resolved["b_to_a"]["pie_target_ms"], resolved["b_to_a"]["pie_tupdate_ms"]) == (5, 30)
    assert (resolved["b_to_a"]["codel_target_ms"], resolved["b_to_a"]["codel_interval_ms"]) \
        == (5, 100)  # RFC 8289's, though the profile's config names no CoDel setting


def test_check_reads_a_trace(tmp_path):
    trace = traces.write(tmp_path / "cell.down", traces.synthetic(16.7e6, 20, seed=2))
    r = check(tmp_path, BASE | {"b_to_a": {"trace": str(trace)}})
    assert r.returncode == 0, r.stderr
    mean = json.loads(r.stdout)["b_to_a"]["trace_mean_bps"]
    assert mean == pytest.approx(16.7e6, rel=0.002)


@pytest.mark.parametrize(
    ("config", "field", "rule"),
    [
        (BASE | {"a_to_b": {"loss": 1.5}}, "a_to_b.loss", "between 0 and 1"),
        (BASE | {"b_to_a": {"rate_bps": -5}}, "b_to_a.rate_bps", "between 1 and"),
        (BASE | {"a_to_b": {"rate_bps": 1.5e6 + 0.5}}, "a_to_b.rate_bps", "whole number"),
        (BASE | {"a_to_b": {"delay": 5}}, "a_to_b.delay", "unknown key"),
        (BASE | {"b_to_a": {"down": "yes"}}, "b_to_a.down", "true or false"),
        (BASE | {"a_to_b": {"trace": "/nonexistent/x.down"}}, "a_to_b.trace", "cannot read"),
        ({"tun_b": "tb"}, "tun_a", "required"),
        ({"tun_a": "same", "tun_b": "same"}, "tun_b", "differ"),
        (BASE | {"extra": 1}, "extra", "unknown key"),
        (BASE | {"events": [{"at_s": 1, "dir": "up", "set": {"down": True}}]},
         "events[0].dir", "must be"),
        (BASE | {"events": [{"at_s": -1, "set": {"down": True}}]}, "events[0].at_s", "between"),
        (BASE | {"events": [{"at_s": 1, "set": {"loss": 2}}]}, "events[0].set.loss", "between"),
        (BASE | {"events": [{"at_s": 1, "set": {}}]}, "events[0].set", "changes nothing"),
        (BASE | {"stats_path": 3}, "stats_path", "file path"),
        (BASE | {"a_to_b": {"aqm": "red"}}, "a_to_b.aqm", '"none", "codel", "pie"'),
        (BASE | {"b_to_a": {"codel_target_ms": 0}}, "b_to_a.codel_target_ms", "between"),
        (BASE | {"b_to_a": {"pie_target_ms": 0}}, "b_to_a.pie_target_ms", "between"),
        (BASE | {"a_to_b": {"pie_alpha": 0.1}}, "a_to_b.pie_alpha",
         "not a parameter of pie (its parameters: pie_target_ms, pie_tupdate_ms)"),
        (BASE | {"events": [{"at_s": 1, "set": {"codel_target": 9}}]}, "events[0].set.codel_target",
         "not a parameter of codel (its parameters: codel_target_ms, codel_interval_ms)"),
    ],
)
def test_bad_config_names_the_field(tmp_path, config, field, rule):
    r = check(tmp_path, config)
    assert r.returncode == 2
    assert f"{field}: " in r.stderr and rule in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1  # one line, no trace


def test_bad_trace_file_names_the_line(tmp_path):
    trace = tmp_path / "bad.down"
    trace.write_text("1\n5\n3\n")
    r = check(tmp_path, BASE | {"a_to_b": {"trace": str(trace)}})
    assert r.returncode == 2
    assert "a_to_b.trace" in r.stderr and "line 3" in r.stderr and "decrease" in r.stderr


def test_invalid_json_names_the_line(tmp_path):
    r = check(tmp_path, None, raw='{"tun_a": "ta",\n "tun_b": tb}')
    assert r.returncode == 2
    assert "line 2" in r.stderr


def test_missing_device_is_a_runtime_error(tmp_path):
    path = tmp_path / "linkem.json"
    path.write_text(json.dumps({"tun_a": "mps-nodev0", "tun_b": "mps-nodev1"}))
    r = subprocess.run([EMULATOR, "--config", path], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "tun_a" in r.stderr and "mps-nodev0" in r.stderr and "ip tuntap add" in r.stderr
