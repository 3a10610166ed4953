"""The kernel sampler against a real MPTCP transfer over two emulated paths: it must see both
subflows, name their paths, and its byte counts must agree with iperf3's and the interfaces'."""

import itertools
import json
import subprocess
import time

import pytest

from mpstream.netem.profile import load_profile
from mpstream.netem.topology import Topology
from mpstream.runner.metrics import binned_by_path
from mpstream.runner.sampler import SubflowSampler, read_samples

pytestmark = pytest.mark.timeout(120)


def test_sampler_sees_both_subflows_of_an_mptcp_download(tmp_path):
    profile = load_profile("thesis-bandwidth-balanced")
    with Topology.up(profile, name="rsamp") as topo:
        path_of = {p.client_addr: p.index for p in topo.paths}.get
        server = topo.popen("server", ["iperf3", "-s", "-1", "-p", "5301"], mptcp=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            before = topo.path_bytes()
            t0 = time.monotonic()
            client_csv, server_csv = tmp_path / "c.csv", tmp_path / "s.csv"
            with SubflowSampler(topo.client_ns, "client", client_csv, path_of, t0=t0) as sc, \
                    SubflowSampler(topo.server_ns, "server", server_csv, path_of, t0=t0) as ss:
                proc = topo.run("client", ["iperf3", "-c", topo.server_addr, "-p", "5301",
                                           "-t", "4", "-R", "-J"], mptcp=True,
                                capture_output=True, text=True, timeout=60)
                time.sleep(0.3)
            after = topo.path_bytes()
        finally:
            server.kill()
            server.wait()
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    got_iperf = result["end"]["sum_received"]["bytes"]
    assert sc.errors == [] and ss.errors == []
    # ~10 samples a second for ~4.3 s
    assert 30 <= sc.samples <= 50, sc.samples

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
    # The sampled bytes match what iperf3 counted (the last <100 ms and the control
    # connection's few bytes aside) and what crossed the client interfaces (headers aside).
    assert total == pytest.approx(got_iperf, rel=0.08)
    for p, v in per_path.items():
        rx = after[p]["rx_bytes"] - before[p]["rx_bytes"]
        assert v == pytest.approx(rx, rel=0.1), (p, v, rx)
    # The server side sees the same subflows, with RTTs near the paths' 10 ms round trip.
    srtts = [r["rtt_ms"] for r in server_rows if r["path"] is not None and r["rtt_ms"]
             and r["bytes_sent"] > 1_000_000]
    assert srtts and 8 <= sorted(srtts)[len(srtts) // 2] <= 80, srtts[:10]
