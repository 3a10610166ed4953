"""LL-HLS media playlists (the HLS specification, RFC 8216bis: EXT-X-PART-INF, EXT-X-PART,
EXT-X-SERVER-CONTROL, EXT-X-PRELOAD-HINT): the segments of a sliding window, with the parts of
the recent ones and of the segment being written, as the origin serves them on each request."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

# Parts are listed for the segments of the last this-many target durations (the specification:
# parts older than that SHOULD be removed), and always for the segment being written.
PARTS_KEPT_TARGETS = 3


@dataclass(frozen=True)
class Part:
    uri: str
    duration: float
    independent: bool  # starts with a key frame (the segment's first part)


@dataclass(frozen=True)
class Segment:
    msn: int
    uri: str
    duration: float
    starts_at: datetime  # EXT-X-PROGRAM-DATE-TIME
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class MediaPlaylist:
    map_uri: str
    target_duration: float  # the segments' nominal duration
    part_target: float
    part_hold_back: float
    segments: tuple[Segment, ...]  # complete ones, oldest first
    open_msn: int  # the segment being written (its parts follow the last segment)
    open_parts: tuple[Part, ...] = ()
    preload_hint: str | None = None  # the next part's URI
    ended: bool = False

    def text(self) -> str:
        first = self.segments[0].msn if self.segments else self.open_msn
        lines = [
            "#EXTM3U", "#EXT-X-VERSION:9",
            f"#EXT-X-TARGETDURATION:{math.ceil(self.target_duration - 1e-9)}",
            f"#EXT-X-PART-INF:PART-TARGET={self.part_target:.3f}",
            "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,"
            f"PART-HOLD-BACK={self.part_hold_back:.3f}",
            f"#EXT-X-MEDIA-SEQUENCE:{first}", "#EXT-X-INDEPENDENT-SEGMENTS",
            f'#EXT-X-MAP:URI="{self.map_uri}"',
        ]
        kept_from = len(self.segments) - PARTS_KEPT_TARGETS  # a segment a target duration
        for i, segment in enumerate(self.segments):
            lines.append(f"#EXT-X-PROGRAM-DATE-TIME:{_iso(segment.starts_at)}")
            if i >= kept_from and not self.ended:
                lines += [_part_line(p) for p in segment.parts]
            lines += [f"#EXTINF:{segment.duration:.5f},", segment.uri]
        if self.ended:
            lines.append("#EXT-X-ENDLIST")
        else:
            lines += [_part_line(p) for p in self.open_parts]
            if self.preload_hint:
                lines.append(f'#EXT-X-PRELOAD-HINT:TYPE=PART,URI="{self.preload_hint}"')
        return "\n".join(lines) + "\n"

    def lists(self, msn: int, part: int | None) -> bool:
        """Whether this playlist holds segment `msn` (complete), or its part `part`: what a
        blocking reload with _HLS_msn and _HLS_part waits for."""
        last_complete = self.segments[-1].msn if self.segments else self.open_msn - 1
        if msn <= last_complete or self.ended:
            return True
        return part is not None and msn == self.open_msn and part < len(self.open_parts)


def _part_line(part: Part) -> str:
    return (f'#EXT-X-PART:DURATION={part.duration:.5f},URI="{part.uri}"'
            + (",INDEPENDENT=YES" if part.independent else ""))


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
