"""RFC 6381 strings from decoder configuration records (ISO/IEC 14496-15 Annex E examples)."""

import pytest

from mpstream.manifests.codecs import (
    CodecError,
    aac_codecs,
    avc_codecs,
    avc_codecs_from_annexb,
    codec_family,
    hevc_codecs,
)


def _hvcc(byte1: int, compat: int, constraints: bytes, level: int) -> bytes:
    return bytes([1, byte1]) + compat.to_bytes(4, "big") + constraints + bytes([level]) + bytes(10)


def test_avc_string_is_profile_constraints_level_in_hex():
    avcc = bytes.fromhex("0164001fffe1")
    assert avc_codecs(avcc) == "avc1.64001f"
    assert avc_codecs(bytes.fromhex("01424015ff"), "avc3") == "avc3.424015"


def test_avc_from_annexb_finds_the_sps_after_other_nal_units():
    stream = (b"\x00\x00\x00\x01\x09\xf0"  # access unit delimiter
              + b"\x00\x00\x00\x01\x67\x4d\x40\x28\xaa"  # SPS: Main, level 4.0
              + b"\x00\x00\x01\x68\xce")
    assert avc_codecs_from_annexb(stream) == "avc1.4d4028"
    with pytest.raises(CodecError):
        avc_codecs_from_annexb(b"\x00\x00\x01\x68\xce\x00\x00\x01\x65\x88")


def test_hevc_main_profile_matches_the_spec_example():
    # Main profile, compatible with Main and Main 10 (flags 1 and 2), progressive + frame-only
    # constraint byte 0xB0, level 3.1 (93).
    assert hevc_codecs(_hvcc(0x01, 0x60000000, bytes([0xB0, 0, 0, 0, 0, 0]), 93)) == (
        "hvc1.1.6.L93.B0"
    )


def test_hevc_main10_high_tier_and_profile_space():
    hvcc = _hvcc(0x20 | 0x02, 0x20000000, bytes([0xB0, 0, 0, 0, 0, 0]), 153)
    assert hevc_codecs(hvcc) == "hvc1.2.4.H153.B0"
    spaced = _hvcc(0x40 | 0x01, 0x40000000, bytes([0x90, 0x12, 0, 0, 0, 0]), 120)
    assert hevc_codecs(spaced, "hev1") == "hev1.A1.2.L120.90.12"


def test_hevc_rejects_a_short_record():
    with pytest.raises(CodecError):
        hevc_codecs(b"\x01\x01\x60")


def test_aac_lc_from_an_esds_that_ffmpeg_wrote():
    esds = bytes.fromhex(
        "000000000380808025000100048080801740150000000001f2820001f2820580808005119056e500"
        "068080800102"
    )
    assert aac_codecs(esds) == "mp4a.40.2"


@pytest.mark.parametrize(
    ("codecs", "family"),
    [
        ("avc1.64001f", "avc"),
        ("hvc1.1.6.L93.B0", "hevc"),
        ("mp4a.40.2", "aac"),
        ("hvc1", None),  # what ffmpeg 5.1's DASH muxer writes: not enough to decide playback
        ("avc1", None),
        ("avc1.64", None),
        ("mp4a.40", None),
    ],
)
def test_only_complete_strings_have_a_family(codecs, family):
    assert codec_family(codecs) == family
