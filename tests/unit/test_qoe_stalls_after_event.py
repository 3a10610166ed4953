"""The path-failure figure counts only stalls that began after the network event, placed on
the page's clock from the wall clock of the profile's t=0 and the session's play request."""

from datetime import UTC, datetime
from pathlib import Path

import pytest

from mpstream.qoe.metrics import stalls_after
from mpstream.runner.workloads.video import event_page_ms, video_metrics
from tests.records import trial_data


def ev(seq, t_ms, type_, **data):
    return {"seq": seq, "t_ms": t_ms, "type": type_, "data": data}


# Play request at page time 2000 ms (startup at 2500 after 500 ms); a stall at 6 s (before the
# failure), one at 24 s lasting 3 s and one at 30 s still open when the session ended at 33 s.
EVENTS = [
    ev(0, 2500, "startup", startup_delay_ms=500, manifest_ms=100, first_segment_ms=300,
       decode_ms=100, codec="avc1.64001f", width=640, height=360, bitrate=1e6),
    ev(1, 6000, "stall_start", position=3.0),
    ev(2, 7000, "stall_end", position=3.0, duration_ms=1000),
    ev(3, 24000, "stall_start", position=20.0),
    ev(4, 27000, "stall_end", position=20.0, duration_ms=3000),
    ev(5, 30000, "stall_start", position=23.0),
    ev(6, 33000, "end", reason="duration", position=23.0),
]  # fmt: skip


def test_stalls_after_a_page_time():
    assert stalls_after(EVENTS, 0) == {"count": 3, "ms": 7000.0, "longest_ms": 3000.0}
    assert stalls_after(EVENTS, 20_000) == {"count": 2, "ms": 6000.0, "longest_ms": 3000.0}
    assert stalls_after(EVENTS, 31_000) == {"count": 0, "ms": 0.0, "longest_ms": 0.0}


def record(at_s=20.0):
    play_request = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
    # the profile's t=0 came 1.5 s before the play request (browser start, page load)
    t0 = play_request.timestamp() - 1.5
    return trial_data(
        Path("/nonexistent"), "k", "single", events_started_unix=t0,
        files={"events": EVENTS, "session": {"started_at": play_request.isoformat()},
               "profile": {"events": [] if at_s is None
                           else [{"at_s": at_s, "path": 0, "action": "down"}]}})


def test_event_time_on_the_page_clock():
    # play request at page 2000 ms; the failure 20 s after t0 = 18.5 s after the play request
    assert event_page_ms(record()) == pytest.approx(2000 + 18_500)


def test_report_figures_count_only_stalls_after_the_failure():
    m = video_metrics(record())
    assert m["stall_count"] == 3 and m["longest_stall_ms"] == 3000
    assert m["stalls_after_event"] == 2
    assert m["stall_ms_after_event"] == pytest.approx(6000)
    assert m["longest_stall_after_event_ms"] == pytest.approx(3000)


def test_no_timed_event_no_after_figures():
    assert "stalls_after_event" not in video_metrics(record(at_s=None))
