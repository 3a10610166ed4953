"""media.json: the record of what an encode produced, read by the server, runner and tests
without parsing manifests. Paths inside are relative to the media tree's root."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

MEDIA_JSON = "media.json"
HLS_MASTER = "hls/master.m3u8"
DASH_MANIFEST = "dash/manifest.mpd"


class RungRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    width: int
    height: int
    nominal_bitrate: int  # bit/s, what the ladder asked for (video only)
    codecs: dict[str, str]  # "avc"/"hevc" -> RFC 6381 string
    measured_bitrate: dict[str, int]  # mean video bit/s of the encode, per codec
    peak_bitrate: dict[str, int]  # highest DASH segment rate, per codec
    dash_representation: dict[str, str]  # per codec, the Representation@id in the MPD
    hls_playlist: str | None  # "hls/<rung>/index.m3u8" if the rung has an AVC encode
    segments: int


class AudioRecord(BaseModel):
    codecs: str
    bitrate: int
    dash_representation: str


class MediaRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: int = 1
    ladder: str
    source: str
    segment_duration: float
    duration: float
    frame_rate: float
    hls_master: str = HLS_MASTER
    dash_manifest: str = DASH_MANIFEST
    audio: AudioRecord
    rungs: list[RungRecord]


def write_media_record(root: Path, record: MediaRecord) -> Path:
    path = root / MEDIA_JSON
    path.write_text(json.dumps(record.model_dump(), indent=2) + "\n")
    return path


def read_media_record(root: Path) -> MediaRecord:
    return MediaRecord.model_validate_json((root / MEDIA_JSON).read_text())
