"""Every preset, built for real and measured with `netem check`'s code against its tolerances
(RTT and loss per path by ping, throughput per path by iperf3 pinned to the path, MPTCP
aggregate and the share of each path), by `make test-presets`; the check's own logic (a path
pinned, a shared server link, a profile that lies, a failed iperf3) in `make test`."""

import os

import pytest

from mpstream.netem.check import run_check
from mpstream.netem.profile import load_profile, preset_names
from mpstream.netem.teardown import leftovers

DURATION_S = 2.0


def _check(profile, name):
    report = run_check(profile, name=name, duration_s=DURATION_S)
    assert not leftovers(name)
    return report


def _describe(report):
    return "; ".join(f"{m.check} {m.path}: {m.measured} {m.unit} not in {m.low}..{m.high}"
                     + (f" ({m.note})" if m.note else "") for m in report.failures())


# Every preset measured: minutes, `make test-presets`.
@pytest.mark.long
@pytest.mark.parametrize("preset", preset_names())
def test_preset_measures_as_configured(preset, trace_store):
    report = _check(load_profile(preset), f"pr{os.getpid()}")
    assert report.ok, _describe(report)
    judged = {m.check for m in report.measurements if m.judged}
    assert {"RTT median", "loss", "byte share"} <= judged


def test_tcp_mode_uses_only_its_path():
    profile = load_profile("thesis-bandwidth-unbalanced", {"mode": "tcp", "tcp_path": 1})
    report = _check(profile, f"tc{os.getpid()}")
    assert report.ok, _describe(report)
    aggregate = next(m for m in report.measurements if m.check == "aggregate")
    assert aggregate.configured == 5  # path 1 only, not 25 + 5
    share = {m.path: m.measured for m in report.measurements if m.check == "byte share"}
    assert share["0 path0"] < 2 and share["1 path1"] > 98


def test_the_shared_server_link_is_a_bottleneck_of_all_paths():
    """NP03's server link, narrowed below the client links: every path and the MPTCP
    aggregate reach only the server link's rate."""
    profile = load_profile("np03-2x10", {"paths.*.rate": "50mbit", "server_link.rate": "20mbit"})
    report = _check(profile, f"sl{os.getpid()}")
    assert report.ok, _describe(report)
    rates = [m.configured for m in report.measurements if m.check in ("TCP rate", "aggregate")]
    assert rates == [20, 20, 20]


def test_a_check_fails_when_the_profile_claims_what_the_link_does_not_do(tmp_path):
    """The check is not a rubber stamp: measuring a 10 Mbit/s, 10 ms path against a profile
    that says 20 Mbit/s and 30 ms must fail both figures."""
    from mpstream.netem.check import CheckReport, _ping_measurements, _throughput_measurements
    from mpstream.netem.topology import Topology

    built = load_profile("thesis-latency-single")
    claimed = load_profile("thesis-latency-single", {"paths.0.rate": "20mbit",
                                                     "paths.0.delay_ms": 15})
    name = f"lie{os.getpid()}"
    with Topology.up(built, name) as topo:
        report = CheckReport(claimed.name, claimed.mode,
                             _ping_measurements(topo, claimed)
                             + _throughput_measurements(topo, claimed, 1.0))
    failed = {m.check for m in report.failures()}
    assert {"RTT median", "TCP rate"} <= failed
    rate = next(m for m in report.measurements if m.check == "TCP rate")
    assert rate.measured is not None and rate.measured < rate.low, rate  # measured, too slow


def test_a_failed_iperf3_run_says_what_iperf3_said():
    from mpstream.netem.check import IPERF_PORT, _iperf
    from mpstream.netem.topology import Topology

    with Topology.up("thesis-latency-single", f"ie{os.getpid()}") as topo:
        # An address no interface has: iperf3's client cannot bind to it.
        run = _iperf(topo, IPERF_PORT, ["-B", "10.1.9.2"], mptcp=False, duration_s=1.0)
    assert run.bps is None
    assert run.error == "unable to connect to server: Cannot assign requested address"
    assert run.note() == f"iperf3 failed: {run.error}"
