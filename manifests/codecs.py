"""RFC 6381 `codecs` strings computed from the bitstream itself.

Players decide from these strings whether they can decode a representation before fetching
it (MediaSource.isTypeSupported), so a bare "hvc1" (what ffmpeg 5.1's DASH muxer writes) or a
guessed profile is not good enough: the string must say what the encoder actually produced.
"""

from __future__ import annotations

import re

from mpstream.manifests.isobmff import SampleEntry

COMPLETE_CODECS = {
    "avc": re.compile(r"^(avc1|avc3)\.[0-9A-Fa-f]{6}$"),
    "hevc": re.compile(
        r"^(hvc1|hev1)\.[ABC]?\d{1,2}\.[0-9A-Fa-f]{1,8}\.[LH]\d{1,3}(\.[0-9A-Fa-f]{1,2}){0,6}$"
    ),
    "aac": re.compile(r"^mp4a\.40\.\d{1,2}$"),
}


class CodecError(ValueError):
    """The decoder configuration cannot be turned into a codecs string."""


def codec_family(codecs: str) -> str | None:
    """"avc", "hevc" or "aac" for a complete codecs string, None if it is bare or unknown."""
    for family, pattern in COMPLETE_CODECS.items():
        if pattern.match(codecs):
            return family
    return None


def avc_codecs(avcc: bytes, fourcc: str = "avc1") -> str:
    """avc1.PPCCLL from an AVCDecoderConfigurationRecord (profile, constraint flags, level)."""
    if len(avcc) < 4 or avcc[0] != 1:
        raise CodecError("avcC record is too short or has an unknown version")
    return f"{fourcc}.{avcc[1]:02x}{avcc[2]:02x}{avcc[3]:02x}"


def avc_codecs_from_annexb(stream: bytes, fourcc: str = "avc1") -> str:
    """avc1.PPCCLL from the first sequence parameter set in an Annex B H.264 stream (the form
    MPEG-TS carries). The three bytes after the SPS NAL header are profile_idc,
    constraint flags and level_idc."""
    for match in re.finditer(b"\x00\x00\x01", stream):
        nal = match.end()
        if nal + 4 <= len(stream) and stream[nal] & 0x1F == 7:
            profile, constraints, level = stream[nal + 1 : nal + 4]
            return f"{fourcc}.{profile:02x}{constraints:02x}{level:02x}"
    raise CodecError("no H.264 sequence parameter set found in the stream")


def hevc_codecs(hvcc: bytes, fourcc: str = "hvc1") -> str:
    """hvc1.<space><profile>.<compat>.<tier><level>.<constraints> from an
    HEVCDecoderConfigurationRecord, following ISO/IEC 14496-15 Annex E: the 32 profile
    compatibility flags are written bit-reversed in hex, trailing zero constraint bytes
    are dropped."""
    if len(hvcc) < 13 or hvcc[0] != 1:
        raise CodecError("hvcC record is too short or has an unknown version")
    space = hvcc[1] >> 6
    tier = (hvcc[1] >> 5) & 1
    profile = hvcc[1] & 0x1F
    compat = int.from_bytes(hvcc[2:6], "big")
    compat_reversed = int(f"{compat:032b}"[::-1], 2)
    constraints = list(hvcc[6:12])
    while constraints and constraints[-1] == 0:
        constraints.pop()
    level = hvcc[12]
    parts = [
        fourcc,
        f"{'' if space == 0 else 'ABC'[space - 1]}{profile}",
        f"{compat_reversed:X}",
        f"{'H' if tier else 'L'}{level}",
        *(f"{b:X}" for b in constraints),
    ]
    return ".".join(parts)


def aac_codecs(esds: bytes) -> str:
    """mp4a.40.<audio object type> from an esds box payload."""
    pos = 4  # full box version and flags
    tag, pos, _ = _descriptor(esds, pos)
    if tag != 0x03:
        raise CodecError("esds does not start with an ES descriptor")
    flags = esds[pos + 2]
    pos += 3
    if flags & 0x80:
        pos += 2  # dependsOn_ES_ID
    if flags & 0x40:
        pos += 1 + esds[pos]  # URL
    if flags & 0x20:
        pos += 2  # OCR_ES_Id
    tag, pos, _ = _descriptor(esds, pos)
    if tag != 0x04:
        raise CodecError("esds has no decoder config descriptor")
    object_type = esds[pos]
    pos += 13
    tag, pos, _ = _descriptor(esds, pos)
    if tag != 0x05 or object_type != 0x40:
        raise CodecError("esds does not describe MPEG-4 audio")
    audio_object_type = esds[pos] >> 3
    return f"mp4a.40.{audio_object_type}"


def _descriptor(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, payload start, payload length) of an MPEG-4 descriptor with its 1-4 byte size."""
    try:
        tag = data[pos]
        pos += 1
        length = 0
        for _ in range(4):
            byte = data[pos]
            pos += 1
            length = (length << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
    except IndexError as exc:
        raise CodecError("esds is truncated") from exc
    return tag, pos, length


def codecs_of_entry(entry: SampleEntry) -> str:
    """The complete codecs string of one MP4 sample entry."""
    if entry.fourcc in ("avc1", "avc3") and "avcC" in entry.config:
        return avc_codecs(entry.config["avcC"], entry.fourcc)
    if entry.fourcc in ("hvc1", "hev1") and "hvcC" in entry.config:
        return hevc_codecs(entry.config["hvcC"], entry.fourcc)
    if entry.fourcc == "mp4a" and "esds" in entry.config:
        return aac_codecs(entry.config["esds"])
    raise CodecError(f"sample entry {entry.fourcc!r} has no decoder configuration we can read")
