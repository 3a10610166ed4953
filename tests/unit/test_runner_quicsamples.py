"""A trial over the QUIC hop gets its per-path figures from the hop's statistics lines, placed
on the paths by the client address each path was opened from."""

import json
import math

import pytest

from mpstream.runner.metrics.common import kernel_metrics
from mpstream.runner.metrics.evidence import write_clock
from mpstream.runner.record import PathLabel
from tests.records import trial_data

T0 = 1_800_000_000.0
PATHS = [PathLabel(index=0, name="p0", client_addr="10.1.0.2"),
         PathLabel(index=1, name="p1", client_addr="10.1.1.2")]


def _stat(side, path, t, rx=0, lost=0, rtt=20.0, local=None, tx=0):
    return {"side": side, "conn": 7, "path": path, "local": local, "t": T0 + t, "rtt_ms": rtt,
            "cwnd": 14720, "mtu": 1472, "udp_rx_bytes": rx, "udp_tx_bytes": tx,
            "lost_packets": lost, "lost_bytes": 1400 * lost}


def _write(tmp_path, name, lines):
    (tmp_path / name).write_text("".join(json.dumps(x) + "\n" for x in lines)
                                 + '{"cut short')  # a line a kill cut off is skipped


def test_per_path_figures_come_from_the_hop_when_the_trial_ran_over_quic(tmp_path):
    write_clock(tmp_path, 10.0, T0)
    # Path ids 0 and 1 from the two addresses; path 0 dies and is opened again as id 2. Path
    # 1's statistics do not name its address (established before the proxy recorded it): its
    # `opened` event does.
    _write(tmp_path, "quic-proxy.jsonl", [
        {"side": "proxy", "event": "opened", "conn": 7, "path": 1, "local": "10.1.1.2",
         "t": T0 + 0.1},
        _stat("proxy", 0, 1.0, rx=1000, local="10.1.0.2"),
        _stat("proxy", 1, 1.0, rx=500),
        _stat("proxy", 0, 2.0, rx=3000, local="10.1.0.2"),
        _stat("proxy", 1, 2.0, rx=4500),
        _stat("proxy", 2, 3.0, rx=2000, local="10.1.0.2"),
    ])
    _write(tmp_path, "quic-gateway.jsonl", [
        # The sender's RTT counts by what it sent since its previous line (a path's first line:
        # nothing), so path 0's is 12 ms.
        _stat("gateway", 0, 1.0, lost=0, rtt=10.0, tx=1000),
        _stat("gateway", 1, 1.0, lost=1, rtt=30.0, tx=500),
        _stat("gateway", 0, 2.0, lost=2, rtt=12.0, tx=3000),
        _stat("gateway", 1, 2.0, lost=1, rtt=30.0, tx=4500),
        _stat("gateway", 2, 3.0, lost=1, rtt=14.0, tx=2000),
    ])
    rec = trial_data(tmp_path, transport="mpquic", paths=PATHS, paths_in_use=[0, 1])
    assert {r["path"] for r in rec.path_samples("server")} == {0, 1}
    m = kernel_metrics(rec, 2)
    # path 0: 3000 + 2000 (the reopened path), path 1: 4500
    assert m["path0_bytes_share"] == pytest.approx(5000 / 9500)
    assert m["path1_mbytes"] == pytest.approx(0.0045)
    assert m["path0_rtt_ms"] == pytest.approx(12.0)
    assert m["path1_rtt_ms"] == pytest.approx(30.0)
    # 3 packets lost on path 0, 1 on path 1, over the gateway's 2 s of samples
    assert m["path0_retrans_per_s"] == pytest.approx(1.5)
    assert m["retrans_per_s"] == pytest.approx(2.0)
    assert rec.path_samples("server")[0]["cwnd"] == 10  # packets of the path's MTU


def test_one_path_quic_counts_on_the_path_in_use_and_tcp_keeps_the_kernel_samples(tmp_path):
    write_clock(tmp_path, 10.0, T0)
    _write(tmp_path, "quic-proxy.jsonl", [_stat("proxy", 0, 1.0, rx=800),
                                          _stat("proxy", 0, 2.0, rx=1600)])
    rec = trial_data(tmp_path, transport="quic", paths=PATHS, paths_in_use=[1])
    m = kernel_metrics(rec, 2)
    assert m["path1_bytes_share"] == 1.0 and m["path0_bytes_share"] == 0.0
    assert math.isnan(m["path1_rtt_ms"])  # no gateway lines: no sender RTT
    tcp = trial_data(tmp_path / "tcp", transport="tcp", paths=PATHS, paths_in_use=[0],
                     files={"samples-client": [], "samples-server": []})
    assert tcp.quic_samples is None and tcp.path_samples("client") == []
