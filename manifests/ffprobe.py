"""Thin ffprobe wrappers shared by the encoder (probing sources) and the validator."""

from __future__ import annotations

import bisect
import json
import shutil
import subprocess
from pathlib import Path


class ProbeError(RuntimeError):
    """ffprobe could not read the input."""


def ffprobe_path() -> str:
    path = shutil.which("ffprobe")
    if path is None:
        raise ProbeError("ffprobe not found on PATH (Debian package ffmpeg)")
    return path


def probe_json(args: list[str], *, stdin: bytes | None = None, timeout: float = 60) -> dict:
    """Run ffprobe with JSON output and return the parsed document."""
    cmd = [ffprobe_path(), "-v", "error", "-of", "json", *args]
    try:
        done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ProbeError(f"ffprobe timed out after {timeout:.0f} s") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise ProbeError(message[-1] if message else f"ffprobe exited {done.returncode}")
    return json.loads(done.stdout or b"{}")


def probe_media(path: Path) -> dict:
    """Format and streams of a media file."""
    return probe_json(["-show_format", "-show_streams", str(path)])


def segments_start_with_keyframe(header: bytes, segments: list[bytes]) -> list[bool | None]:
    """For each segment, whether its first video packet is a keyframe (None: it has no video
    packet at all).

    The segments are fed to ONE ffprobe as the stream a player would append (an fMP4 `header`
    = initialization segment, then the media segments; or MPEG-TS segments with an empty
    header), and each packet is attributed to a segment by its byte position. One process per
    representation instead of one per segment keeps validation fast.
    """
    starts, offset = [], len(header)
    for data in segments:
        starts.append(offset)
        offset += len(data)
    doc = probe_json(
        ["-select_streams", "v:0", "-show_entries", "packet=pos,flags", "-i", "pipe:0"],
        stdin=header + b"".join(segments), timeout=300,
    )
    first: list[bool | None] = [None] * len(segments)
    for packet in doc.get("packets", []):
        pos = int(packet.get("pos", -1))
        if pos < 0:
            continue
        index = bisect.bisect_right(starts, pos) - 1
        if index >= 0 and first[index] is None:
            first[index] = "K" in packet.get("flags", "")
    return first
