"""The path scheduler as a transport's choice: what each transport lists, a name it lacks
refused with the names it has, the choice carried on a copy (the registered transport keeps its
default), and the kernel's scheduler set through the emulated profile."""

import json

import pytest

from mpstream.errors import UserError
from mpstream.netem.profile import load_profile
from mpstream.transports import direct
from mpstream.transports.base import get_transport
from mpstream.transports.hop import programs


@pytest.fixture
def kernel_lists(monkeypatch):
    def lists(names: str) -> None:
        monkeypatch.setattr(direct, "_proc_sys", lambda key: names
                            if key == "net/mptcp/available_schedulers" else "")
    return lists


def test_mptcp_lists_the_kernels_schedulers_default_first(kernel_lists):
    kernel_lists("redundant default")
    assert list(get_transport("mptcp").schedulers()) == ["default", "redundant"]
    kernel_lists("")  # a kernel that does not list them has its default
    assert list(get_transport("mptcp").schedulers()) == ["default"]


def test_a_scheduler_the_transport_lacks_is_refused_with_the_names_it_has(kernel_lists):
    kernel_lists("default")
    with pytest.raises(UserError, match=r"'minrtt': transport mptcp has default"):
        get_transport("mptcp").with_scheduler("minrtt")
    with pytest.raises(UserError, match="transport tcp has no path scheduler"):
        get_transport("tcp").with_scheduler("default")
    assert get_transport("tcp").with_scheduler(None).scheduler_name is None


def test_the_choice_is_a_copy_and_reaches_the_profile(kernel_lists):
    kernel_lists("default burst")
    chosen = get_transport("mptcp").with_scheduler("burst")
    assert chosen.scheduler_name == "burst"
    assert get_transport("mptcp").scheduler_name == "default"  # the registered one is untouched
    profile = load_profile("thesis-bandwidth-unbalanced")
    assert chosen.fit_profile(profile).deployment.server.mptcp.scheduler == "burst"
    assert profile.deployment.server.mptcp.scheduler == "default"
    assert get_transport("mptcp").fit_profile(profile) is profile


def test_mpquic_lists_what_the_hop_says(tmp_path):
    fake = tmp_path / "mpstream-quic"
    fake.write_text("#!/bin/sh\n[ \"$1\" = schedulers ] || exit 2\n"
                    "echo '{\"name\": \"lowest-id\", \"description\": \"first path\"}'\n"
                    "echo '{\"name\": \"minrtt\", \"description\": \"fastest path\"}'\n")
    fake.chmod(0o755)
    programs.quic_schedulers.cache_clear()
    try:
        found = programs.quic_schedulers(fake)
        assert found == {"lowest-id": "first path", "minrtt": "fastest path"}
        with pytest.raises(UserError, match="is not built"):
            programs.quic_schedulers(tmp_path / "absent")
    finally:
        programs.quic_schedulers.cache_clear()


def test_the_hops_redundant_bytes_are_each_paths_last_count(tmp_path):
    from mpstream.transports.hop.programs import HopOptions, QuicHop

    hop = QuicHop(network=None, upstream_port=80, options=HopOptions("mpquic"),  # type: ignore
                  workdir=tmp_path)
    assert hop.redundant_bytes() is None  # no statistics yet
    lines = [{"conn": 1, "path": 0, "sent_bytes": 10, "rtt_ms": 5},  # lowest-id: no counter
             {"conn": 1, "path": 0, "redundant_bytes": 100, "rtt_ms": 5},
             {"conn": 1, "path": 0, "redundant_bytes": 300, "rtt_ms": 5},
             {"conn": 1, "path": 1, "redundant_bytes": 50, "rtt_ms": 9}]
    hop.gateway_stats.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert hop.redundant_bytes() == 350
    hop.gateway_stats.write_text(json.dumps(lines[0]) + "\n")
    assert hop.redundant_bytes() is None


def test_redundant_bytes_are_a_share_of_the_media_bytes(tmp_path):
    from mpstream.runner.metrics.common import redundancy_metrics
    from tests.records import trial_data

    events = [{"seq": i, "t_ms": i, "type": "segment", "data": {"bytes": 500_000}}
              for i in range(4)]
    m = redundancy_metrics(trial_data(tmp_path, redundant_bytes=100_000,
                                      files={"events": events}))
    assert m == {"redundant_mbytes": 0.1, "redundant_share": 0.05}
    assert redundancy_metrics(trial_data(tmp_path, files={"events": events})) == {}


def test_play_refuses_an_unknown_scheduler_before_asking_for_what_else_is_missing(kernel_lists):
    from click.testing import CliRunner

    from mpstream.runner.play import play

    kernel_lists("default")
    said = CliRunner().invoke(play, ["--profile", "thesis-bandwidth-unbalanced",
                                     "--transport", "mptcp", "--scheduler", "nosuch"])
    assert said.exit_code != 0
    assert "transport mptcp has default" in str(said.exception or said.output)
    # without --transport, the profile's own transport (MPTCP for this profile) is asked
    said = CliRunner().invoke(play, ["--profile", "thesis-bandwidth-unbalanced",
                                     "--scheduler", "nosuch"])
    assert "transport mptcp has default" in str(said.exception or said.output)
