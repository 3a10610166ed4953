"""What a player is told about holding a live stream's latency: how far behind the live edge it
plays, and how it catches up when it drifted (docs/live.md). A trial decides it once
(runner/scenario.py's `Scenario.live_sync`), hands it to the page as parameters
(PlayRequest's `target_latency`, `catchup_max_rate`, `catchup_min_rate`, `max_drift`) and
keeps it in its record.

- `target_s`: hls.js `liveSyncDuration`, dash.js `delay.liveDelay`.
- `catchup_max_rate`: the fastest playback rate while behind the target: dash.js
  `liveCatchup.playbackRate.max` (as rate - 1); for hls.js the page's own catch-up
  (player/src/adapters/live.js: hls.js's controller speeds up only above a second of buffer).
- `catchup_min_rate`: the slowest while ahead of it: dash.js `liveCatchup.playbackRate.min`,
  the page's catch-up for hls.js.
- `max_drift_s`: how far past the target the player jumps to the live edge instead of catching
  up: dash.js `liveCatchup.maxDrift`, hls.js `liveMaxLatencyDuration` = target + this.

None is the page's default (player/src/adapters/: rates 1.25 and 0.75, a drift of the target
plus 2 s for hls.js, twice the target plus 2 s for dash.js; no target: each library's own).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The page's defaults where a LiveSync leaves a setting None (player/src/adapters/).
PAGE_MAX_RATE = 1.25
PAGE_MIN_RATE = 0.75


class LiveSync(BaseModel):
    """A player's live settings; see the module's docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target_s: float | None = Field(default=None, gt=0, le=600, description="how far behind "
                                   "the live edge the player plays (s); None: the library's "
                                   "default (the stream's own target)")
    catchup_max_rate: float | None = Field(default=None, ge=1, le=4, description="the fastest "
                                           "playback rate while behind the target (None: "
                                           f"{PAGE_MAX_RATE:g})")
    catchup_min_rate: float | None = Field(default=None, gt=0, le=1, description="dash.js: the "
                                           "slowest playback rate while ahead of the target "
                                           f"(None: {PAGE_MIN_RATE:g})")
    max_drift_s: float | None = Field(default=None, gt=0, le=600, description="how far past "
                                      "the target (s) the player jumps to the live edge "
                                      "(None: the page's default)")
