"""Summaries against values computed by hand from docs/qoe-events.md's definitions."""

import math

import pytest

from mpstream.qoe.stats import describe
from mpstream.server import summary

SESSION = {
    "id": "s1", "player": "hlsjs", "transport": "mptcp", "protocol": "hls",
    "scenario": "bw", "trial": 0,
}  # fmt: skip


def ev(seq, t_ms, type_, **data):
    return {"seq": seq, "t_ms": t_ms, "type": type_, "data": data}


def seg(seq, t_ms, kind, nbytes, t_request, t_done, bitrate=1e6):
    return ev(seq, t_ms, "segment", url=f"/media/{seq}", kind=kind, bitrate=bitrate, bytes=nbytes,
              t_request=t_request, t_first_byte=t_request, t_done=t_done, index=seq,
              duration_s=2.0)  # fmt: skip


EVENTS = [
    ev(0, 100, "manifest", url="/m", t_request=50, t_done=100, bytes=900),
    seg(1, 200, "init", 1000, 150, 170),  # 1000 B in 20 ms = 400 kbit/s
    seg(2, 300, "video", 250_000, 170, 1170),  # 2 Mbit/s
    ev(3, 1000, "startup", startup_delay_ms=900, manifest_ms=50, first_segment_ms=1000,
       decode_ms=30, codec="avc1.64001f", width=640, height=360, bitrate=1e6),
    seg(4, 2000, "video", 500_000, 1200, 2200),  # 4 Mbit/s
    ev(5, 3000, "quality_switch", from_bitrate=1e6, to_bitrate=2e6, width=1280, height=720,
       codec="avc1.64001f"),
    ev(6, 4000, "stall_start", position=3.0),
    ev(7, 5000, "stall_end", position=3.0, duration_ms=1000),
    ev(8, 6000, "buffer", level_s=4.0, position=5.0),
    ev(9, 7000, "playback", position=6.0, dropped_frames=2, total_frames=150),
    # a first choice reported late: not a switch, the bitrate stays 2 Mbit/s
    ev(10, 8000, "quality_switch", from_bitrate=None, to_bitrate=2e6, width=1280, height=720,
       codec="avc1.64001f"),
    ev(11, 9000, "error", message="fragLoadError", fatal=False, code="net"),
    ev(12, 11000, "end", reason="ended", position=9.0),
    seg(13, 11000, "video", 10, 5000, 5000),  # no elapsed time: counted, but no rate
]  # fmt: skip


def test_summary_matches_hand_computed_values():
    s = summary.summarize(SESSION, EVENTS)
    assert s["startup_delay_ms"] == 900
    assert s["codec"] == "avc1.64001f"
    assert s["stall_count"] == 1
    assert s["stall_ms"] == 1000
    assert s["played_s"] == 9.0
    assert s["rebuffer_ratio"] == pytest.approx(1 / (1 + 9))
    # Video segments played (by index); every download of any kind is `downloads`.
    assert (s["segments"], s["downloads"]) == (3, 4)
    assert s["longest_stall_ms"] == 1000
    # Video segments only: the init segment's 400 kbit/s measures a round trip, not the path.
    assert s["segment_rates_bps"] == pytest.approx([2_000_000, 4_000_000])
    assert s["mean_download_rate_bps"] == pytest.approx(3_000_000)
    # 1 Mbit/s for 2000 ms, 2 Mbit/s for 5000 - 1000 (stall) + 3000 ms
    assert s["mean_bitrate_bps"] == pytest.approx((1e6 * 2000 + 2e6 * 7000) / 9000)
    assert s["switches"] == 1
    assert (s["dropped_frames"], s["total_frames"]) == (2, 150)
    assert s["errors"] == 1
    assert s["end_reason"] == "ended"
    assert (s["session"], s["transport"], s["trial"]) == ("s1", "mptcp", 0)


def test_open_stall_lasts_until_the_last_event():
    events = [
        ev(0, 1000, "startup", startup_delay_ms=500, manifest_ms=1, first_segment_ms=1,
           decode_ms=1, codec="avc1", width=1, height=1, bitrate=1e6),
        ev(1, 4000, "stall_start", position=2.0),
        ev(2, 6500, "buffer", level_s=0.0, position=2.0),
    ]  # fmt: skip
    s = summary.summarize(SESSION, events)
    assert s["stall_count"] == 1
    assert s["stall_ms"] == 2500
    assert s["rebuffer_ratio"] == pytest.approx(2.5 / (2.5 + 2.0))
    # played 3000 ms at 1 Mbit/s, then stalled
    assert s["mean_bitrate_bps"] == pytest.approx(1e6)


def test_empty_session_has_no_rates():
    s = summary.summarize(SESSION, [])
    assert s["segments"] == 0 and s["mean_download_rate_bps"] is None
    assert s["rebuffer_ratio"] is None and s["mean_bitrate_bps"] is None


def test_grouped_statistics_by_hand():
    base = summary.summarize(SESSION, EVENTS)
    rows = [
        {**base, "transport": "mptcp", "startup_delay_ms": 100.0},
        {**base, "transport": "mptcp", "startup_delay_ms": 200.0},
        {**base, "transport": "mptcp", "startup_delay_ms": 300.0},
        {**base, "transport": "tcp", "startup_delay_ms": 700.0},
    ]
    groups = summary.grouped(rows, ["transport"])
    assert [g["group"] for g in groups] == [{"transport": "mptcp"}, {"transport": "tcp"}]
    m = groups[0]["metrics"]["startup_delay_ms"]
    half = 4.302653 * 100 / math.sqrt(3)  # t(0.975, 2) · sd / √n
    assert m["n"] == 3 and m["mean"] == pytest.approx(200) and m["sd"] == pytest.approx(100)
    assert m["ci95_low"] == pytest.approx(200 - half, rel=1e-5)
    assert m["ci95_high"] == pytest.approx(200 + half, rel=1e-5)
    single = groups[1]["metrics"]["startup_delay_ms"]
    assert single == {"n": 1, "mean": 700.0, "sd": None, "ci95_low": None, "ci95_high": None}


def test_missing_metrics_are_not_counted():
    d = describe([None, 2.0, 4.0])
    assert d["n"] == 2 and d["mean"] == 3.0


def test_live_latency_mean_p95_and_played_span():
    live = [
        ev(0, 1000, "startup", startup_delay_ms=900, manifest_ms=50, first_segment_ms=500,
           decode_ms=30, codec="avc1.64001f", width=640, height=360, bitrate=1e6),
        *[ev(1 + i, 2000 + 1000 * i, "live_latency", latency_s=lat, target_s=4.0,
             playback_rate=1.0) for i, lat in enumerate([4.0, 5.0, 6.0, 3.0, 7.0])],
        # positions on the stream's timeline: playback started 100 s into the stream
        ev(6, 2000, "playback", position=100.0, dropped_frames=0, total_frames=25),
        ev(7, 12000, "end", reason="duration", position=110.0),
    ]  # fmt: skip
    s = summary.summarize(SESSION, live)
    assert s["live_latency_samples"] == 5
    assert s["live_latency_mean_s"] == pytest.approx(5.0)
    # sorted 3,4,5,6,7: rank 0.95 × 4 = 3.8 → 6 + 0.8 × (7 − 6)
    assert s["live_latency_p95_s"] == pytest.approx(6.8)
    assert s["played_s"] == pytest.approx(10.0)
    vod = summary.summarize(SESSION, EVENTS)
    assert vod["live_latency_samples"] == 0 and vod["live_latency_mean_s"] is None
    assert vod["played_s"] == 9.0
