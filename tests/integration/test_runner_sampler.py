"""The kernel sampler against a real MPTCP transfer over two emulated paths: it must see both
subflows, name their paths, and its byte counts must agree with iperf3's and, to the byte
within the packets' headers, with the interfaces'."""

import itertools
import socket

import pytest

from mpstream.runner.samplers.kernel import SubflowSampler, read_samples
from tests.sampledload import sampled_download
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

# What a received packet adds to the interface's byte counter beyond the TCP payload the socket
# counts: Ethernet 14 + IPv4 20 + TCP 20 bytes at least (an ARP frame, 42, has no payload either),
# at most 14 + 20 + 60 (TCP options: timestamps, SACK, MPTCP's DSS).
MIN_HEADER, MAX_HEADER = 42, 94


def test_sampler_sees_both_subflows_of_an_mptcp_download(tmp_path):
    got = sampled_download(tmp_path, "rsamp")
    result = got.iperf
    got_iperf = result["end"]["sum_received"]["bytes"]
    assert got.errors == []
    assert not got.sampler_left_running, "ss -E left running"
    # ~10 samples a second: at least 8 for each second of the transfer, no more than one per
    # 100 ms of sampling, the first at its start, and the closing poll at its stop
    seconds = result["end"]["sum_received"]["seconds"]
    assert 8 * seconds <= got.samples <= 10 * got.sampled_s + 2, (got.samples, seconds,
                                                                  got.sampled_s)

    client = got.client_rows
    data = [r for r in client if r["mptcp"] and r["path"] is not None]
    assert {r["path"] for r in data} == {0, 1}, "both subflows, on their own paths"
    times = sorted({r["t_s"] for r in client})
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert sorted(gaps)[len(gaps) // 2] == pytest.approx(0.1, abs=0.03)

    per_path = got.sampled_bytes()
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
    retrans = got.retransmitted()
    for p, beyond in got.bytes_a_packet().items():
        packets = got.interfaces[p]["rx_packets"]
        assert MIN_HEADER <= beyond <= MAX_HEADER + retrans.get(p, 0) / packets, \
            (p, beyond, got.interfaces[p], retrans)
        print(f"path {p}: {beyond:.2f} bytes a packet beyond the sampled payload")
    # The server side sees the same subflows, with RTTs near the paths' 10 ms round trip.
    srtts = [r["rtt_ms"] for r in got.server_rows if r["path"] is not None and r["rtt_ms"]
             and r["bytes_sent"] > 1_000_000]
    assert srtts and 8 <= sorted(srtts)[len(srtts) // 2] <= 80, srtts[:10]


def test_stopping_polls_the_sockets_still_open_once_more(tmp_path):
    # One poll an hour: the periodic poll runs once, before the connection exists, and the
    # socket is still open when the sampler stops, so no destroy event reports it either.
    out = tmp_path / "host.csv"
    sampler = SubflowSampler(None, "client", out, lambda ip: None, interval_s=3600).start()
    try:
        wait_until(lambda: sampler.samples >= 1, 10, "the first poll")
        with socket.create_server(("127.0.0.1", 0)) as listener, \
                socket.create_connection(listener.getsockname()) as client, \
                listener.accept()[0] as server:
            server.sendall(b"x" * PAYLOAD)
            got = 0
            while got < PAYLOAD:
                got += len(client.recv(65536))
            sampler.stop()
            host, port = client.getsockname()
            local = f"{host}:{port}"
    finally:
        sampler.stop()
    rows = [r for r in read_samples(out) if r["local"] == local]
    assert rows and rows[-1]["bytes_received"] == PAYLOAD, rows
    assert sampler.samples == 2 and sampler.errors == []


PAYLOAD = 1_000_000
