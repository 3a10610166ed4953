"""mpstream-linkem's queueing delays as it writes them (stats on exit, the per-window delay log),
through a real emulated path: pings that queue behind a burst at a slow rate."""

import json

import pytest

from tests.integration.test_netem_linkem_path import SERVER_ADDR, EmulatedPath

# 1 Mbit/s: a 1 000-byte packet takes 8 ms to serialize, and its sojourn counts that too, so of
# a burst of 20 sent at once the last leaves 20 × 8 = 160 ms after it came, the mean 84 ms.
RATE_BPS = 1_000_000


@pytest.fixture
def path(tmp_path):
    p = EmulatedPath(tmp_path)
    try:
        yield p
    finally:
        p.close()


def test_a_burst_queues_and_the_delays_are_written(path, tmp_path):
    log = tmp_path / "delays.jsonl"
    stats_path = path.start({"rate_bps": RATE_BPS, "queue_packets": 100}, {}, delay_log=str(log))
    # -l 20: all 20 echo requests leave at once (ping does not wait for the replies)
    r = path.run("client", "ping", "-n", "-q", "-c", "20", "-l", "20", "-s", "972", "-W", "2",
                 SERVER_ADDR, check=False)
    assert path.stop_emulator() == 0
    assert " 20 received" in r.stdout, r.stdout
    up = json.loads(stats_path.read_text())["a_to_b"]
    assert up["queue_delay_packets"] == up["packets_out"] == 20
    p50, p95, p99, top = (up[f"queue_delay_{k}_ms"] for k in ("p50", "p95", "p99", "max"))
    assert 0 <= p50 <= p95 <= p99 and top >= p95 * 0.9  # percentiles from the histogram
    assert 140 <= top <= 180, up  # the last of the burst waited for the 19 before it
    assert 70 <= up["queue_delay_mean_ms"] <= 100, up
    windows = [json.loads(line) for line in log.read_text().splitlines()]
    mine = [w for w in windows if w["dir"] == "a_to_b" and w["packets"]]
    assert sum(w["packets"] for w in mine) == 20
    assert max(w["max_ms"] for w in mine) == pytest.approx(top, abs=0.001)
    assert all(w["p50_ms"] <= w["p95_ms"] <= w["p99_ms"] for w in mine)
