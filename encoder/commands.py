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
from mpstream.encoder.lowlatency import LowLatency
from mpstream.encoder.sources import TONE, LiveSource, Source

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
    for item in outputs:
        argv += ["-t", f"{source.duration:.3f}"]
        argv += _stream_args(item, ladder, segment_duration, source.fps, audio_input)
        argv += [str(item.path)]
    return argv


def _stream_args(item: Intermediate, ladder: Ladder, segment_duration: float, fps: Fraction,
                 audio_input: str | None, index: int | None = None,
                 flags: str = "", zero_latency: bool = False) -> list[str]:
    """-map and encoder options of one rendition. An encode writes one rendition per file;
    live puts them all in one output, so there `index` (the output stream) qualifies every
    option."""
    kind = "a" if item.kind == "audio" else "v"

    def opt(name: str, typed: bool = False) -> str:
        if index is not None:
            return f"-{name}:{index}"
        return f"-{name}:{kind}" if typed else f"-{name}"

    enc = ladder.encoding
    if item.kind == "audio":
        argv = ["-map", str(audio_input), opt("c", True), "aac",
                opt("b", True), f"{enc.audio_bitrate_kbps}k", opt("ac"), "2", opt("ar"), "48000"]
        return argv + ([opt("flags"), flags] if flags else [])
    gop = gop_frames(segment_duration, fps)
    # A keyframe exactly at every segment boundary, and none elsewhere (scene cuts off,
    # minimum GOP = GOP): every segment of every rung starts with an IDR of a closed GOP.
    force = f"expr:gte(t,n_forced*{segment_duration:g})"
    rung = item.rung
    assert rung is not None
    argv = [
        "-map", f"[{item.representation_id}]", opt("c", True), ENCODER[item.kind],
        opt("b", True), f"{rung.bitrate_kbps}k",
        opt("maxrate"), f"{round(rung.bitrate_kbps * enc.peak_factor)}k",
        opt("bufsize"), f"{round(rung.bitrate_kbps * enc.buffer_seconds)}k",
        opt("force_key_frames"), force, opt("forced-idr"), "1", opt("g"), str(gop),
    ]
    if zero_latency:
        # Low-latency live: each frame leaves the encoder as soon as it is encoded (no
        # lookahead, no frames held by frame threads), so a part is written on time.
        argv += [opt("tune"), "zerolatency"]
    if item.kind == "avc":
        argv += [opt("preset"), enc.avc_preset, opt("keyint_min"), str(gop),
                 opt("sc_threshold"), "0", opt("flags"), "+cgop" + flags]
    else:
        params = f"keyint={gop}:min-keyint={gop}:scenecut=0:open-gop=0:log-level=error"
        argv += [opt("preset"), enc.hevc_preset, opt("x265-params"), params,
                 opt("tag", True), "hvc1"]
        argv += [opt("flags"), flags] if flags else []
    return argv


