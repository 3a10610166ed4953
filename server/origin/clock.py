"""The stream's clock: the wall clock, less how far the encoder has drifted behind it.

dash.js places the live edge by the clock the MPD's UTCTiming names, and asks for the segment
that clock says is being written. An encoder that cannot keep up with real time on a loaded
machine falls behind it a little at a time (about 12 s in 69 minutes on two cores shared with a
browser and the emulation, docs/live.md), and from then on dash.js asks for segments that are
seconds from being written, is refused them, and never starts. hls.js follows the playlist's own
list and is not affected. So the origin answers the clock itself, held back by the drift: the
live edge dash.js places by it is one that exists, and the latency it reports is behind that
edge, as hls.js's is.

The drift is measured from the chunks as they are written: each one's lag is the time it was
seen less the time its last frame was due (availabilityStartTime plus its media time). The lag a
stream starts with (the encoder's delay, the MPD's rounding of its start) is no drift: what
counts is how far the lag of the last two segments has risen above the least lag seen since the
stream began. Taking the least of the recent lags, not the last one, keeps a chunk held up once
from moving the clock; a drift smaller than a part is left alone, and the clock moves again only
when the drift has changed by more than a part, so a player's clock is not moved for nothing.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from datetime import UTC, datetime

log = logging.getLogger(__name__)


class StreamClock:
    def __init__(self, part_s: float, window_s: float, wall=time.time):
        self.part_s, self.window_s, self.wall = part_s, window_s, wall
        self.least_lag: float | None = None  # the least lag since the stream began
        self.recent: deque[tuple[float, float]] = deque()  # (seen at, lag) in the window
        self.drift_s = 0.0  # what the clock is held back by

    def chunk_written(self, due: float, seen: float | None = None) -> None:
        """A chunk whose last frame was due at `due` (Unix time) was seen at `seen` (now)."""
        seen = self.wall() if seen is None else seen
        lag = seen - due
        self.least_lag = lag if self.least_lag is None else min(self.least_lag, lag)
        self.recent.append((seen, lag))
        while self.recent and self.recent[0][0] < seen - self.window_s:
            self.recent.popleft()
        drift = min(lag for _, lag in self.recent) - self.least_lag
        drift = drift if drift > self.part_s else 0.0
        if abs(drift - self.drift_s) > self.part_s:
            log.info("the encoder is %.2f s behind the wall clock (least %.2f s): the stream's "
                     "clock is held back by %.2f s, was %.2f s", lag, self.least_lag, drift,
                     self.drift_s)
            self.drift_s = drift

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.wall() - self.drift_s, UTC)

    def xsdate(self) -> str:
        """The clock as DASH's urn:mpeg:dash:utc:http-xsdate:2014 has it, with milliseconds,
        as nginx answers the wall clock (server/nginx.conf.j2)."""
        return self.now().isoformat(timespec="milliseconds")
