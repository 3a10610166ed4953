"""Codecs strings read from produced segments: an fMP4 initialization segment's sample entry,
or the H.264 sequence parameter set inside an MPEG-TS segment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from mpstream.manifests.codecs import CodecError, avc_codecs_from_annexb, codecs_of_entry
from mpstream.manifests.isobmff import read_sample_entries


def init_segment_codecs(path: Path) -> tuple[str, str]:
    """(sample entry fourcc, complete codecs string) of the single track of an init segment."""
    entries = read_sample_entries(path)
    if len(entries) != 1:
        raise CodecError(f"{path}: expected one sample entry, found {len(entries)}")
    return entries[0].fourcc, codecs_of_entry(entries[0])


def ts_video_codecs(path: Path) -> str:
    """avc1.PPCCLL of the H.264 stream in an MPEG-TS segment. ffmpeg copies the video out as
    an Annex B stream (no re-encode) and we read its SPS."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise CodecError("ffmpeg not found on PATH")
    done = subprocess.run(
        [ffmpeg, "-v", "error", "-nostdin", "-i", str(path), "-map", "0:v:0", "-c", "copy",
         "-frames:v", "1", "-f", "h264", "pipe:1"],
        capture_output=True, timeout=60,
    )
    if done.returncode != 0:
        raise CodecError(f"{path}: {done.stderr.decode(errors='replace').strip()}")
    return avc_codecs_from_annexb(done.stdout)
