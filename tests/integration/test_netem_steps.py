"""A real topology as steps: a failure half-way through `Topology.up` (an emulator that cannot
start, after the others did) leaves nothing behind and says what failed; and each step's own
undo takes away what its up made, so a step that fails cleans up after itself even before its
namespaces are removed."""

import json
import os
import subprocess

import pytest

from mpstream.deployment import ClientMptcp, ClientSettings, Deployment
from mpstream.errors import UserError
from mpstream.netem import teardown
from mpstream.netem.profile import profile_from_dict
from mpstream.netem.steps.emulation import Emulators
from mpstream.netem.teardown import leftovers, netns_pids, orphan_emulator_pids
from mpstream.netem.topology import Topology
from mpstream.proc import pid_alive


def name(tag):
    return f"{tag}{os.getpid()}"


def ip_json(ns, *args):
    out = subprocess.run(["ip", "-n", ns, "-j", *args], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out or "[]")


def test_an_emulator_that_cannot_start_half_way_leaves_nothing_behind(tmp_path, monkeypatch):
    """np03-2x10 has three emulators (two paths and the server link): the one of path 1 fails
    as it starts, while the other two run for real."""
    started = tmp_path / "started"
    broken = tmp_path / teardown.EMULATOR.name  # found by its name, as the real one is
    broken.write_text(f"""#!/bin/sh
case "$2" in
  */path1.json) echo "cannot open ta1 (a test's broken emulator)" >&2; exit 3 ;;
esac
echo $$ >> {started}
exec {teardown.EMULATOR} "$@"
""")
    broken.chmod(0o755)
    monkeypatch.setattr(teardown, "EMULATOR", broken)
    topo_name = name("emu")
    with pytest.raises(UserError, match=r"the link emulator for path1 exited with 3: "
                                        r"cannot open ta1 \(a test's broken emulator\)"):
        Topology.up("np03-2x10", topo_name)
    pids = [int(pid) for pid in started.read_text().split()]
    assert len(pids) == 2  # path 0's and the server link's emulators had started
    assert not any(pid_alive(pid) for pid in pids)
    assert leftovers(topo_name) == []


def test_each_steps_undo_takes_away_what_its_up_made(tmp_path):
    """Every step up, then every step but the namespaces undone on its own (as a step that
    fails does): the namespaces are as bare as new, no emulator or path manager runs."""
    userspace = Deployment(name="userspace-pm",
                           client=ClientSettings(mptcp=ClientMptcp(path_manager="userspace")))
    profile = profile_from_dict({
        "paths": [{"rate": "10mbit"}, {"rate": "5mbit"}], "server_link": {"rate": "20mbit"},
        "competitors": [{"transport": "mptcp", "paths": [{}, {"via": 0}]}],
        "deployment": userspace.model_dump()})
    topo = Topology(profile, name("und"), emulated=True)
    steps = topo._plan()
    assert type(steps[0]).__name__ == "Namespaces" and type(steps[-1]).__name__ == "PathManager"
    namespaces = sorted(steps[0].removes)
    try:
        topo._write_state()
        topo.state_dir.mkdir(parents=True, exist_ok=True)
        for step in steps:
            step.up()
        assert len(ip_json(topo.link_ns, "link", "show")) > 1
        assert ip_json(topo.netns("user1"), "mptcp", "endpoint", "show")
        assert orphan_emulator_pids(topo.name) and netns_pids(topo.client_ns)
        for step in reversed(steps[1:]):
            step.undo()
            if isinstance(step, Emulators):  # stopped by their own undo, their TUNs still up
                assert orphan_emulator_pids(topo.name) == []
        for ns in namespaces:
            assert [link["ifname"] for link in ip_json(ns, "link", "show")] == ["lo"], ns
            assert {rule["priority"] for rule in ip_json(ns, "rule", "show")} == \
                {0, 32766, 32767}, ns
            assert not [r for r in ip_json(ns, "route", "show", "table", "all")
                        if r.get("dst", "").startswith("10.")], ns
            assert ip_json(ns, "mptcp", "endpoint", "show") == [], ns
            assert netns_pids(ns) == [], ns
    finally:
        topo.down()
    assert leftovers(topo.name) == []
