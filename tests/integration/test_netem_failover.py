"""A path fails under a bulk transfer: MPTCP carries on over the other path; single-path TCP
over the failed path stalls. The failure is a timed event of the profile, started with
`start_events()` while the transfer runs."""

import json
import os
import subprocess
import time

from mpstream.netem.profile import profile_from_dict
from mpstream.netem.topology import Topology

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


def test_mptcp_transfer_survives_the_failure_of_its_first_path():
    with Topology.up(failing_profile("mptcp"), f"fo{os.getpid()}") as topo:
        server = topo.popen("server", ["iperf3", "-s", "-1", "-p", "5202"], mptcp=True)
        time.sleep(0.3)
        topo.start_events()
        client = topo.popen("client", ["iperf3", "-c", topo.server_addr, "-R", "-J",
                                       "-t", "7", "-p", "5202"], mptcp=True,
                            stdout=subprocess.PIPE, text=True)
        time.sleep(FAIL_AT_S + 1.5)  # the failure, and a second for MPTCP to react
        before = rx(topo)
        time.sleep(2.0)
        after = rx(topo)
        out, _ = client.communicate(timeout=30)
        server.wait(timeout=10)
    assert client.returncode == 0, out
    intervals = [i["sum"] for i in json.loads(out)["intervals"]]
    late = [i for i in intervals if i["start"] >= FAIL_AT_S + 2]
    late_mbit = sum(i["bytes"] for i in late) * 8 / sum(i["seconds"] for i in late) / 1e6
    # Everything after the failure comes over path 1, at most of its rate.
    assert late_mbit > 0.6 * RATE_MBIT, intervals
    assert after[0] - before[0] < 20_000, (before, after)
    assert after[1] - before[1] > 0.6 * RATE_MBIT * 1e6 / 8 * 2.0 * 0.9, (before, after)


def test_single_path_tcp_over_the_failed_path_stalls():
    with Topology.up(failing_profile("tcp"), f"fs{os.getpid()}") as topo:
        topo.popen("server", ["iperf3", "-s", "-1", "-p", "5201"])
        time.sleep(0.3)
        topo.start_events()
        client = topo.popen("client", ["iperf3", "-c", topo.server_addr, "-R",
                                       "-t", "7", "-p", "5201"])
        time.sleep(1.0)
        early = rx(topo)
        time.sleep(FAIL_AT_S - 1.0 + 0.5)
        before = rx(topo)
        time.sleep(2.0)
        after = rx(topo)
        client.kill()
        client.wait()
    assert before[0] - early[0] > 0.5 * RATE_MBIT * 1e6 / 8 * 1.0  # it was running
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
        time.sleep(0.3)
        client = topo.popen("client", ["iperf3", "-c", topo.server_addr, "-R", "-t", "6",
                                       "-p", "5201"], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while rx(topo)[0] < 200_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        topo.start_events()  # the transfer runs: now is t = 0 of the events

        def mbit_between(start, end):
            time.sleep(max(0.0, start - (time.monotonic() - t0)))
            first = rx(topo)[0]
            time.sleep(end - start)
            return (rx(topo)[0] - first) * 8 / (end - start) / 1e6

        t0 = time.monotonic()
        before, after = mbit_between(0.5, 1.5), mbit_between(3.0, 4.0)
        client.kill()
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
