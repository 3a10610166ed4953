"""`mpstream clean` names the struct_ops maps of mpstream's CCs that are unregistered but still
held by sockets, from bpftool's listing (faked here; tests/integration/test_coupled_cc.py makes
one linger on this kernel)."""

import json
import subprocess

import pytest

from mpstream.netem import coupled


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A faked kernel: `listing` is what `bpftool -j struct_ops show` prints, `registered` the
    CCs in tcp_available_congestion_control."""
    state = {"listing": "[]", "registered": ["reno", "cubic"], "proc_sys": tmp_path}

    def sh(argv, check=True, **_):
        assert argv == ["bpftool", "-j", "struct_ops", "show"]
        return subprocess.CompletedProcess(argv, 0, state["listing"], "")

    monkeypatch.setattr(coupled, "sh", sh)
    monkeypatch.setattr(coupled.shutil, "which", lambda name: f"/usr/sbin/{name}")
    return state


def awaiting(kernel) -> list[str]:
    ipv4 = kernel["proc_sys"] / "net/ipv4"
    ipv4.mkdir(parents=True, exist_ok=True)
    (ipv4 / "tcp_available_congestion_control").write_text(" ".join(kernel["registered"]))
    return coupled.awaiting_kernel(kernel["proc_sys"])


def maps(*entries):
    return json.dumps([{"id": i, "name": n, "kernel_struct_ops": "tcp_congestion_ops"}
                       for i, n in entries])


def test_an_unregistered_map_of_ours_is_named_with_its_id(kernel):
    kernel["listing"] = maps((954, "mps_lia"))
    lines = awaiting(kernel)
    assert len(lines) == 1
    assert "mps_lia's struct_ops map (id 954) is unregistered" in lines[0]


def test_registered_maps_and_other_tools_maps_are_not_named(kernel):
    kernel["listing"] = maps((10, "mps_olia"), (11, "tcp_foo"), (12, "mps_unknown"))
    kernel["registered"] = ["reno", "cubic", "mps_olia"]
    assert awaiting(kernel) == []
    kernel["registered"] = ["reno", "cubic"]
    lines = awaiting(kernel)
    assert [line.split("'")[0] for line in lines] == ["left to the kernel: mps_olia"]


def test_no_bpftool_or_unreadable_output_names_nothing(kernel, monkeypatch):
    kernel["listing"] = "Error: can't get next struct_ops map"
    assert awaiting(kernel) == []
    kernel["listing"] = maps((954, "mps_lia"))
    monkeypatch.setattr(coupled.shutil, "which", lambda name: None)
    assert awaiting(kernel) == []
