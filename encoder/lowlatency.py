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
from dataclasses import dataclass, replace
from fractions import Fraction

from mpstream.errors import UserError
from mpstream.manifests.dash import LowLatencyTiming

# The smallest latency target, in parts: a player must hold the part being written, the one
# it plays and one for the network (the HLS specification asks PART-HOLD-BACK to be at least
# three part targets).
MIN_TARGET_PARTS = 3
# The playback-rate bounds the MPD's ServiceDescription offers for catching up (dash.js reads
# them); hls.js is given the same upper bound.
PLAYBACK_RATE = (0.9, 1.1)
# An audio frame: AAC, 1024 samples at 48 kHz (encoder/commands.py). At 0.2 s parts the
# audio's are 10 frames, 0.213 s, longer than the video's.
AUDIO_FRAME_S = Fraction(1024, 48000)
# The network's round trip (s) a default target allows for beyond its three parts, where
# nothing says what the network is (`mpstream live` without --rtt).
DEFAULT_RTT_S = 0.1
# A part duration within this of a segment's whole fraction is taken as that fraction: 0.33 s
# is a third of a 1 s or 2 s segment, 0.17 s a sixth of 1 s.
PART_ROUNDING_S = 0.005


@dataclass(frozen=True)
class LowLatency:
    part_duration: float = 0.5
    # The latency to live the stream's manifests ask players to hold; None: three parts plus
    # the network's round trip (`rtt_s`).
    target_latency_s: float | None = None
    rtt_s: float = DEFAULT_RTT_S

    @property
    def target_s(self) -> float:
        if self.target_latency_s is not None:
            return self.target_latency_s
        return default_target_s(self.part_duration, self.rtt_s)

    def fitted(self, segment_s: float) -> LowLatency:
        """The same timing with the part made an exact fraction of the segment (0.33 -> 1/3
        of a 2 s segment), as the muxer and the playlists then use it; check_timing first."""
        parts = round(segment_s / self.part_duration)
        return replace(self, part_duration=segment_s / parts)

    def part_target(self, fps: Fraction) -> float:
        """The longest part of any rendition, as the LL-HLS PART-TARGET: the muxer closes a
        part at the first frame at or past the part duration, so a part is that duration
        rounded up to the video's frames, or to the audio's, whichever is longer."""
        video = math.ceil(self.part_duration * fps - 1e-9) / fps
        audio = math.ceil(self.part_duration / AUDIO_FRAME_S - 1e-9) * AUDIO_FRAME_S
        return float(max(video, audio))

    def mpd_timing(self, segment_s: float) -> LowLatencyTiming:
        """The MPD's timing: a segment's first part is there one part after it began."""
        return LowLatencyTiming(availability_offset_s=segment_s - self.part_duration,
                                target_s=self.target_s, min_rate=PLAYBACK_RATE[0],
                                max_rate=PLAYBACK_RATE[1])

    def muxer_options(self) -> dict[str, str]:
        """ffmpeg DASH muxer options that write each segment as chunks while it is encoded:
        a chunk every part (`frag_duration`, which also sets the MPD's availabilityTimeOffset,
        the segment less one part) and the ServiceDescription's target and rates."""
        return {"streaming": "1", "ldash": "1", "frag_type": "duration",
                "frag_duration": f"{self.part_duration:.6g}",
                "target_latency": f"{self.target_s:.6g}", "write_prft": "1",
                "min_playback_rate": f"{PLAYBACK_RATE[0]:g}",
                "max_playback_rate": f"{PLAYBACK_RATE[1]:g}"}


def default_target_s(part_s: float, rtt_s: float) -> float:
    """The latency target of a stream of `part_s` parts over a network of `rtt_s` round trip:
    three parts (the part being written, the one played, one in flight) plus the round trip a
    request for the next part takes."""
    return round(MIN_TARGET_PARTS * part_s + rtt_s, 6)


def check_timing(segment_s: float, low: LowLatency) -> None:
    """Segment duration, part duration and latency target, checked against each other; a
    UserError says which and what to give instead."""
    part = low.part_duration
    if not part > 0:
        raise UserError(f"--part-duration must be a positive number of seconds, got {part:g}")
    if not low.rtt_s >= 0:
        raise UserError(f"--rtt must be zero or more seconds, got {low.rtt_s:g}")
    if part > segment_s / 2 + 1e-9:
        raise UserError(f"--part-duration {part:g} s: a segment of {segment_s:g} s needs at "
                        f"least two parts; give at most {segment_s / 2:g} s")
    parts = max(2, round(segment_s / part))
    if abs(segment_s / parts - part) > PART_ROUNDING_S + 1e-9:
        fits = [f"{segment_s / n:.3g}" for n in range(2, 11) if (segment_s / n) >= 0.1]
        raise UserError(f"--part-duration {part:g} s does not divide the {segment_s:g} s "
                        f"segment into whole parts; give one of {', '.join(fits)}")
    smallest = MIN_TARGET_PARTS * segment_s / parts
    if low.target_s < smallest - 1e-6:
        raise UserError(f"target latency {low.target_s:g} s is below three parts of "
                        f"{part:g} s: give at least {smallest:.3g} s")
