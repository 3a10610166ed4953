"""A deployment applied to a real topology: each end's kernel settings inside its namespace and
nowhere else, and the two ways a subflow gets past a path's outage, each seen in the kernel's
own subflow list: the in-kernel path manager's subflow living through it when its retries are
raised, and the userspace path manager adding a closed one again once the path is back."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpstream.deployment import deployment_from_dict
from mpstream.netem.profile import load_profile
from mpstream.netem.teardown import leftovers
from mpstream.netem.topology import Topology

PORT = 5301
DOWN_AT, UP_AT = 2.0, 12.0


def _sysctl(ns: str | None, name: str) -> str:
    argv = ["sysctl", "-n", name]
    return subprocess.run(argv if ns is None else ["ip", "netns", "exec", ns, *argv],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_each_ends_settings_apply_in_its_namespace_only():
    host_before = _sysctl(None, "net.ipv4.tcp_rto_max_ms")
    dep = deployment_from_dict({"server": {"sysctls": {"net.ipv4.tcp_rto_max_ms": 1000},
                                           "cc": "bbr"},
                                "client": {"sysctls": {"net.ipv4.tcp_retries2": 40}}})
    name = f"dp{os.getpid()}"
    with Topology.up(load_profile("thesis-bandwidth-balanced", deployment=dep), name) as topo:
        assert _sysctl(topo.server_ns, "net.ipv4.tcp_rto_max_ms") == "1000"
        assert _sysctl(topo.client_ns, "net.ipv4.tcp_rto_max_ms") == host_before
        assert _sysctl(topo.client_ns, "net.ipv4.tcp_retries2") == "40"
        assert _sysctl(topo.server_ns, "net.ipv4.tcp_retries2") != "40"
        assert _sysctl(topo.server_ns, "net.ipv4.tcp_congestion_control") == "bbr"
        assert _sysctl(topo.client_ns, "net.ipv4.tcp_congestion_control") == "cubic"
        assert _sysctl(None, "net.ipv4.tcp_rto_max_ms") == host_before
    assert not leftovers(name)
    assert _sysctl(None, "net.ipv4.tcp_rto_max_ms") == host_before


def _subflow_ports(topo: Topology, addr: str) -> set[str]:
    """The client's established TCP sockets from `addr` to the test's server (subflows)."""
    out = topo.run("client", ["ss", "-tnH", "state", "established", "dport", "=", str(PORT)],
                   capture_output=True, text=True).stdout
    local = [line.split()[2].rsplit(":", 1) for line in out.splitlines()]
    # A subflow the in-kernel path manager made is bound to its device: ADDR%DEV:PORT.
    return {port for host, port in local if host.split("%")[0] == addr}


def _upload_through_an_outage(pm: str, retries: int) -> tuple[list[set[str]], Path | None]:
    """Path 1 of two down from DOWN_AT to UP_AT while the client uploads (so that the client's
    subflow there has data to retransmit); its subflows' source ports before, during and after."""
    sysctls = {"net.ipv4.tcp_rto_max_ms": 1000, "net.ipv4.tcp_retries2": retries}
    dep = deployment_from_dict({"server": {"sysctls": sysctls},
                                "client": {"sysctls": sysctls, "mptcp": {"path_manager": pm}}})
    events = [{"at_s": DOWN_AT, "path": 1, "action": "down"},
              {"at_s": UP_AT, "path": 1, "action": "up"}]
    prof = load_profile("thesis-bandwidth-balanced", {"events": events}, deployment=dep)
    name = f"pm{os.getpid()}"
    wrap = ["mptcpize", "run"]
    seen: list[set[str]] = []
    with Topology.up(prof, name) as topo:
        server = topo.popen("server", [*wrap, "iperf3", "-s", "-1", "-p", str(PORT)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        topo.wait_listening("server", PORT)
        client = topo.popen("client", [*wrap, "iperf3", "-c", topo.server_addr, "-p", str(PORT),
                                       "-t", f"{UP_AT + 4:g}", "-b", "5M"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        topo.start_events()
        started = time.monotonic()
        for at in (DOWN_AT - 1, UP_AT - 1, UP_AT + 3):
            time.sleep(max(0.0, started + at - time.monotonic()))
            seen.append(_subflow_ports(topo, "10.1.1.2"))
        client.wait(timeout=30)
        server.wait(timeout=10)
        log = topo.state_dir / "pathmanager.jsonl"
        kept = Path(os.environ.get("TMPDIR", "/tmp")) / f"{name}.pathmanager.jsonl"
        if log.exists():
            kept.write_text(log.read_text())
    assert not leftovers(name)
    return seen, kept if kept.exists() else None


@pytest.mark.long
def test_the_kernels_subflow_lives_through_the_outage_when_its_retries_are_raised():
    before, during, after = _upload_through_an_outage("kernel", retries=120)[0]
    assert before and before == during == after, (before, during, after)


@pytest.mark.long
def test_the_userspace_path_manager_adds_a_closed_subflow_again_once_its_path_is_back():
    (before, during, after), log = _upload_through_an_outage("userspace", retries=3)
    assert before, "the path manager made no subflow on path 1"
    # With 3 retries the upload's subflow there closes within the 10 s outage (iperf3's idle
    # control connection keeps its own: nothing of it waits for an acknowledgement) ...
    assert before - during, (before, during)
    # ... and a new one, by a new port, carries on once the path is back.
    assert after - before, (before, after)
    assert log is not None
    said = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    kinds = [s.get("event") for s in said if s.get("saddr") == "10.1.1.2"]
    # Both connections' subflows there, one closed in the outage, one added after it.
    closed = kinds.index("sub_closed")
    assert kinds[:closed] == ["sub_established"] * 2 and "sub_established" in kinds[closed:]
    log.unlink()


def _server_sockets(topo: Topology) -> dict[str, dict[str, str]]:
    """What `ss -tinm` says of the server's socket towards each client path address: that of
    the subflow that carried the most there (iperf3's data, not its idle control connection).
    Its fields, plus
    `tb` (the send buffer) and `pacing_max` (the pacing cap, when set)."""
    out = topo.run("server", ["ss", "-tinmH", "state", "established", "sport", "=", str(PORT)],
                   capture_output=True, text=True).stdout
    busiest: dict[str, tuple[int, dict[str, str]]] = {}
    peer = None
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            peer = line.split()[-1].rsplit(":", 1)[0].removeprefix("[::ffff:").rstrip("]")
            continue
        fields = dict(f.split(":", 1) for f in line.split() if ":" in f)
        if peer and "cwnd" in fields:
            fields["tb"] = re.search(r"\btb(\d+)", line).group(1)
            pacing = re.search(r"pacing_rate \d+bps/(\d+)bps", line)
            fields["pacing_max"] = pacing.group(1) if pacing else ""
            acked = int(fields.get("bytes_acked", "0"))
            if acked >= busiest.get(peer, (-1, {}))[0]:
                busiest[peer] = (acked, fields)
    return {peer: fields for peer, (_, fields) in busiest.items()}


@pytest.mark.long
def test_the_servers_caps_hold_the_slower_path_and_go_with_the_topology():
    """server.cwnd_clamp_bdp = 2, sndbuf_bdp = 2 and pacing_cap = 1 on 25 and 5 Mbit/s paths of
    10 ms: during a download the slow path's subflow is held at a window of 9 packets (it
    otherwise grows past 100, the queue), a fixed send buffer of 9 packets (the kernel doubles
    what it is given) and a pacing rate of at most 5 Mbit/s; the fast path's is none of these.
    The program and its pins are gone with the topology, and the host's cgroups and bpffs are as
    they were."""
    from mpstream.netem import pathcaps
    from mpstream.netem.pathcaps import PathCap

    assert pathcaps.machine_refusal() is None  # `make test-deployments` builds the program
    mounts_before = sorted(Path("/proc/mounts").read_text().splitlines())
    dep = deployment_from_dict({"server": {"cwnd_clamp_bdp": 2.0, "sndbuf_bdp": 2.0,
                                           "pacing_cap": 1.0}})
    caps = {"10.1.1.0": PathCap(9, 625_000, 9 * 1448)}
    name = f"wc{os.getpid()}"
    wrap = ["mptcpize", "run"]
    with Topology.up(load_profile("thesis-bandwidth-unbalanced", deployment=dep), name) as topo:
        assert topo.path_caps() == caps
        cookie = pathcaps.netns_cookie(topo.server_ns)
        assert pathcaps.caps_of(cookie) == caps
        server = topo.popen("server", [*wrap, "iperf3", "-s", "-1", "-p", str(PORT)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        topo.wait_listening("server", PORT)
        client = topo.popen("client", [*wrap, "iperf3", "-c", topo.server_addr, "-p", str(PORT),
                                       "-t", "5", "-R"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3.5)  # the slow path's queue holds 100 packets: uncapped, CUBIC fills it
        sockets = _server_sockets(topo)
        client.wait(timeout=30)
        server.wait(timeout=10)
    slow, fast = sockets.get("10.1.1.2", {}), sockets.get("10.1.0.2", {})
    assert slow.get("cwnd") == "9", sockets
    assert slow.get("tb") == str(2 * 9 * 1448), sockets
    assert slow.get("pacing_max") == "5000000", sockets
    assert int(fast.get("cwnd", 0)) > 9 and fast.get("pacing_max") == "", sockets
    assert fast.get("tb") != str(2 * 9 * 1448), sockets
    assert not leftovers(name)
    assert pathcaps.caps_of(cookie) == {}
    # The program, its pins and mounts go with the last topology that used them (none other
    # runs beside this test).
    assert not pathcaps.attached()
    assert sorted(Path("/proc/mounts").read_text().splitlines()) == mounts_before


# A server that answers each line with a small response, as a live origin answers a part's
# request: the sender is never limited by its window, so the window never moves from where it
# started; the client asks again at once (an idle pause longer than the retransmission timeout
# would restart the window, at the capped initial window, and hide what this test is after).
SMALL_ANSWERS = """
import socket, sys
srv = socket.create_server(("", int(sys.argv[1])))
conn, _ = srv.accept()
while conn.recv(100):
    conn.sendall(b"x" * 3000)
"""


@pytest.mark.long
def test_a_connection_starts_within_its_paths_window_cap():
    """mptcp-live's caps on 400 kbit/s paths of 10 ms are four packets: a TCP connection that
    carries only small responses starts at that window, not at the kernel's initial ten
    packets, which on such a path are a third of a second of queue (before the cap set the
    initial window, its window stayed at ten: the clamp only bounds growth)."""
    profile = load_profile("thesis-bandwidth-balanced", {"paths.*.rate": "400kbit"},
                           deployment="mptcp-live")
    with Topology.up(profile, f"iw{os.getpid()}") as topo:
        assert {cap.cwnd_packets for cap in topo.path_caps().values()} == {4}
        server = topo.popen("server", [sys.executable, "-c", SMALL_ANSWERS, str(PORT)])
        try:
            topo.wait_listening("server", PORT)
            client = topo.popen("client", [sys.executable, "-c", (
                "import socket, sys, time\n"
                f"c = socket.create_connection(('{topo.server_addr}', {PORT}))\n"
                "for _ in range(10):\n"
                "    c.sendall(b'next\\n'); got = 0\n"
                "    while got < 3000: got += len(c.recv(4000))\n"
                "print('done', flush=True)\n"
                "time.sleep(30)\n")], stdout=subprocess.PIPE, text=True)
            try:
                assert client.stdout.readline() == "done\n"
                sockets = _server_sockets(topo)  # while the connection is open
            finally:
                client.kill()
                client.wait()
        finally:
            server.kill()
            server.wait()
    assert sockets.get(topo.paths[0].client_addr, {}).get("cwnd") == "4", sockets


@pytest.mark.long
def test_a_killed_topologys_path_caps_go_with_mpstream_clean():
    from mpstream.netem import pathcaps
    from mpstream.netem.pathcaps import PathCap

    mounts_before = sorted(Path("/proc/mounts").read_text().splitlines())
    mpstream = str(Path(sys.executable).parent / "mpstream")
    name = f"wk{os.getpid()}"
    proc = subprocess.Popen([mpstream, "netem", "up", "thesis-bandwidth-unbalanced",
                             "--deployment", "mptcp-tuned", "--name", name, "--foreground"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (pathcaps.records_dir() / f"{name}.use").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(0.5)
        cookie = json.loads((pathcaps.records_dir() / f"{name}.use").read_text())["cookie"]
        assert pathcaps.caps_of(cookie) == {"10.1.1.0": PathCap(9, None, 9 * 1448)}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert (pathcaps.records_dir() / f"{name}.use").exists()  # left behind by the kill
    cleaned = subprocess.run([mpstream, "clean"], capture_output=True, text=True, check=True)
    assert f"removed the path caps of topology {name}" in cleaned.stdout + cleaned.stderr
    assert pathcaps.caps_of(cookie) == {}
    assert not pathcaps.attached()
    assert not leftovers(name)
    assert sorted(Path("/proc/mounts").read_text().splitlines()) == mounts_before
