"""Input checks of the real-network parts: --interfaces, --listen, real scenario conditions,
and `mpstream clean`'s choice of state files (never another namespace's, never a live one's)."""

import json
import os

import pytest

from mpstream.errors import UserError
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
