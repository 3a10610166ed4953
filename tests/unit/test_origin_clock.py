"""The stream's clock (server/origin/clock.py): held back by the encoder's drift behind the wall
clock, and only by that, on hand-worked arrivals of chunks."""

from datetime import UTC, datetime

import pytest

from mpstream.server.origin.clock import StreamClock

PART = 0.2


def clock_at(now: list[float]) -> StreamClock:
    return StreamClock(part_s=PART, window_s=2.0, wall=lambda: now[0])


def feed(clock: StreamClock, start: float, count: int, lag: float, every: float = PART
         ) -> float:
    """`count` chunks of `every` s from media time `start`, each seen `lag` s after it was due;
    returns the media time after the last."""
    for k in range(1, count + 1):
        due = 1000.0 + start + k * every
        clock.chunk_written(due, seen=due + lag)
    return start + count * every


def test_a_stream_that_keeps_up_has_the_wall_clock_whatever_lag_it_starts_with():
    now = [5000.0]
    clock = clock_at(now)
    # 0.7 s behind from the first chunk on (the encoder's delay, the MPD's start rounded):
    # that is no drift.
    feed(clock, 0.0, 50, lag=0.7)
    assert clock.drift_s == 0.0
    assert clock.now() == datetime.fromtimestamp(5000.0, UTC)
    assert clock.xsdate() == "1970-01-01T01:23:20.000+00:00"


def test_a_drift_holds_the_clock_back_by_it():
    now = [5000.0]
    clock = clock_at(now)
    t = feed(clock, 0.0, 20, lag=0.1)
    feed(clock, t, 20, lag=3.1)  # fell 3 s behind and stayed there
    assert clock.drift_s == pytest.approx(3.0)
    assert clock.now().timestamp() == pytest.approx(4997.0)


def test_one_late_chunk_does_not_move_the_clock():
    clock = clock_at([0.0])
    t = feed(clock, 0.0, 20, lag=0.1)
    t = feed(clock, t, 1, lag=2.0)  # held up once
    feed(clock, t, 3, lag=0.1)
    assert clock.drift_s == 0.0


def test_a_drift_under_a_part_is_left_alone_and_the_clock_moves_only_by_more():
    clock = clock_at([0.0])
    t = feed(clock, 0.0, 20, lag=0.1)
    t = feed(clock, t, 20, lag=0.25)  # 0.15 s: less than a part
    assert clock.drift_s == 0.0
    t = feed(clock, t, 20, lag=1.1)
    assert clock.drift_s == pytest.approx(1.0)
    t = feed(clock, t, 20, lag=1.25)  # 0.15 s more: not worth moving a player's clock for
    assert clock.drift_s == pytest.approx(1.0)
    feed(clock, t, 20, lag=0.1)  # caught up again
    assert clock.drift_s == 0.0
