"""The kernel sampler against a real MPTCP transfer over two emulated paths: it must see both
subflows, name their paths, and its byte counts must agree with iperf3's and, to the byte
within the packets' headers, with the interfaces'."""

import itertools
import json
import subprocess
import time

import pytest

from mpstream.netem.profile import load_profile
from mpstream.netem.topology import Topology
from mpstream.runner.metrics import binned_by_path
from mpstream.runner.sampler import SubflowSampler, read_samples
from mpstream.transport import get_transport
from tests.waiting import listening, wait_until

MPTCP_WRAP = get_transport("mptcp").wrap

pytestmark = pytest.mark.timeout(120)

# What a received packet adds to the interface's byte counter beyond the TCP payload the socket
# counts: Ethernet 14 + IPv4 20 + TCP 20 bytes at least (an ARP frame, 42, has no payload either),
# at most 14 + 20 + 60 (TCP options: timestamps, SACK, MPTCP's DSS).
MIN_HEADER, MAX_HEADER = 42, 94


def test_sampler_sees_both_subflows_of_an_mptcp_download(tmp_path):
    profile = load_profile("thesis-bandwidth-balanced")
    with Topology.up(profile, name="rsamp") as topo:
        path_of = {p.client_addr: p.index for p in topo.paths}.get
        server = topo.popen("server", ["iperf3", "-s", "-1", "-p", "5301"], wrap=MPTCP_WRAP,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: listening(topo.server_ns, 5301), 10, "iperf3 listens")
            before = topo.path_bytes()
            t0 = time.monotonic()
            client_csv, server_csv = tmp_path / "c.csv", tmp_path / "s.csv"
            with SubflowSampler(topo.client_ns, "client", client_csv, path_of, t0=t0) as sc, \
                    SubflowSampler(topo.server_ns, "server", server_csv, path_of, t0=t0) as ss:
                # A byte count, not a duration: the transfer ends with everything delivered
                # and read, so no data is still on the wire when the receiving sockets close.
                proc = topo.run("client", ["iperf3", "-c", topo.server_addr, "-p", "5301",
                                           "-n", "12M", "-R", "-J"], wrap=MPTCP_WRAP,
                                capture_output=True, text=True, timeout=60)
                # Every subflow and iperf3's control connection is reported once more as it
                # is freed.
                wait_until(lambda: sc.destroyed >= 3 and ss.destroyed >= 2, 10,
                           "the samplers report the freed sockets")
            sampled_s = time.monotonic() - t0
            after = topo.path_bytes()
        finally:
            server.kill()
            server.wait()
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    got_iperf = result["end"]["sum_received"]["bytes"]
    assert sc.errors == [] and ss.errors == []
    assert sc._events.poll() is not None and ss._events.poll() is not None, "ss -E left running"
    # ~10 samples a second: at least 8 for each second of the transfer, no more than one per
    # 100 ms of sampling
    seconds = result["end"]["sum_received"]["seconds"]
    assert 8 * seconds <= sc.samples <= 10 * sampled_s + 1, (sc.samples, seconds, sampled_s)

    client = read_samples(client_csv)
    server_rows = read_samples(server_csv)
    data = [r for r in client if r["mptcp"] and r["path"] is not None]
    assert {r["path"] for r in data} == {0, 1}, "both subflows, on their own paths"
    times = sorted({r["t_s"] for r in client})
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert sorted(gaps)[len(gaps) // 2] == pytest.approx(0.1, abs=0.03)

    recv = binned_by_path(client, "bytes_received")
    per_path = {p: sum(b.values()) for p, b in recv.items()}
    # Both 15 Mbit/s paths carry a real share of the download.
    total = sum(per_path.values())
    assert all(v / total > 0.25 for v in per_path.values()), per_path
    # The sampled bytes cover what iperf3 counted, and a little more: the subflows also carried
    # the control connection and what sat unread in the receive buffer when iperf3 stopped ...
    assert got_iperf <= total <= got_iperf * 1.08, (total, got_iperf)
    # ... and each path's bytes are what crossed its client interface, less the headers: no
    # socket's last bytes are lost, however late before its close the last poll was. (A
    # retransmitted segment the client already had crosses the interface but adds nothing to
    # the socket's count: the server's retransmitted bytes on the path may add to the gap.)
    retrans = {p: sum(b.values()) for p, b in binned_by_path(server_rows, "bytes_retrans").items()}
    for p, v in per_path.items():
        rx = after[p]["rx_bytes"] - before[p]["rx_bytes"]
        packets = after[p]["rx_packets"] - before[p]["rx_packets"]
        gap = rx - v
        assert MIN_HEADER * packets <= gap <= MAX_HEADER * packets + retrans.get(p, 0), \
            (p, v, rx, packets, retrans)
        print(f"path {p}: {gap / packets:.2f} bytes a packet beyond the sampled payload")
    # The server side sees the same subflows, with RTTs near the paths' 10 ms round trip.
    srtts = [r["rtt_ms"] for r in server_rows if r["path"] is not None and r["rtt_ms"]
             and r["bytes_sent"] > 1_000_000]
    assert srtts and 8 <= sorted(srtts)[len(srtts) // 2] <= 80, srtts[:10]
