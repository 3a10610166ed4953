"""Teardown leaves nothing behind: after an error inside `with Topology.up(...)`, after Ctrl-C
of the tool, after `kill -9` of the tool (then `netem clean` / `netem down`), and several
topologies live side by side. Also: no route off the machine, and a clear error without root."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpstream.errors import UserError
from mpstream.netem.check import rtt_slack_ms
from mpstream.netem.teardown import leftovers, netns_name, netns_pids, state_dir
from mpstream.netem.topology import Topology
from mpstream.proc import pid_alive
from tests.waiting import command_lines, wait_until

MPSTREAM = str(Path(sys.executable).parent / "mpstream")


def name(tag):
    return f"{tag}{os.getpid()}"


def mpstream(*args, **kw):
    return subprocess.run([MPSTREAM, *args], capture_output=True, text=True, timeout=120, **kw)


def start_foreground(profile, topo_name):
    proc = subprocess.Popen([MPSTREAM, "netem", "up", profile, "--name", topo_name,
                             "--foreground"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stdout:
        if line.strip() == "ready":
            return proc
    raise AssertionError(f"netem up did not come up: {proc.stderr.read()}")


def test_an_error_inside_the_with_block_removes_everything():
    topo_name = name("err")
    with pytest.raises(RuntimeError), Topology.up("thesis-latency-balanced", topo_name) as topo:
        sleeper = topo.popen("server", ["sleep", "300"])
        assert leftovers(topo_name)
        raise RuntimeError("boom")
    assert leftovers(topo_name) == []
    assert sleeper.wait(timeout=5) is not None


def test_ctrl_c_of_the_tool_tears_down():
    topo_name = name("int")
    proc = start_foreground("thesis-latency-unbalanced", topo_name)
    assert any("namespace" in item for item in leftovers(topo_name))
    assert any("emulator" in item for item in leftovers(topo_name))
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    assert leftovers(topo_name) == []


@pytest.mark.parametrize("delay_s", [0.0, 0.01, 0.03, 0.06])
def test_ctrl_c_while_the_topology_is_being_built_leaves_nothing(delay_s):
    """The interrupt lands `delay_s` after the build started (its state file appears first):
    in namespaces, links, MPTCP set-up or emulator start."""
    topo_name = name(f"bi{int(delay_s * 100)}")
    proc = subprocess.Popen([MPSTREAM, "netem", "up", "np03-2x10", "--name", topo_name,
                             "--foreground"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    state = state_dir() / f"{topo_name}.json"
    wait_until(state.exists, 30, "the build's state file appears", 0.001)
    time.sleep(delay_s)  # where in the build the interrupt lands: the test's parameter
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert leftovers(topo_name) == []


def test_ctrl_c_of_a_running_check_tears_down():
    topo_name = name("chk")
    proc = subprocess.Popen([MPSTREAM, "netem", "check", "thesis-bandwidth-balanced", "--name",
                             topo_name], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Pings first, then iperf3 runs between the client and the server: a run is under way.
    wait_until(lambda: all(any(line.startswith("iperf3 ")
                               for line in command_lines(netns_name(topo_name, host)))
                           for host in ("client", "server")), 30, "iperf3 runs in the topology")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) != 0
    assert leftovers(topo_name) == []


def test_kill_9_of_the_tool_then_clean_leaves_nothing():
    topo_name = name("k9")
    proc = start_foreground("np03-2x10", topo_name)
    before = leftovers(topo_name)
    assert sum("namespace" in item for item in before) == 3
    assert sum("emulator" in item for item in before) == 3  # two paths and the server link
    proc.kill()
    proc.wait()  # gone: its emulators are orphans now, with no one to stop them
    assert leftovers(topo_name) == before  # killed -9: nothing could clean up
    result = mpstream("netem", "clean", f"{topo_name}*")
    assert result.returncode == 0, result.stderr
    assert topo_name in result.stdout
    assert leftovers(topo_name) == []


def test_the_leftover_of_a_killed_program_is_replaced_but_a_detached_topology_is_not():
    topo_name = name("stale")
    proc = start_foreground("thesis-latency-single", topo_name)
    proc.kill()
    proc.wait()
    assert leftovers(topo_name)
    with Topology.up("thesis-latency-balanced", topo_name) as topo:
        assert len(topo.paths) == 2
    assert leftovers(topo_name) == []
    assert mpstream("netem", "up", "thesis-latency-single", "--name", topo_name).returncode == 0
    try:
        with pytest.raises(UserError, match="already exists"):
            Topology.up("thesis-latency-single", topo_name)
    finally:
        mpstream("netem", "down", topo_name)
    assert leftovers(topo_name) == []


def test_kill_9_of_a_check_with_iperf3_running_then_down_leaves_nothing():
    topo_name = name("k9c")
    proc = subprocess.Popen([MPSTREAM, "netem", "check", "thesis-bandwidth-single", "--name",
                             topo_name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server_ns = f"mps-{topo_name}-server"
    deadline = time.monotonic() + 30
    pids = []
    while time.monotonic() < deadline and not pids:
        time.sleep(0.2)
        if Path(f"/run/netns/{server_ns}").exists():
            pids = netns_pids(server_ns)
    assert pids, "iperf3 never started in the server namespace"
    proc.kill()
    proc.wait()
    assert leftovers(topo_name)
    result = mpstream("netem", "down", topo_name)
    assert result.returncode == 0, result.stderr
    assert leftovers(topo_name) == []
    assert not any(pid_alive(pid) for pid in pids)


def test_up_leaves_the_topology_running_and_down_removes_it():
    topo_name = name("det")
    result = mpstream("netem", "up", "thesis-latency-single", "--name", topo_name)
    assert result.returncode == 0, result.stderr
    try:
        listing = mpstream("netem", "list")
        assert topo_name in listing.stdout and "thesis-loss-single" in listing.stdout
        ping = mpstream("netem", "exec", topo_name, "client", "--", "ping", "-c", "5", "-i",
                        "0.05", "10.2.0.2")
        assert ping.returncode == 0, ping.stdout + ping.stderr
        rtts = sorted(float(t.split("=")[1]) for t in ping.stdout.split()
                      if t.startswith("time="))
        # 5 ms each way. No packet may beat the emulator's delay; single packets may come late
        # (on this host a timer wakes the emulator 1-3 ms late when another process holds the
        # CPU in the non-preemptible kernel, traced for any packet, not only the first), so the
        # round trip is judged as `netem check` judges it: its median within its tolerance.
        assert rtts[0] >= 9.5, rtts
        assert abs(rtts[len(rtts) // 2] - 10.0) <= rtt_slack_ms(10.0), rtts
        assert mpstream("netem", "exec", topo_name, "server", "--", "false").returncode == 1
        again = mpstream("netem", "up", "thesis-latency-single", "--name", topo_name)
        assert again.returncode == 2 and "already exists" in again.stderr
    finally:
        result = mpstream("netem", "down", topo_name)
    assert result.returncode == 0, result.stderr
    assert leftovers(topo_name) == []


def test_topologies_coexist_and_go_down_independently(trace_store):
    first, second = name("coa"), name("cob")
    with Topology.up("thesis-latency-unbalanced", first) as a, \
            Topology.up("wifi-cellular", second) as b:
        def rtt(topo, path):
            out = topo.run("client", ["ping", "-n", "-c", "5", "-i", "0.05", "-I",
                                      path.client_addr, topo.server_addr],
                           capture_output=True, text=True).stdout
            values = sorted(float(t.split("=")[1]) for t in out.split() if t.startswith("time="))
            return values[len(values) // 2]

        assert 14.5 <= rtt(a, a.paths[0]) <= 19 and 4.5 <= rtt(a, a.paths[1]) <= 9
        assert 7.5 <= rtt(b, b.paths[0]) <= 15  # 10 ms, jitter 1 ms each way
        b.down()
        assert leftovers(second) == [] and leftovers(first)
        assert 4.5 <= rtt(a, a.paths[1]) <= 9
    assert leftovers(first) == []


def test_no_namespace_has_a_route_off_the_machine(trace_store):
    with Topology.up("wifi-cellular", name("rt")) as topo:
        for host in ("client", "server", "link"):
            out = topo.run(host, ["ip", "route", "get", "1.1.1.1"], capture_output=True,
                           text=True)
            assert out.returncode != 0 and "unreachable" in out.stderr, (host, out.stdout)
            routes = topo.run(host, ["ip", "route", "show", "table", "all"],
                              capture_output=True, text=True).stdout
            assert "default via" not in routes


def test_mptcp_endpoints_limits_and_cc_per_profile():
    from mpstream.netem.profile import profile_from_dict

    profile = profile_from_dict({"cc": "reno", "paths": [{}, {}, {"backup": True}]})
    with Topology.up(profile, name("ep")) as topo:
        endpoints = topo.run("client", ["ip", "mptcp", "endpoint", "show"],
                             capture_output=True, text=True).stdout.splitlines()
        assert len(endpoints) == 2
        assert "10.1.1.2" in endpoints[0] and "subflow" in endpoints[0]
        assert "backup" not in endpoints[0]
        assert "10.1.2.2" in endpoints[1] and "backup" in endpoints[1]
        limits = topo.run("client", ["ip", "mptcp", "limits", "show"], capture_output=True,
                          text=True).stdout
        assert "subflows 2" in limits
        for host in ("client", "server"):
            cc = topo.run(host, ["sysctl", "-n", "net.ipv4.tcp_congestion_control"],
                          capture_output=True, text=True).stdout.strip()
            assert cc == "reno"


def test_without_root_the_error_is_one_clear_sentence():
    result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             MPSTREAM, "netem", "up", "thesis-latency-single", "--name", "nr"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "needs root" in result.stderr and "Traceback" not in result.stderr
