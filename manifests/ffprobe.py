"""Thin ffprobe wrappers shared by the encoder (probing sources) and the validator."""

from __future__ import annotations

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


def first_video_packet_is_key(data: bytes) -> bool:
    """Whether the first video packet of a segment (bytes of a TS segment, or of an fMP4
    initialization segment followed by a media segment) is a keyframe."""
    doc = probe_json(
        ["-select_streams", "v:0", "-show_entries", "packet=flags,pts_time",
         "-read_intervals", "%+#1", "-i", "pipe:0"],
        stdin=data,
    )
    packets = doc.get("packets", [])
    if not packets:
        raise ProbeError("no video packet found")
    return "K" in packets[0].get("flags", "")
