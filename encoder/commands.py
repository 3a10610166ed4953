"""The ffmpeg command lines, built as plain argument lists so they can be read and tested.

Stage 1 (`encode_command`): ONE ffmpeg process decodes the source once, splits the decoded
frames, scales once per rung, and feeds an x264 and an x265 encoder per rung plus one AAC
encoder; each writes an intermediate MP4. Stage 2 (`hls_command`, `dash_command`) only
repackages those streams (-c copy): the AVC encodes are shared by HLS and DASH.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from mpstream.encoder.ladder import CODECS, Ladder, Rung
from mpstream.encoder.sources import TONE, Source

ENCODER = {"avc": "libx264", "hevc": "libx265"}
_COMMON = ("-hide_banner", "-nostdin", "-y", "-v", "error")


@dataclass(frozen=True)
class Intermediate:
    """One encoded elementary stream on its way to the packagers."""

    kind: str  # "avc", "hevc" or "audio"
    rung: Rung | None  # None for audio
    path: Path

    @property
    def representation_id(self) -> str:
        return "audio" if self.rung is None else f"{self.kind}-{self.rung.name}"


def intermediates(ladder: Ladder, work: Path, with_audio: bool = True) -> list[Intermediate]:
    """Every stream stage 1 writes: per codec in ladder order, then the audio."""
    items = [
        Intermediate(codec, rung, work / f"{codec}-{rung.name}.mp4")
        for codec in CODECS
        for rung in ladder.rungs_for(codec)
    ]
    if with_audio:
        items.append(Intermediate("audio", None, work / "audio.mp4"))
    return items


def gop_frames(segment_duration: float, fps: Fraction) -> int:
    return max(1, math.ceil(segment_duration * fps - 1e-9))


def encode_command(
    ffmpeg: str, source: Source, ladder: Ladder, segment_duration: float, work: Path,
    with_audio: bool = True,
) -> list[str]:
    argv = [ffmpeg, *_COMMON, *source.input_args]
    audio_input = source.audio_map
    if audio_input is None and with_audio:
        # A source without sound still gets an audio track: players and the DASH audio set
        # expect one. The tone is the input after the source's.
        argv += ["-f", "lavfi", "-i", TONE]
        audio_input = "1:a:0"

    outputs = intermediates(ladder, work, with_audio)
    argv += ["-filter_complex", _filter_graph(ladder, source.fps)]
    gop = gop_frames(segment_duration, source.fps)
    # A keyframe exactly at every segment boundary, and none elsewhere (scene cuts off,
    # minimum GOP = GOP): every segment of every rung starts with an IDR of a closed GOP.
    force = f"expr:gte(t,n_forced*{segment_duration:g})"
    enc = ladder.encoding
    for item in outputs:
        argv += ["-t", f"{source.duration:.3f}"]
        if item.kind == "audio":
            argv += ["-map", audio_input, "-c:a", "aac", "-b:a", f"{enc.audio_bitrate_kbps}k",
                     "-ac", "2", "-ar", "48000", str(item.path)]
            continue
        rung = item.rung
        assert rung is not None
        rate = [
            "-b:v", f"{rung.bitrate_kbps}k",
            "-maxrate", f"{round(rung.bitrate_kbps * enc.peak_factor)}k",
            "-bufsize", f"{round(rung.bitrate_kbps * enc.buffer_seconds)}k",
        ]
        argv += ["-map", f"[{item.representation_id}]", "-c:v", ENCODER[item.kind], *rate,
                 "-force_key_frames", force, "-forced-idr", "1", "-g", str(gop)]
        if item.kind == "avc":
            argv += ["-preset", enc.avc_preset, "-keyint_min", str(gop), "-sc_threshold", "0",
                     "-flags", "+cgop"]
        else:
            params = f"keyint={gop}:min-keyint={gop}:scenecut=0:open-gop=0:log-level=error"
            argv += ["-preset", enc.hevc_preset, "-x265-params", params, "-tag:v", "hvc1"]
        argv += [str(item.path)]
    return argv


def _filter_graph(ladder: Ladder, fps: Fraction) -> str:
    """decode -> constant frame rate -> split per rung -> scale once -> split per codec."""
    rungs = ladder.rungs
    chains = [
        f"[0:v:0]fps={fps},format=yuv420p,split={len(rungs)}"
        + "".join(f"[r{i}]" for i in range(len(rungs)))
    ]
    for i, rung in enumerate(rungs):
        w, h = rung.width, rung.height
        # Letterbox instead of stretching when the source's aspect ratio differs.
        scale = (
            f"scale={w}:{h}:force_original_aspect_ratio=decrease:force_divisible_by=2,"
            f"pad={w}:{h}:(ow-iw)/2:(oh-ih)/2,setsar=1"
        )
        labels = "".join(f"[{codec}-{rung.name}]" for codec in rung.codecs)
        chains.append(f"[r{i}]{scale},split={len(rung.codecs)}{labels}")
    return ";".join(chains)


def hls_command(
    ffmpeg: str, items: list[Intermediate], segment_duration: float, hls_dir: Path
) -> list[str]:
    """Each AVC rung with the audio muxed in, cut into MPEG-TS segments at the keyframes."""
    video = [i for i in items if i.kind == "avc"]
    audio = next(i for i in items if i.kind == "audio")
    argv = [ffmpeg, *_COMMON]
    for item in [*video, audio]:
        argv += ["-i", str(item.path)]
    for index, item in enumerate(video):
        assert item.rung is not None
        rung_dir = hls_dir / item.rung.name
        argv += [
            "-map", f"{index}:v:0", "-map", f"{len(video)}:a:0", "-c", "copy",
            "-f", "hls", "-hls_time", f"{segment_duration:g}", "-hls_playlist_type", "vod",
            "-hls_segment_type", "mpegts", "-hls_flags", "independent_segments",
            "-hls_segment_filename", str(rung_dir / "seg_%05d.ts"),
            str(rung_dir / "index.m3u8"),
        ]
    return argv


def dash_command(
    ffmpeg: str, items: list[Intermediate], segment_duration: float, dash_dir: Path
) -> list[str]:
    """All representations into one MPD: AVC set, HEVC set, audio set. Representation i
    writes into directory `i/`; the pipeline renames them after their rung afterwards."""
    argv = [ffmpeg, *_COMMON]
    for item in items:
        argv += ["-i", str(item.path)]
    for index, _ in enumerate(items):
        argv += ["-map", f"{index}:0"]
    argv += ["-c", "copy"]
    for index, item in enumerate(items):
        if item.kind == "hevc":
            argv += [f"-tag:{index}", "hvc1"]
    sets = []
    for set_id, kind in enumerate(("avc", "hevc", "audio")):
        streams = ",".join(str(i) for i, item in enumerate(items) if item.kind == kind)
        sets.append(f"id={set_id},streams={streams}")
    argv += [
        "-f", "dash", "-seg_duration", f"{segment_duration:g}",
        "-use_template", "1", "-use_timeline", "1", "-dash_segment_type", "mp4",
        "-adaptation_sets", " ".join(sets),
        "-init_seg_name", "$RepresentationID$/init.$ext$",
        "-media_seg_name", "$RepresentationID$/seg_$Number%05d$.$ext$",
        str(dash_dir / "manifest.mpd"),
    ]
    return argv
