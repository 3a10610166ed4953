"""The HLS side of a media tree: write the master playlist, read playlists back with the m3u8
library."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import m3u8

AUDIO_GROUP = "audio"


@dataclass(frozen=True)
class Variant:
    """One line of the master playlist."""

    uri: str  # relative to the master, e.g. "360p/index.m3u8"
    peak_bandwidth: int  # bit/s, highest segment rate (BANDWIDTH)
    average_bandwidth: int  # bit/s over the whole presentation (AVERAGE-BANDWIDTH)
    width: int
    height: int
    codecs: str  # "avc1.64001e,mp4a.40.2"
    frame_rate: Fraction


def write_master(path: Path, variants: list[Variant], audio_uri: str | None = None) -> None:
    """The master playlist; with `audio_uri`, the audio is a rendition of its own (a CMAF
    tree's separate audio track) that every variant names."""
    lines = ["#EXTM3U", f"#EXT-X-VERSION:{6 if audio_uri else 3}", "#EXT-X-INDEPENDENT-SEGMENTS"]
    if audio_uri:
        lines.append(f'#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="{AUDIO_GROUP}",NAME="audio",'
                     f'DEFAULT=YES,AUTOSELECT=YES,URI="{audio_uri}"')
    for v in sorted(variants, key=lambda v: v.peak_bandwidth):
        lines.append(
            f"#EXT-X-STREAM-INF:BANDWIDTH={v.peak_bandwidth},"
            f"AVERAGE-BANDWIDTH={v.average_bandwidth},RESOLUTION={v.width}x{v.height},"
            f'CODECS="{v.codecs}",FRAME-RATE={float(v.frame_rate):.3f}'
            + (f',AUDIO="{AUDIO_GROUP}"' if audio_uri else "")
        )
        lines.append(v.uri)
    path.write_text("\n".join(lines) + "\n")


@dataclass(frozen=True)
class MediaSegment:
    path: Path
    duration: float


def load_media_playlist(path: Path) -> tuple[m3u8.M3U8, list[MediaSegment]]:
    playlist = m3u8.loads(path.read_text(), uri=str(path))
    segments = []
    for s in playlist.segments:
        if s.uri is None or s.duration is None:
            raise ValueError(f"{path}: a segment without a URI or without an #EXTINF duration")
        segments.append(MediaSegment(path.parent / s.uri, float(s.duration)))
    return playlist, segments


def segment_rates(segments: list[MediaSegment]) -> tuple[int, int]:
    """(peak, average) bit/s of a media playlist's segments, from their sizes on disk."""
    total_bytes = sum(s.path.stat().st_size for s in segments)
    total_time = sum(s.duration for s in segments)
    peak = max(s.path.stat().st_size * 8 / s.duration for s in segments if s.duration > 0)
    return round(peak), round(total_bytes * 8 / total_time)
