"""Competing clients: how a profile names them and their paths (validation that names the field),
how the topology wires them (slots, which emulator each path crosses), and the shares the report
computes from each user's transfer."""

import math

import pytest

from mpstream.errors import UserError
from mpstream.netem import emulators
from mpstream.netem.profile import MAX_COMPETITORS, load_profile, profile_from_dict
from mpstream.netem.teardown import ROLES, competitor_role
from mpstream.netem.topology import Topology
from mpstream.runner.layout import write_json
from mpstream.runner.metrics.common import fairness_metrics, jain_index, trial_metrics
from mpstream.runner.record import CompetitorLabel
from mpstream.runner.workloads.video import RivalSession
from mpstream.runner.workloads.video import video_fairness as fairness_of_video
from tests.records import trial_data

CLIENT = {"paths": [{"name": "wifi", "rate": "10mbit"}, {"name": "lte", "rate": "5mbit"}]}


def error_of(data):
    with pytest.raises(UserError) as info:
        profile_from_dict(data)
    return str(info.value)


def test_a_competitor_path_via_a_client_path_shares_its_emulator_and_others_get_their_own():
    profile = profile_from_dict({**CLIENT, "competitors": [
        {"name": "tcp-user", "paths": [{"via": "lte"}]},
        {"mode": "mptcp", "paths": [{"rate": "20mbit", "delay_ms": 7}, {"via": 0}]}]})
    topo = Topology(profile, "unit", emulated=True)
    assert [(u.host, u.name, u.mptcp) for u in topo.competitors] == [
        ("user1", "tcp-user", False), ("user2", "user2", True)]
    assert [(w.host, w.slot, w.link, w.path.client_addr) for w in topo.wires] == [
        ("client", 0, 0, "10.1.0.2"), ("client", 1, 1, "10.1.1.2"),
        ("user1", 2, 1, "10.1.2.2"),
        ("user2", 3, 3, "10.1.3.2"), ("user2", 4, 0, "10.1.4.2")]
    assert topo.netns("user2") == "mps-unit-user2"
    # One emulator per link: the client's two and user2's own; the via paths add none.
    configs = dict(emulators.configs(topo.profile, topo.wires, topo.competitors))
    assert sorted(configs) == ["path0", "path1", "path3"]
    assert configs["path3"]["b_to_a"]["rate_bps"] == 20_000_000
    assert configs["path3"]["b_to_a"]["delay_ms"] == 7


def test_an_unknown_host_is_named_with_the_topologys_hosts():
    topo = Topology(profile_from_dict({**CLIENT, "competitors": [{"paths": [{"via": 0}]}]}),
                    "unit", emulated=True)
    with pytest.raises(UserError, match="host 'user2': choose one of client, server, link, user1"):
        topo.netns("user2")


def test_competitor_validation_names_the_field_and_the_fix():
    via_unknown = error_of({**CLIENT, "competitors": [{"paths": [{"via": "wlan"}]}]})
    assert "competitors.0.paths.0.via: no path named 'wlan' (named paths: wifi, lte)" in via_unknown
    via_and_rate = error_of({**CLIENT, "competitors": [{"paths": [{"via": 0, "rate": "1mbit"}]}]})
    assert "competitors.0.paths.0: a path `via` another takes that path's link" in via_and_rate
    assert "remove rate" in via_and_rate
    twins = error_of({**CLIENT, "competitors": [{"name": "a", "paths": [{"via": 0}]},
                                                {"name": "a", "paths": [{"via": 1}]}]})
    assert "competitors: names must be distinct" in twins
    no_paths = error_of({**CLIENT, "competitors": [{"paths": []}]})
    assert "competitors.0.paths" in no_paths
    one = {"paths": [{"via": 0}]}
    too_many = error_of({**CLIENT, "competitors": [one] * (MAX_COMPETITORS + 1)})
    assert "competitors" in too_many
    assert "mode" in error_of({**CLIENT, "competitors": [{"mode": "quic", "paths": [{"via": 0}]}]})


def test_every_competitor_has_a_namespace_role_that_teardown_knows():
    roles = [competitor_role(k) for k in range(MAX_COMPETITORS)]
    assert roles == ["user1", "user2", "user3", "user4"]
    assert set(roles) <= set(ROLES)


