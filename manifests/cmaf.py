"""The chunks of a CMAF segment, read while it is being written: each chunk ends with an `mdat`
(a `moof` + `mdat` pair, with the segment's `styp` and any `prft` before it belonging to the
chunk they precede). A chunk is one LL-HLS part and one step of a chunked DASH delivery."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mpstream.manifests.isobmff import BoxError, iter_boxes

_TFHD_DEFAULT_DURATION = 0x000008
_TFHD_BASE_OFFSET = 0x000001
_TFHD_DESCRIPTION = 0x000002
_TRUN_DATA_OFFSET = 0x000001
_TRUN_FIRST_FLAGS = 0x000004
_TRUN_DURATION = 0x000100
_TRUN_SIZE = 0x000200
_TRUN_FLAGS = 0x000400
_TRUN_CTO = 0x000800


@dataclass(frozen=True)
class Chunk:
    offset: int  # first byte in the segment
    size: int
    ticks: int  # its media duration, in the track's timescale


def read_chunks(data: bytes, start: int = 0) -> tuple[list[Chunk], int]:
    """The complete chunks in data[start:] and where the first incomplete one begins (the
    next call's `start`). Bytes of a box not yet fully written are left for later."""
    chunks: list[Chunk] = []
    chunk_start = pos = start
    ticks = 0
    while pos + 8 <= len(data):
        size, kind = struct.unpack_from(">I4s", data, pos)
        if size < 8:
            raise BoxError(f"box {kind!r} at offset {pos}: size {size} (64-bit and open-ended "
                           "boxes are not written by the packager)")
        if pos + size > len(data):
            break
        if kind == b"moof":
            ticks = moof_ticks(data, pos + 8, pos + size)
        pos += size
        if kind == b"mdat":
            chunks.append(Chunk(chunk_start, pos - chunk_start, ticks))
            chunk_start, ticks = pos, 0
    return chunks, chunk_start


def moof_ticks(data: bytes, start: int, end: int) -> int:
    """The media duration a `moof`'s (single) track fragment covers: the samples' durations
    from `trun`, or their count times `tfhd`'s default."""
    default = 0
    total = 0
    for kind, body, stop in iter_boxes(data, start, end):
        if kind != b"traf":
            continue
        for child, cbody, _cstop in iter_boxes(data, body, stop):
            flags = int.from_bytes(data[cbody + 1:cbody + 4], "big")
            if child == b"tfhd":
                default = _tfhd_default_duration(data, cbody + 8, flags)
            elif child == b"trun":
                total += _trun_ticks(data, cbody + 4, flags, default)
    return total


def _tfhd_default_duration(data: bytes, pos: int, flags: int) -> int:
    # after version/flags and track_ID: optional fields in this order
    pos += 8 if flags & _TFHD_BASE_OFFSET else 0
    pos += 4 if flags & _TFHD_DESCRIPTION else 0
    if not flags & _TFHD_DEFAULT_DURATION:
        return 0
    return int(struct.unpack_from(">I", data, pos)[0])


def _trun_ticks(data: bytes, pos: int, flags: int, default: int) -> int:
    (count,) = struct.unpack_from(">I", data, pos)
    pos += 4
    pos += 4 if flags & _TRUN_DATA_OFFSET else 0
    pos += 4 if flags & _TRUN_FIRST_FLAGS else 0
    if not flags & _TRUN_DURATION:
        return int(count * default)
    stride = 4 * sum(1 for bit in (_TRUN_DURATION, _TRUN_SIZE, _TRUN_FLAGS, _TRUN_CTO)
                     if flags & bit)
    return sum(struct.unpack_from(">I", data, pos + i * stride)[0] for i in range(count))


def track_timescale(init: bytes) -> int:
    """The timescale of the (single) track of an initialization segment (its `mdhd`)."""
    def find(start: int, end: int) -> int | None:
        for kind, body, stop in iter_boxes(init, start, end):
            if kind in (b"moov", b"trak", b"mdia"):
                found = find(body, stop)
                if found:
                    return found
            elif kind == b"mdhd":
                version = init[body]
                return int(struct.unpack_from(">I", init, body + (20 if version == 1 else 12))[0])
        return None

    scale = find(0, len(init))
    if not scale:
        raise BoxError("the initialization segment has no media header (mdhd) timescale")
    return scale
