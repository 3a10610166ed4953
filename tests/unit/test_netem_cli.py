"""The netem command line and prerequisites, without root or namespaces: presets listed, bad
profiles and missing kernel features reported as one sentence. (The integration tests run the
same checks against the real kernel and as a user without root.)"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpstream.errors import UserError
from mpstream.netem.check import CheckReport, Measurement
from mpstream.netem.system import require_cc, require_mptcp, require_scheduler

MPSTREAM = str(Path(sys.executable).parent / "mpstream")


def mpstream(*args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([MPSTREAM, *args], capture_output=True, text=True, timeout=60,
                          env=env)


def fake_proc(tmp_path, files):
    for key, value in files.items():
        path = tmp_path / key.replace(".", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return tmp_path


def test_list_shows_every_preset():
    result = mpstream("netem", "list")
    assert result.returncode == 0, result.stderr
    for preset in ("thesis-loss-unbalanced", "np03-2x10", "mpcc-2x100", "wifi-cellular"):
        assert preset in result.stdout


def test_a_bad_profile_is_one_sentence_naming_the_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[paths]]\nrate = "10mbit"\nloss = 2\n')
    result = mpstream("netem", "check", str(bad))
    assert result.returncode == 2
    assert "paths.0.loss" in result.stderr and "Traceback" not in result.stderr
    result = mpstream("netem", "up", "thesis-latency-single", "--set", "paths.0.rate=-1")
    assert result.returncode == 2 and "paths.0.rate" in result.stderr


def test_a_kernel_without_mptcp_is_named(tmp_path):
    with pytest.raises(UserError, match="no Multipath TCP support"):
        require_mptcp(tmp_path)
    require_mptcp(fake_proc(tmp_path, {"net.mptcp.enabled": "1"}))


def test_congestion_control_must_exist_and_is_then_allowed(tmp_path):
    proc = fake_proc(tmp_path, {"net.ipv4.tcp_available_congestion_control": "reno cubic",
                                "net.ipv4.tcp_allowed_congestion_control": "reno"})
    with pytest.raises(UserError, match="'vegas' is not available"):
        require_cc("vegas", proc)
    require_cc("cubic", proc)
    assert (proc / "net/ipv4/tcp_allowed_congestion_control").read_text().split() == \
        ["reno", "cubic"]


def test_scheduler_must_exist(tmp_path):
    proc = fake_proc(tmp_path, {"net.mptcp.available_schedulers": "default"})
    require_scheduler("default", proc)
    with pytest.raises(UserError, match=r"mptcp\.scheduler"):
        require_scheduler("redundant", proc)


def test_measurements_are_judged_against_their_interval():
    inside = Measurement("RTT median", "0", "ms", 10, 10.4, 9, 11)
    outside = Measurement("TCP rate", "0", "Mbit/s", 10, 7.9, 8.5, 9.8)
    missing = Measurement("TCP rate", "1", "Mbit/s", 10, None, 8.5, 9.8)
    shown = Measurement("TCP rate", "1", "Mbit/s", None, 3.0)
    report = CheckReport("p", "mptcp", [inside, outside, missing, shown])
    assert inside.ok and not outside.ok and not missing.ok and shown.ok and not shown.judged
    assert report.failures() == [outside, missing] and not report.ok
    assert report.as_dict()["measurements"][1]["ok"] is False
