"""Low-latency live (`mpstream live --low-latency`): the timing a low-latency stream is made
with, checked once, and what it asks of the encoders and of ffmpeg's DASH muxer.

One encode feeds both formats. ffmpeg's DASH muxer writes every segment as CMAF chunks (a
`moof` + `mdat` per part) into `NAME.tmp` as they are encoded and renames it when the segment
is complete; the origin (server/origin/) streams the growing file to DASH players with chunked
transfer and announces each chunk to HLS players as an LL-HLS part. The DASH muxer's own HLS
output is not used: ffmpeg 5.1 writes no `EXT-X-PART`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from mpstream.errors import UserError

# The smallest latency target, in parts: a player must hold the part being written, the one
# it plays and one for the network (the HLS specification asks PART-HOLD-BACK to be at least
# three part targets).
MIN_TARGET_PARTS = 3
# The playback-rate bounds the MPD's ServiceDescription offers for catching up (dash.js reads
# them); hls.js is given the same upper bound.
PLAYBACK_RATE = (0.9, 1.1)
DEFAULT_TARGET_S = 2.0


@dataclass(frozen=True)
class LowLatency:
    part_duration: float = 0.5
    target_latency_s: float | None = None  # None: DEFAULT_TARGET_S, or three parts if longer

    @property
    def target_s(self) -> float:
        if self.target_latency_s is not None:
            return self.target_latency_s
        return max(DEFAULT_TARGET_S, MIN_TARGET_PARTS * self.part_duration)

    def part_target(self, fps: Fraction) -> float:
        """The longest part, as the LL-HLS PART-TARGET: the muxer closes a part at the first
        frame at or past the part duration, so a part is that duration rounded up to frames."""
        return float(math.ceil(self.part_duration * fps - 1e-9) / fps)

    def muxer_options(self) -> dict[str, str]:
        """ffmpeg DASH muxer options that write each segment as chunks while it is encoded."""
        return {"streaming": "1", "ldash": "1", "frag_type": "duration",
                "frag_duration": f"{self.part_duration:g}",
                "target_latency": f"{self.target_s:g}", "write_prft": "1",
                "min_playback_rate": f"{PLAYBACK_RATE[0]:g}",
                "max_playback_rate": f"{PLAYBACK_RATE[1]:g}"}


def check_timing(segment_s: float, low: LowLatency) -> None:
    """Segment duration, part duration and latency target, checked against each other; a
    UserError says which and what to give instead."""
    part = low.part_duration
    if not part > 0:
        raise UserError(f"--part-duration must be a positive number of seconds, got {part:g}")
    if part > segment_s / 2 + 1e-9:
        raise UserError(f"--part-duration {part:g} s: a segment of {segment_s:g} s needs at "
                        f"least two parts; give at most {segment_s / 2:g} s")
    parts = segment_s / part
    if abs(parts - round(parts)) > 1e-6:
        fits = [f"{segment_s / n:g}" for n in range(2, 9) if (segment_s / n) >= 0.1]
        raise UserError(f"--part-duration {part:g} s does not divide the {segment_s:g} s "
                        f"segment into whole parts; give one of {', '.join(fits)}")
    smallest = MIN_TARGET_PARTS * part
    if low.target_s < smallest - 1e-9:
        raise UserError(f"target latency {low.target_s:g} s is below three parts of "
                        f"{part:g} s: give at least {smallest:g} s")

