"""Naming a coupled CC in a profile: the kernel's name for it, the refusals (too many paths for
the coupling, objects not built) and the sampler reading it back from `ss`. Loading it into the
kernel, and the refusal before any topology, are tests/integration/test_coupled_cc.py."""

import pytest

from mpstream.errors import UserError
from mpstream.netem import coupled
from mpstream.netem.profile import profile_from_dict
from mpstream.netem.sockets import parse_ss


def paths(n):
    return [{"rate": "10mbit"} for _ in range(n)]


def test_coupled_ccs_have_prefixed_kernel_names_and_others_keep_theirs():
    assert [coupled.kernel_name(cc) for cc in ("lia", "olia", "balia", "cubic", "bbr")] == \
        ["mps_lia", "mps_olia", "mps_balia", "cubic", "bbr"]


@pytest.mark.parametrize("cc", coupled.COUPLED)
def test_a_coupled_cc_with_more_paths_than_it_couples_is_refused(cc):
    profile_from_dict({"cc": cc, "paths": paths(coupled.MAX_PATHS)})
    with pytest.raises(UserError) as refused:
        profile_from_dict({"cc": cc, "paths": paths(coupled.MAX_PATHS + 1)})
    assert f"couples at most {coupled.MAX_PATHS} subflows" in str(refused.value)
    assert "5 paths" in str(refused.value)
    profile_from_dict({"cc": "cubic", "paths": paths(coupled.MAX_PATHS + 1)})


def test_an_unbuilt_coupled_cc_is_named_with_the_build_command(tmp_path, monkeypatch):
    monkeypatch.setattr(coupled, "OBJECT_DIR", tmp_path)
    reason = coupled.machine_refusal("olia")
    assert reason is not None
    assert "'olia' is not built" in reason and "make coupled-cc" in reason
    (tmp_path / "olia.bpf.o").write_bytes(b"")
    assert coupled.machine_refusal("olia") is None or "bpftool" in coupled.machine_refusal("olia")


def test_the_sampler_reads_a_coupled_cc_from_ss():
    (sock,) = parse_ss("ESTAB 0 0 10.0.1.2:40082 10.9.0.1:8080\n"
                       "\t mps_lia wscale:7,7 rto:204 rtt:30.25/2 cwnd:17 bytes_acked:165\n")
    assert sock["cc"] == "mps_lia" and sock["cwnd"] == 17