def test_the_shared_bottleneck_preset_has_a_tcp_user_behind_the_server_link():
    profile = load_profile("shared-bottleneck")
    assert profile.mode == "mptcp" and len(profile.paths) == 2
    assert profile.server_link_model("downlink").rate_bps == 10_000_000
    [user] = profile.competitors
    assert user.transport == "tcp" and user.paths[0].via is None


def test_jain_index_is_one_when_equal_and_one_over_n_when_one_takes_all():
    assert jain_index([5.0, 5.0, 5.0]) == pytest.approx(1.0)
    assert jain_index([9.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain_index([3.0, 1.0]) == pytest.approx(16 / 20)
    assert math.isnan(jain_index([])) and math.isnan(jain_index([0.0, 0.0]))


def test_fairness_metrics_split_the_users_by_class():
    m = fairness_metrics([(True, 6e6), (False, 3e6), (False, 1e6)])
    assert m["mptcp_share"] == pytest.approx(0.6)
    assert m["jain_index"] == pytest.approx(100 / (3 * 46))
    assert m["mptcp_user_mbps"] == pytest.approx(6.0)
    assert m["tcp_user_mbps"] == pytest.approx(2.0)
    assert math.isnan(fairness_metrics([(False, 1e6), (False, 1e6)])["mptcp_share"])
    assert fairness_metrics([(True, 1e6), (False, math.nan)]) == {}  # a user without a figure


def iperf_report(bps: float) -> dict:
    return {"end": {"sum_received": {"bits_per_second": bps, "bytes": int(bps * 30 / 8)},
                    "sum_sent": {"retransmits": 3}}}


def test_a_trial_with_competitors_reads_each_users_transfer_from_its_own_file(tmp_path):
    write_json(tmp_path / "iperf.json", iperf_report(4e6))
    write_json(tmp_path / "iperf-user1.json", iperf_report(6e6))
    rec = trial_data(tmp_path, "r00-lia", "lia", kind="iperf", transport="mptcp",
                     competitors=[CompetitorLabel(host="user1", name="tcp-user", transport="tcp")])
    m = trial_metrics(rec, n_paths=2)
    assert m["throughput_mbps"] == pytest.approx(4.0)
    assert m["mptcp_share"] == pytest.approx(0.4)
    assert m["jain_index"] == pytest.approx(100 / (2 * 52))
    assert m["tcp_user_mbps"] == pytest.approx(6.0)
    # The same trial as TCP: no MPTCP user, no share; alone: no fairness figures at all.
    tcp = trial_data(tmp_path, "r00-tcp", "tcp", kind="iperf", transport="tcp",
                     competitors=[CompetitorLabel(host="user1", name="tcp-user", transport="tcp")])
    assert math.isnan(trial_metrics(tcp, n_paths=2)["mptcp_share"])
    alone = trial_data(tmp_path, "r00-alone", "alone", kind="iperf", transport="mptcp")
    assert "jain_index" not in trial_metrics(alone, n_paths=2)


def segments(byte_counts: list[int], bitrate: float) -> list[dict]:
    """A session that started and downloaded one video segment per count."""
    events = [{"seq": 0, "t_ms": 0, "type": "startup",
               "data": {"startup_delay_ms": 500.0, "manifest_ms": 100.0,
                        "first_segment_ms": 300.0, "decode_ms": 100.0, "codec": "avc1.64001f",
                        "width": 640, "height": 360, "bitrate": bitrate}}]
    for i, size in enumerate(byte_counts):
        events.append({"seq": i + 1, "t_ms": 1000 * (i + 1), "type": "segment", "data": {
            "url": f"/v/{i}.m4s", "kind": "video", "bitrate": bitrate, "bytes": size,
            "t_request": 1000.0 * i, "t_first_byte": 1000.0 * i + 10,
            "t_done": 1000.0 * i + 500, "index": i + 1, "duration_s": 2.0}})
    return events


def test_a_video_trial_with_competitors_shares_by_downloaded_bytes(tmp_path):
    write_json(tmp_path / "events.json", segments([3_000_000] * 2, 2e6))
    for host, sizes in (("user1", [1_000_000] * 2), ("user2", [2_000_000] * 2)):
        (tmp_path / host).mkdir()
        write_json(tmp_path / host / "events.json", segments(sizes, 1e6))
    users = [CompetitorLabel(host="user1", name="m", transport="mptcp"),
             CompetitorLabel(host="user2", name="t", transport="tcp")]
    rec = trial_data(tmp_path, "r00-lia", "lia", transport="mptcp", competitors=users)
    m = fairness_of_video(rec)
    assert m["mptcp_share"] == pytest.approx(8 / 12)
    assert m["jain_index"] == pytest.approx(144 / (3 * 56))
    assert set(m) >= {"mptcp_user_bitrate_mbps", "tcp_user_bitrate_mbps", "mptcp_user_stall_ms",
                      "tcp_user_stall_ms"}
    # A competitor whose player never reached the collector: no share can be told.
    (tmp_path / "user2" / "events.json").unlink()
    rec = trial_data(tmp_path, "r00-lia", "lia", transport="mptcp", competitors=users)
    assert fairness_of_video(rec) == {}


def test_cross_traffic_schedules_are_checked():
    bulk = {"traffic": "bulk", "paths": [{"via": 0}]}
    assert profile_from_dict({**CLIENT, "competitors": [
        {**bulk, "start_s": 5, "stop_s": 9}]}).competitors[0].stop_s == 9
    backwards = error_of({**CLIENT, "competitors": [{**bulk, "start_s": 5, "stop_s": 5}]})
    assert "stop_s (5) must be after start_s (5)" in backwards
    not_bulk = error_of({**CLIENT, "competitors": [{"start_s": 3, "paths": [{"via": 0}]}]})
    assert 'start_s schedule cross traffic: give traffic = "bulk" too' in not_bulk
    topo = Topology(profile_from_dict({**CLIENT, "competitors": [{**bulk, "start_s": 2}]}),
                    "unit", emulated=True)
    assert topo.competitors[0].cross_traffic == (2.0, None)


def test_cross_traffic_is_reported_apart_from_the_users(tmp_path):
    write_json(tmp_path / "iperf.json", iperf_report(4e6))
    write_json(tmp_path / "iperf-user1.json", iperf_report(4e6))
    write_json(tmp_path / "iperf-user2.json", iperf_report(2.5e6))
    rec = trial_data(tmp_path, "r00-x", "x", kind="iperf", transport="mptcp", competitors=[
        CompetitorLabel(host="user1", name="tcp-user", transport="tcp"),
        CompetitorLabel(host="user2", name="cross", transport="tcp", cross_traffic=True)])
    m = trial_metrics(rec, n_paths=2)
    assert m["mptcp_share"] == pytest.approx(0.5) and m["jain_index"] == pytest.approx(1.0)
    assert m["cross_traffic_mbps"] == pytest.approx(2.5)
    # Cross traffic alone: no users to compare, only what it carried.
    only = trial_data(tmp_path, "r00-y", "y", kind="iperf", transport="mptcp", competitors=[
        CompetitorLabel(host="user2", name="cross", transport="tcp", cross_traffic=True)])
    m = trial_metrics(only, n_paths=2)
    assert "mptcp_share" not in m and m["cross_traffic_mbps"] == pytest.approx(2.5)



def rival(host: str, failure: str | None = None) -> RivalSession:
    return RivalSession(host, None, None, failure=failure)  # type: ignore[arg-type]


def test_a_competitor_that_never_showed_a_frame_fails_the_trial_with_its_reason():
    startup = [{"type": "startup", "data": {"startup_delay_ms": 800}}]
    broken = rival("user2", "UserError: Chromium did not start: spawn ETXTBSY")
    assert broken.unplayed([]) == ("competing player user2: UserError: Chromium did not "
                                   "start: spawn ETXTBSY")
    assert rival("user1").unplayed([{"type": "segment"}]) == \
        "competing player user1: it showed no frame"
    # One that played and then broke (a path failure) is a result, not a failed trial.
    assert rival("user1", "lost its path").unplayed(startup) is None
