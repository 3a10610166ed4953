"""LL-HLS media playlists (the HLS specification, RFC 8216bis: EXT-X-PART-INF, EXT-X-PART,
EXT-X-SERVER-CONTROL, EXT-X-PRELOAD-HINT): the segments of a sliding window, with the parts of
the recent ones and of the segment being written, as the origin serves them on each request,
and read back (`MediaPlaylist.parse`) by whatever needs the live edge of one it was given."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import m3u8

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
    starts_at: datetime | None  # EXT-X-PROGRAM-DATE-TIME (the origin always writes it)
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

    @classmethod
    def parse(cls, text: str) -> MediaPlaylist:
        """A media playlist's text read back: any valid LL-HLS media playlist, also one whose
        first segment is still being written (parts and no #EXTINF yet), which is what a viewer
        joining a stream in its first seconds receives."""
        parsed = m3u8.loads(text)
        part_target = getattr(parsed.part_inf, "part_target", None)  # m3u8: {} when absent
        if part_target is None:
            raise ValueError("not an LL-HLS media playlist: no #EXT-X-PART-INF:PART-TARGET")
        if parsed.target_duration is None:
            raise ValueError("not a media playlist: no #EXT-X-TARGETDURATION")
        listed = list(parsed.segments)
        # The parts after the last #EXTINF are the open segment's: m3u8 reads them as a
        # segment without a URI.
        open_parts = listed.pop().parts if listed and listed[-1].uri is None else []
        first = parsed.media_sequence or 0
        segments = []
        for i, s in enumerate(listed):
            if s.uri is None or s.duration is None:
                raise ValueError("a segment without a URI or an #EXTINF duration")
            segments.append(Segment(msn=first + i, uri=s.uri, duration=float(s.duration),
                                    starts_at=s.program_date_time, parts=_parts(s.parts)))
        control = parsed.server_control
        return cls(
            map_uri=(parsed.segment_map[0].uri or "") if parsed.segment_map else "",
            target_duration=float(parsed.target_duration),
            part_target=float(part_target),
            part_hold_back=float(control.part_hold_back or 0.0) if control else 0.0,
            segments=tuple(segments), open_msn=first + len(segments),
            open_parts=_parts(open_parts),
            preload_hint=parsed.preload_hint.uri if parsed.preload_hint else None,
            ended=bool(parsed.is_endlist))

    @property
    def edge(self) -> tuple[int, int]:
        """The live edge: (the segment being written, how many of its parts are listed)."""
        return self.open_msn, len(self.open_parts)

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
            if segment.starts_at is not None:
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


def _parts(parts: Iterable[m3u8.PartialSegment]) -> tuple[Part, ...]:
    read = []
    for p in parts:
        if p.uri is None or p.duration is None:
            raise ValueError("an #EXT-X-PART without a URI or a DURATION")
        read.append(Part(uri=p.uri, duration=float(p.duration), independent=p.independent == "YES"))
    return tuple(read)


def _part_line(part: Part) -> str:
    return (f'#EXT-X-PART:DURATION={part.duration:.5f},URI="{part.uri}"'
            + (",INDEPENDENT=YES" if part.independent else ""))


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
