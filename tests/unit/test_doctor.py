"""`mpstream doctor`: each check against a made-up machine (a fake /proc/sys, a snap wrapper,
Ubuntu's os-release), and the command's exit status on this one with programs hidden."""

import os
import subprocess
import sys
from pathlib import Path

from mpstream import doctor
from tests.unit.test_netem_cli import MPSTREAM, fake_proc


def by_name(findings):
    return {f.name: f for f in findings}


def test_kernel_without_mptcp_is_a_required_miss_with_its_fix(tmp_path):
    proc = fake_proc(tmp_path, {"net.ipv4.tcp_available_congestion_control": "reno cubic"})
    found = by_name(doctor.check_kernel(proc, release="6.1.0-18-amd64"))
    assert found["version"].ok
    assert not found["MPTCP"].ok and found["MPTCP"].required
    assert "CONFIG_MPTCP" in found["MPTCP"].fix


def test_kernel_with_mptcp_off_old_and_userspace_pm(tmp_path):
    proc = fake_proc(tmp_path, {
        "net.mptcp.enabled": "0", "net.mptcp.pm_type": "1",
        "net.ipv4.tcp_available_congestion_control": "reno cubic",
    })
    found = by_name(doctor.check_kernel(proc, release="5.4.0"))
    assert not found["version"].ok
    assert not found["MPTCP enabled"].ok and found["MPTCP enabled"].fix == \
        "sysctl -w net.mptcp.enabled=1"
    assert not found["MPTCP path manager"].ok and found["MPTCP path manager"].detail == \
        "userspace"


def test_kernel_as_here(tmp_path):
    proc = fake_proc(tmp_path, {
        "net.mptcp.enabled": "1", "net.mptcp.path_manager": "kernel",
        "net.mptcp.available_path_managers": "kernel userspace",
        "net.mptcp.available_schedulers": "default",
        "net.ipv4.tcp_available_congestion_control": "reno cubic bbr",
    })
    findings = doctor.check_kernel(proc, release="6.18.4")
    assert all(f.ok for f in findings)
    assert by_name(findings)["MPTCP schedulers"].detail == "default"


def test_ubuntu_snap_chromium_is_explained(tmp_path, monkeypatch):
    wrapper = tmp_path / "chromium"
    wrapper.write_text("#!/bin/sh\nexec /snap/bin/chromium \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("MPSTREAM_CHROMIUM", str(wrapper))
    found = by_name(doctor.check_browsers({"ID": "ubuntu", "VERSION_ID": "24.04"}))
    assert not found["Chromium"].ok and "snap" in found["Chromium"].detail
    assert "--browser firefox" in found["Chromium"].fix
    dist = doctor.check_distribution({"ID": "ubuntu", "PRETTY_NAME": "Ubuntu 24.04 LTS"})
    assert "snap" in dist[0].detail and "docs/distributions.md" in dist[0].detail


def test_debian_12_and_13_are_the_tested_distributions():
    for version in ("12", "13"):
        (f,) = doctor.check_distribution({"ID": "debian", "VERSION_ID": version,
                                          "PRETTY_NAME": "Debian"})
        assert f.detail.endswith(": tested")
    (f,) = doctor.check_distribution({"ID": "fedora", "PRETTY_NAME": "Fedora 41"})
    assert "not tested" in f.detail


def test_missing_build_is_named_with_make_setup(tmp_path):
    found = by_name(doctor.check_build(tmp_path / "build", tmp_path))
    assert not found["link emulator"].ok and found["link emulator"].fix == "make setup"
    assert not found["player page"].ok
    hop = found["QUIC hop (transports quic, mpquic)"]
    assert not hop.ok and not hop.required and "make quic" in hop.fix


def test_doctor_exits_1_and_names_the_fix_when_programs_are_missing():
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    done = subprocess.run([MPSTREAM, "doctor"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 1, done.stdout
    assert "MISSING  encoder  ffmpeg: not found" in done.stdout
    assert "fix: apt-get install ffmpeg" in done.stdout
    assert "required thing(s) missing" in done.stdout
