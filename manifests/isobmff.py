"""Just enough ISO-BMFF (MP4) box walking to read a track's sample entry and its decoder
configuration (avcC, hvcC, esds) from a DASH initialization segment."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Boxes that are plain containers of other boxes on the way to the sample description.
_CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl"}
# Bytes between a sample entry's header and its child boxes (ISO/IEC 14496-12 8.5.2):
# visual entries carry 78 bytes of fixed fields, audio entries 28.
_SAMPLE_ENTRY_FIELDS = {"video": 78, "audio": 28}
_VIDEO_ENTRIES = {b"avc1", b"avc3", b"hvc1", b"hev1"}
_AUDIO_ENTRIES = {b"mp4a"}


class BoxError(ValueError):
    """The bytes are not the MP4 structure we expected."""


@dataclass(frozen=True)
class SampleEntry:
    fourcc: str  # e.g. "avc1", "hvc1", "mp4a"
    config: dict[str, bytes]  # child box type -> payload, e.g. {"avcC": b"..."}


def iter_boxes(
    data: bytes, start: int = 0, end: int | None = None
) -> Iterator[tuple[bytes, int, int]]:
    """Yield (type, payload_start, payload_end) for each box in data[start:end]."""
    end = len(data) if end is None else end
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, pos)
        header = 8
        if size == 1:
            if pos + 16 > end:
                raise BoxError("truncated 64-bit box header")
            (size,) = struct.unpack_from(">Q", data, pos + 8)
            header = 16
        elif size == 0:
            size = end - pos
        if size < header or pos + size > end:
            raise BoxError(f"box {kind!r} at offset {pos} overruns its parent")
        yield kind, pos + header, pos + size
        pos += size


def sample_entries(data: bytes) -> list[SampleEntry]:
    """The sample entries of every track in an MP4 (initialization segment or whole file)."""
    found: list[SampleEntry] = []

    def walk(start: int, end: int) -> None:
        for kind, body, stop in iter_boxes(data, start, end):
            if kind in _CONTAINERS:
                walk(body, stop)
            elif kind == b"stsd":
                # full box header (4) + entry count (4), then the entries
                for entry, ebody, estop in iter_boxes(data, body + 8, stop):
                    found.append(_read_entry(data, entry, ebody, estop))

    walk(0, len(data))
    return found


def _read_entry(data: bytes, kind: bytes, body: int, end: int) -> SampleEntry:
    if kind in _VIDEO_ENTRIES:
        skip = _SAMPLE_ENTRY_FIELDS["video"]
    elif kind in _AUDIO_ENTRIES:
        skip = _SAMPLE_ENTRY_FIELDS["audio"]
    else:
        return SampleEntry(kind.decode("latin-1"), {})
    config = {
        child.decode("latin-1"): data[cbody:cstop]
        for child, cbody, cstop in iter_boxes(data, body + skip, end)
    }
    return SampleEntry(kind.decode("latin-1"), config)


def read_sample_entries(path: Path) -> list[SampleEntry]:
    try:
        return sample_entries(path.read_bytes())
    except (BoxError, struct.error) as exc:
        raise BoxError(f"{path}: {exc}") from exc
