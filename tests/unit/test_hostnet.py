"""Input checks of the real-network parts: --interfaces, --listen, real scenario conditions,
and `mpstream clean`'s choice of state files (never another namespace's, never a live one's)."""

import json
import os

import pytest

from mpstream.errors import UserError
from mpstream.netem import hostchanges
from mpstream.netem.hostnet import InterfaceSpec, clean, netns_id, parse_interfaces
from mpstream.runner.scenario import parse_scenario
from mpstream.server.cli import parse_listen


def test_interfaces_parse_with_backup_flags():
    assert parse_interfaces("eth0,wwan0:backup") == [InterfaceSpec("eth0"),
                                                      InterfaceSpec("wwan0", True)]


@pytest.mark.parametrize("bad, says", [
    ("eth0,,wlan0", "empty name"), ("eth0:spare", "only flag"), ("eth0,eth0", "twice"),
    ("a/b", "not an interface name"),
])
def test_bad_interfaces_are_named(bad, says):
    with pytest.raises(UserError, match=says):
        parse_interfaces(bad)


def test_listen_addresses():
    assert parse_listen("192.0.2.1:8080") == ("192.0.2.1", 8080)
    assert parse_listen("[2001:db8::1]:80") == ("2001:db8::1", 80)
    for bad in ("192.0.2.1", "host:80", "192.0.2.1:0", "192.0.2.1:x"):
        with pytest.raises(UserError, match="--listen"):
            parse_listen(bad)


def _scenario(**cond):
    return {"name": "r", "players": ["dashjs"],
            "conditions": [{"label": "c", "kind": "real", **cond}]}


def test_a_real_condition_needs_a_url_and_no_profile(tmp_path):
    ok = parse_scenario(_scenario(url="http://192.0.2.1/m.mpd", interfaces="a,b:backup"),
                        base_dir=tmp_path)
    assert ok.conditions[0].url_for("dashjs") == "http://192.0.2.1/m.mpd"
    with pytest.raises(UserError, match="needs `url`"):
        parse_scenario(_scenario(), base_dir=tmp_path)
    with pytest.raises(UserError, match="no `profile`"):
        parse_scenario(_scenario(url="http://x/m.mpd", profile="np03-2x10"), base_dir=tmp_path)
    with pytest.raises(UserError, match="only flag"):
        parse_scenario(_scenario(url="http://x/m.mpd", interfaces="a:x"), base_dir=tmp_path)
    with pytest.raises(UserError, match="no url for player hlsjs"):
        parse_scenario({**_scenario(url={"dashjs": "http://x/m.mpd"}),
                        "players": ["dashjs", "hlsjs"]}, base_dir=tmp_path)


def test_clean_leaves_live_owners_and_other_namespaces_alone(tmp_path):
    def state(name, pid, netns):
        (tmp_path / name).write_text(json.dumps({
            "owner_pid": pid, "netns": netns, "purpose": "t", "changes": []}))

    state("live.json", os.getpid(), netns_id())
    state("other.json", 2**22 + 7, "0:1")
    state("dead.json", 2**22 + 7, netns_id())
    out = clean([tmp_path])
    assert (out["live"], out["other_netns"]) == (1, 1)
    assert [u["file"] for u in out["undone"]] == [str(tmp_path / "dead.json")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live.json", "other.json"]


# Records as the state files of earlier versions hold them (one of each kind).
OLD_RECORDS = [
    {"kind": "table", "family": 4, "table": 9700},
    {"kind": "rule", "family": 4, "priority": 9700, "to": "192.0.2.1", "table": 9700},
    {"kind": "rule", "family": 6, "priority": 9701, "from": "2001:db8::2", "table": 9701},
    {"kind": "endpoint", "id": 3, "address": "198.51.100.2"},
    {"kind": "limits", "subflows": 2, "add_addr_accepted": 0},
]


@pytest.mark.parametrize("record", OLD_RECORDS, ids=lambda r: r["kind"])
def test_a_recorded_change_reads_back_as_the_same_record(record):
    change = hostchanges.from_record(record)
    assert change.kind == record["kind"]
    assert json.dumps(change.record()) == json.dumps(record)  # same keys, same order


def test_each_change_records_what_undoing_it_needs_not_how_it_was_made():
    made = hostchanges.Endpoint(3, "198.51.100.2", ("dev", "wwan0", "subflow", "backup"))
    assert made.record() == OLD_RECORDS[3]
    assert hostchanges.Limits(2, 0, raised=(8, 8)).record() == OLD_RECORDS[4]
    table = hostchanges.RouteTable(4, 9700, (("198.51.100.0/24", "dev", "wwan0"),))
    assert table.record() == OLD_RECORDS[0]


def test_a_change_of_an_unknown_kind_is_left_to_the_user():
    with pytest.raises(UserError, match=r"unknown change 'qdisc'.*by hand"):
        hostchanges.from_record({"kind": "qdisc", "dev": "eth0"})