def _filter_graph(ladder: Ladder, fps: Fraction, overlay: str = "") -> str:
    """decode -> constant frame rate [-> overlay] -> split per rung -> scale once -> split per
    codec. `overlay` is a filter drawn once on the full-size picture (the live clock)."""
    rungs = ladder.rungs
    chains = [
        f"[0:v:0]fps={fps},format=yuv420p,{overlay + ',' if overlay else ''}split={len(rungs)}"
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


@dataclass(frozen=True)
class LiveLayout:
    """Where a live ffmpeg writes, relative to the live tree (ffmpeg runs inside it, which
    keeps the tee muxer's option strings free of path characters it would need escaped)."""

    stamp: str  # start time in every segment name: a restarted stream never reuses a URL
    ffmpeg_mpd: str = "dash/ffmpeg.mpd"  # ffmpeg's own MPD; the published one is manifest.mpd

    def hls_playlist(self, rung: Rung) -> str:
        return f"hls/{rung.name}/index.m3u8"

    def hls_segments(self, rung: Rung) -> str:
        return f"hls/{rung.name}/{self.stamp}-%05d.ts"

    @property
    def dash_init(self) -> str:
        return f"{self.stamp}-init-$RepresentationID$.$ext$"

    @property
    def dash_media(self) -> str:
        return f"{self.stamp}-$RepresentationID$-$Number%05d$.$ext$"


def live_command(
    ffmpeg: str, source: LiveSource, ladder: Ladder, segment_duration: float,
    layout: LiveLayout, window: int, keep: int, utc_timing_url: str,
    low_latency: LowLatency | None = None,
) -> list[str]:
    """ONE ffmpeg process for a live ladder: the source decoded once, every rung encoded once
    per codec, and the tee muxer hands the same packets to one HLS muxer per AVC rung (with the
    audio) and to one DASH muxer (all streams). Playlists/MPD list `window` segments; `keep`
    more stay on disk for players that fetched a playlist just before it moved on. Both
    muxers write a segment to a temporary name and rename it when complete. With
    `low_latency` only the DASH muxer runs, writing each segment in chunks as it is encoded
    (encoder/lowlatency.py); the HLS side is made from its segments."""
    argv = [ffmpeg, *_COMMON, *source.input_args]
    audio_input = source.audio_map
    if audio_input is None:
        argv += ["-re", "-f", "lavfi", "-i", TONE]
        audio_input = f"{source.input_args.count('-i')}:a:0"
    argv += ["-filter_complex", _filter_graph(ladder, source.fps, source.overlay)]
    items = intermediates(ladder, Path("."))
    # Global headers: the MP4 (DASH) side needs the parameter sets out of band; the MPEG-TS
    # muxer puts them back in front of every keyframe.
    for index, item in enumerate(items):
        argv += _stream_args(item, ladder, segment_duration, source.fps, audio_input,
                             index=index, flags="+global_header",
                             zero_latency=low_latency is not None)
    audio_index = len(items) - 1
    slaves = []
    for index, item in enumerate(items):
        if item.kind != "avc" or item.rung is None or low_latency is not None:
            continue
        slaves.append(_tee_slave({
            "select": f"{index},{audio_index}", "f": "hls",
            "hls_time": f"{segment_duration:g}", "hls_list_size": str(window),
            "hls_delete_threshold": str(max(1, keep)),
            "hls_flags": "delete_segments+temp_file+independent_segments+program_date_time",
            "hls_segment_type": "mpegts",
            "hls_segment_filename": layout.hls_segments(item.rung),
        }, layout.hls_playlist(item.rung)))
    sets = " ".join(
        f"id={set_id},streams={','.join(str(i) for i, it in enumerate(items) if it.kind == kind)}"
        for set_id, kind in enumerate(("avc", "hevc", "audio"))
    )
    slaves.append(_tee_slave({
        "f": "dash", "seg_duration": f"{segment_duration:g}", "window_size": str(window),
        "extra_window_size": str(keep), "use_template": "1", "use_timeline": "0",
        "streaming": "0", "remove_at_exit": "0", "dash_segment_type": "mp4",
        "utc_timing_url": utc_timing_url, "adaptation_sets": sets,
        "init_seg_name": layout.dash_init, "media_seg_name": layout.dash_media,
        **(low_latency.muxer_options() if low_latency else {}),
    }, layout.ffmpeg_mpd))
    # onfail=abort: a muxer that cannot write stops the whole stream instead of leaving the
    # others running with a hole in the ladder.
    argv += ["-f", "tee", "|".join(s.replace("[", "[onfail=abort:", 1) for s in slaves)]
    return argv


def _tee_slave(options: dict[str, str], target: str) -> str:
    """`[key=value:...]target`, each value quoted for the tee muxer's option parser."""
    for text in (*options.values(), target):
        if any(c in text for c in "'\\|[]"):
            raise ValueError(f"tee option or target needs escaping: {text!r}")
    return "[" + ":".join(f"{key}='{value}'" for key, value in options.items()) + "]" + target
