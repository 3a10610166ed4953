"""The Debian packages by the make target that needs them (scripts/system-packages.txt): the
demo's are a subset of the tests', hold every program the demo runs, and nothing the demo does
not run (no Rust or BPF build, no Firefox, no containers)."""

from __future__ import annotations

import re
import subprocess

import pytest

from mpstream.paths import REPO_ROOT

pytestmark = pytest.mark.unit

LIST = REPO_ROOT / "scripts" / "system-packages.txt"
INSTALLER = REPO_ROOT / "scripts" / "install-system.sh"

# What `make demo` runs (setup, doctor, encode, the emulated paths, nginx under mptcpize, the
# collector, Chromium), by the package that brings it.
DEMO_RUNS = {
    "python3 -m venv": "python3-venv",
    "gcc (the link emulator)": "gcc",
    "libc headers": "libc6-dev",
    "jansson (the link emulator reads its config with it)": "libjansson-dev",
    "make": "make",
    "ffmpeg": "ffmpeg",
    "nginx": "nginx-light",
    "mptcpize (mptcpd only recommends it)": "mptcpize",
    "curl (nginx's readiness in a namespace)": "curl",
    "ip": "iproute2",
    "ping": "iputils-ping",
    "iperf3 (netem check)": "iperf3",
    "ps, sysctl": "procps",
    "chromium": "chromium",
    "fonts": "fonts-dejavu-core",
}
NOT_FOR_THE_DEMO = ("firefox-esr", "podman", "runc", "debootstrap", "clang", "libbpf-dev",
                    "bpftool", "patch", "postgresql")
# Node.js and npm come from PyPI where the system has none (scripts/install-node.sh), for every
# target: Debian's npm would be most of the demo's packages.
NOT_FROM_DEBIAN = ("nodejs", "npm")


def packages_by_target() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in LIST.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        package, *targets = line.split()
        assert targets, f"{LIST}: {package} names no make target that needs it"
        for target in targets:
            out.setdefault(target, set()).add(package)
    return out


def test_the_demos_packages_are_a_subset_of_the_tests():
    by_target = packages_by_target()
    assert by_target["demo"] <= by_target["test"], by_target["demo"] - by_target["test"]
    assert by_target["test"] - by_target["demo"], "the tests need more than the demo"


def test_the_demos_packages_hold_what_the_demo_runs_and_nothing_more():
    demo = packages_by_target()["demo"]
    missing = {what: pkg for what, pkg in DEMO_RUNS.items() if pkg not in demo}
    assert not missing, f"the demo runs these, whose packages its list lacks: {missing}"
    assert not demo & set(NOT_FOR_THE_DEMO), demo & set(NOT_FOR_THE_DEMO)


def test_node_and_npm_come_from_pypi_not_debian():
    listed = set().union(*packages_by_target().values())
    assert not listed & set(NOT_FROM_DEBIAN), listed & set(NOT_FROM_DEBIAN)
    done = subprocess.run(["make", "-n", "-B", "setup-demo"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True)
    assert "scripts/install-node.sh" in done.stdout, done.stdout


def test_the_installer_knows_every_target_of_the_list():
    known = set(re.findall(r"^\s+\[([\w-]+)\]=", INSTALLER.read_text(), re.M))
    assert set(packages_by_target()) <= known, set(packages_by_target()) - known
    done = subprocess.run(["bash", str(INSTALLER), "no-such-target"], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "no make target 'no-such-target'" in done.stderr


@pytest.mark.parametrize("targets", [["demo"], ["test"], ["quic", "compose"]])
def test_the_installer_installs_exactly_the_packages_of_its_targets(targets):
    by_target = packages_by_target()
    done = subprocess.run(["bash", str(INSTALLER), "--print", *targets], capture_output=True,
                          text=True, check=True)
    assert set(done.stdout.split()) == set().union(*(by_target[t] for t in targets))


def test_make_demo_builds_neither_the_hop_nor_bpf_nor_the_tests_extras():
    done = subprocess.run(["make", "-n", "-B", "demo"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True)
    for word in ("cargo", "build-quic", "build-coupled-cc", "install-system.sh test",
                 "player/driver", "[dev"):
        assert word not in done.stdout, f"make demo runs {word!r}:\n{done.stdout}"
    assert "scripts/install-system.sh demo" in done.stdout
