"""A path fails under a bulk transfer: MPTCP carries on over the other path; single-path TCP
over the failed path stalls. The failure is a timed event of the profile, started with
`start_events()` while the transfer runs."""

import os
import subprocess
import time

from mpstream.netem.profile import profile_from_dict
from mpstream.netem.topology import Topology
from mpstream.transports.base import get_transport
from tests.waiting import listening, wait_until

MPTCP_WRAP = get_transport("mptcp").wrap

FAIL_AT_S = 2.0
RATE_MBIT = 10


def failing_profile(mode):
    path = {"rate": f"{RATE_MBIT}mbit", "delay_ms": 5, "queue_packets": 100}
    return profile_from_dict({
        "mode": mode, "tcp_path": 0, "paths": [path, path],
        "events": [{"at_s": FAIL_AT_S, "path": 0, "action": "down"}],
    }, name=f"failover-{mode}")


def rx(topo):
    return [p["rx_bytes"] for p in topo.path_bytes()]


def start_events_once_flowing(topo, client_argv, **kw):
    """Starts the download, waits until data flows, then starts the event clock: the event
    times below are then times of the transfer, whatever the start-up took on a busy CPU."""
    client = topo.popen("client", client_argv, **kw)
    deadline = time.monotonic() + 10
    while sum(rx(topo)) < 200_000 and time.monotonic() < deadline:
        time.sleep(0.02)
    topo.start_events()
    t0 = time.monotonic()

    def rx_at(at_s):
        """Counters at about `at_s`; (when, counters), `when` the middle of the reading (which
        may take a while on a busy CPU)."""
        time.sleep(max(0.0, t0 + at_s - time.monotonic()))
        start = time.monotonic()
        counters = rx(topo)
        return (start + time.monotonic()) / 2 - t0, counters

    return client, rx_at


def test_mptcp_transfer_survives_the_failure_of_its_first_path():
    with Topology.up(failing_profile("mptcp"), f"fo{os.getpid()}") as topo:
        server = topo.popen("server", ["iperf3", "-s", "-1", "-p", "5202"], wrap=MPTCP_WRAP)
        wait_until(lambda: listening(topo.server_ns, 5202), 10, "iperf3 listens")
        client, rx_at = start_events_once_flowing(
            topo, ["iperf3", "-c", topo.server_addr, "-R", "-t", "8", "-p", "5202"],
            wrap=MPTCP_WRAP, stdout=subprocess.PIPE, text=True)
        (_, early), (_, pre) = rx_at(0.3), rx_at(FAIL_AT_S - 0.2)
        (t1, before), (t2, after) = rx_at(FAIL_AT_S + 1.5), rx_at(FAIL_AT_S + 3.5)
        out, _ = client.communicate(timeout=30)
        server.wait(timeout=10)
    assert client.returncode == 0, out  # the transfer finished
    # Before the failure both subflows carried data ...
    assert pre[0] - early[0] > 100_000 and pre[1] - early[1] > 100_000, (early, pre)
    # ... after it nothing comes over path 0 and path 1 carries on near its rate.
    assert after[0] - before[0] < 20_000, (before, after)
    assert (after[1] - before[1]) * 8 / (t2 - t1) > 0.6 * RATE_MBIT * 1e6, (before, after)


def test_single_path_tcp_over_the_failed_path_stalls():
    with Topology.up(failing_profile("tcp"), f"fs{os.getpid()}") as topo:
        topo.popen("server", ["iperf3", "-s", "-1", "-p", "5201"])
        wait_until(lambda: listening(topo.server_ns, 5201), 10, "iperf3 listens")
        client, rx_at = start_events_once_flowing(
            topo, ["iperf3", "-c", topo.server_addr, "-R", "-t", "8", "-p", "5201"],
            stdout=subprocess.DEVNULL)
        (t1, early), (t2, pre) = rx_at(0.3), rx_at(FAIL_AT_S - 0.2)
        (_, before), (_, after) = rx_at(FAIL_AT_S + 0.5), rx_at(FAIL_AT_S + 2.5)
        client.kill()
        client.wait()
    assert (pre[0] - early[0]) * 8 / (t2 - t1) > 0.6 * RATE_MBIT * 1e6, (early, pre)  # it ran
    assert after[0] - before[0] < 2_000, (before, after)  # then nothing came in
    assert after[1] - before[1] < 2_000  # and nothing moved to the other path


def test_a_rate_change_event_applies_at_its_time():
    profile = profile_from_dict({
        "mode": "tcp", "paths": [{"rate": "20mbit", "delay_ms": 2, "queue_packets": 50}],
        "events": [{"at_s": 2.0, "path": 0, "action": "change", "dir": "downlink",
                    "set": {"rate": "4mbit"}}],
    })
    with Topology.up(profile, f"ch{os.getpid()}") as topo:
        topo.popen("server", ["iperf3", "-s", "-1", "-p", "5201"])
        wait_until(lambda: listening(topo.server_ns, 5201), 10, "iperf3 listens")
        client, rx_at = start_events_once_flowing(
            topo, ["iperf3", "-c", topo.server_addr, "-R", "-t", "6", "-p", "5201"],
            stdout=subprocess.DEVNULL)
        samples = [rx_at(t) for t in (0.3, 1.7, 2.6, 4.0)]
        client.kill()
        client.wait()

    def mbit(a, b):
        return (b[1][0] - a[1][0]) * 8 / (b[0] - a[0]) / 1e6

    before, after = mbit(samples[0], samples[1]), mbit(samples[2], samples[3])
    # Kernel counters on the client interface: IP rate plus 14 bytes of Ethernet per packet.
    assert 17 < before < 21, (before, after)
    assert 3.3 < after < 4.3, (before, after)


def test_a_failed_path_comes_back_up():
    path = {"rate": "10mbit", "delay_ms": 2}
    profile = profile_from_dict({
        "paths": [path],
        "events": [{"at_s": 1.0, "path": 0, "action": "down"},
                   {"at_s": 2.0, "path": 0, "action": "up"}],
    })
    with Topology.up(profile, f"up{os.getpid()}") as topo:
        t0 = time.time()
        topo.start_events()
        out = topo.run("client", ["ping", "-n", "-D", "-i", "0.05", "-c", "70",
                                  topo.server_addr], capture_output=True, text=True).stdout
    # -D: each reply line starts with its arrival time; relative to the event clock here.
    replies = [float(line[1:line.index("]")]) - t0 for line in out.splitlines()
               if line.startswith("[") and "bytes from" in line]
    assert any(t < 0.9 for t in replies) and any(t > 2.3 for t in replies), replies
    assert not any(1.1 < t < 1.9 for t in replies), replies
