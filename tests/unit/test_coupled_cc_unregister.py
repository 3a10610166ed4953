"""A coupled CC whose unregistering fails keeps its `.loaded` record, so `mpstream clean` says
so and tries again, instead of leaving the CC registered with nothing of mpstream's pointing at
it (faked bpftool and /proc/sys; tests/integration/test_coupled_cc.py runs the real ones)."""

import subprocess

import pytest

from mpstream.netem import coupled


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """/proc/sys under tmp_path with mps_olia registered, a bpftool whose unregister does what
    `state["refuse"]` says, and olia's record of a use whose topology is gone."""
    ipv4 = tmp_path / "sys/net/ipv4"
    ipv4.mkdir(parents=True)
    available = ipv4 / "tcp_available_congestion_control"
    available.write_text("reno cubic mps_olia\n")
    state = {"refuse": True, "calls": 0}

    def sh(argv, check=True, **_):
        assert argv == ["bpftool", "struct_ops", "unregister", "name", "mps_olia"]
        state["calls"] += 1
        if state["refuse"]:
            return subprocess.CompletedProcess(argv, 255, "", "Error: can't unload mps_olia")
        available.write_text("reno cubic\n")
        return subprocess.CompletedProcess(argv, 0, "Unregistered mps_olia", "")

    records = tmp_path / "records"
    records.mkdir()
    (records / "olia.loaded").write_text("{}")
    (records / "olia.gone.use").write_text("gone")
    monkeypatch.setattr(coupled, "sh", sh)
    monkeypatch.setattr(coupled, "records_dir", lambda: records)
    monkeypatch.setattr(coupled, "_locked", lambda: _held(records))
    monkeypatch.setattr(coupled.teardown, "record_path", lambda topology: None)
    return state, records, tmp_path / "sys"


class _held:
    def __init__(self, folder):
        self.folder = folder

    def __enter__(self):
        return self.folder

    def __exit__(self, *exc):
        return False


def test_a_failed_unregister_keeps_the_record_and_clean_tries_again(kernel):
    state, records, proc_sys = kernel
    said = coupled.clean_stale(proc_sys)
    assert len(said) == 1 and said[0].startswith("could not unregister congestion control "
                                                 "mps_olia: Error: can't unload"), said
    assert (records / "olia.loaded").exists()  # still registered: still ours to take away
    state["refuse"] = False
    assert coupled.clean_stale(proc_sys) == [
        "unregistered congestion control mps_olia (no topology uses it)"]
    assert not (records / "olia.loaded").exists() and state["calls"] == 2
