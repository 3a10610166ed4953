"""`encode_media`: source -> one-decode ladder encode -> HLS + DASH packaging -> validation ->
the finished tree moved into place.

Everything is built in a staging directory beside the destination; only a tree that passed
validation is renamed into place, so an interrupted or failed encode never leaves something
that looks complete.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from mpstream.encoder.commands import (
    Intermediate,
    dash_command,
    encode_command,
    hls_command,
    intermediates,
)
from mpstream.encoder.ladder import Ladder, load_ladder
from mpstream.encoder.runner import run_ffmpeg
from mpstream.encoder.sources import Source, resolve_source
from mpstream.encoder.tools import require_tools
from mpstream.errors import UserError
from mpstream.manifests import dash, hls
from mpstream.manifests.bitstream import init_segment_codecs, ts_video_codecs
from mpstream.manifests.ffprobe import probe_media
from mpstream.manifests.presentation import (
    MEDIA_JSON,
    AudioRecord,
    MediaRecord,
    RungRecord,
    write_media_record,
)
from mpstream.manifests.validate import ValidationReport, require_valid

# Mean bitrate must land within this fraction of the rung's nominal value.
BITRATE_TOLERANCE = 0.15


@dataclass(frozen=True)
class Rendition:
    """One encode of one rung with one codec, as measured after the fact."""

    rung: str
    codec: str  # "avc" or "hevc"
    width: int
    height: int
    nominal_bitrate: int
    measured_bitrate: int
    peak_bitrate: int
    codecs: str
    segments: int

    @property
    def deviation(self) -> float:
        return self.measured_bitrate / self.nominal_bitrate - 1

    @property
    def within_tolerance(self) -> bool:
        return abs(self.deviation) <= BITRATE_TOLERANCE


@dataclass(frozen=True)
class EncodeResult:
    out: Path
    ladder: str
    source: str
    segment_duration: float
    duration: float
    renditions: list[Rendition]
    record: MediaRecord
    validation: ValidationReport
    encode_seconds: float  # stage 1 (the one-decode encode)
    total_seconds: float

    @property
    def hls_master(self) -> Path:
        return self.out / self.record.hls_master

    @property
    def dash_manifest(self) -> Path:
        return self.out / self.record.dash_manifest

    @property
    def media_json(self) -> Path:
        return self.out / MEDIA_JSON

    @property
    def realtime_factor(self) -> float:
        """Seconds of media encoded per second of wall clock (all rungs)."""
        return self.duration / self.total_seconds


def encode_media(
    source: str,
    ladder: str | Path,
    segment_duration: float,
    duration: float | None,
    out: Path,
    progress: bool = True,
    console: Console | None = None,
) -> EncodeResult:
    started = time.monotonic()
    console = console or Console(stderr=True)
    if not segment_duration > 0:
        raise UserError(
            f"--segment-duration must be a positive number of seconds, got {segment_duration}."
        )
    tools = require_tools()
    spec = load_ladder(ladder)
    src = resolve_source(source, duration, spec.top.width, spec.top.height)
    if src.duration < segment_duration:
        raise UserError(
            f"Source {src.label} is {src.duration:.2f} s long, shorter than one segment"
            f" ({segment_duration:g} s). Use a longer source, a shorter --segment-duration,"
            " or `sample`/`synthetic` with a longer --duration."
        )
    out = Path(out).resolve()
    staging = _staging_beside(out)
    try:
        staging.chmod(0o755)  # the web server reads the tree as another user
        built = _build(tools.ffmpeg, src, spec, segment_duration, staging, progress, console)
        _install(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return EncodeResult(
        out=out, ladder=spec.name, source=src.label, segment_duration=segment_duration,
        duration=src.duration, renditions=built.renditions, record=built.record,
        validation=built.validation, encode_seconds=built.encode_seconds,
        total_seconds=time.monotonic() - started,
    )


def _staging_beside(out: Path) -> Path:
    """A fresh folder beside `out` to build the tree in (what an earlier, killed encode left
    there is removed first); `out` is replaced by it only once it is valid."""
    _check_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_staging(out)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-{os.getpid()}-", dir=out.parent))


@dataclass(frozen=True)
class _Built:
    renditions: list[Rendition]
    record: MediaRecord
    validation: ValidationReport
    encode_seconds: float


def _build(ffmpeg: str, src: Source, spec: Ladder, segment_duration: float, staging: Path,
           progress: bool, console: Console) -> _Built:
    """The whole tree in `staging`: every rung encoded from one decode, packaged to HLS and
    DASH, its media.json written, then validated."""
    work = staging / "work"
    work.mkdir()
    items = intermediates(spec, work)
    t0 = time.monotonic()
    run_ffmpeg(
        encode_command(ffmpeg, src, spec, segment_duration, work),
        label=f"Encoding {len(items) - 1} renditions",
        total_seconds=src.duration, show=progress, console=console,
    )
    encode_seconds = time.monotonic() - t0
    measured = _measure_intermediates(items, src)

    with _status(console, progress, "Packaging HLS and DASH"):
        _package(ffmpeg, items, segment_duration, staging)
        renditions, audio = _finish_dash(staging / "dash", items, measured, spec, src)
        _finish_hls(staging / "hls", items, src)
        record = _media_record(spec, src, segment_duration, renditions, audio)
        write_media_record(staging, record)
        shutil.rmtree(work)

    with _status(console, progress, "Validating"):
        report = require_valid(staging, duration=src.duration)
    return _Built(renditions, record, report, encode_seconds)


def _status(console: Console, show: bool, message: str) -> AbstractContextManager:
    return console.status(message, spinner="dots") if show else nullcontext()


def _package(ffmpeg: str, items: list[Intermediate], segment_duration: float,
             staging: Path) -> None:
    """Stage 2: HLS and DASH from the same encodes, no re-encoding. ffmpeg's DASH muxer does
    not create directories, so each representation's is made beforehand (named by index,
    renamed after its rung by _finish_dash)."""
    hls_dir, dash_dir = staging / "hls", staging / "dash"
    for item in items:
        if item.kind == "avc" and item.rung is not None:
            (hls_dir / item.rung.name).mkdir(parents=True)
    for index, _ in enumerate(items):
        (dash_dir / str(index)).mkdir(parents=True)
    _run_quiet(hls_command(ffmpeg, items, segment_duration, hls_dir), "HLS packaging")
    _run_quiet(dash_command(ffmpeg, items, segment_duration, dash_dir), "DASH packaging")


def _check_destination(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; pass a directory for the media tree.")
    if out.is_dir() and any(out.iterdir()) and not (out / MEDIA_JSON).is_file():
        raise UserError(
            f"--out {out} exists and does not hold a media tree (no {MEDIA_JSON}); refusing to"
            " replace it. Pass a new or empty directory."
        )


def _remove_abandoned_staging(out: Path) -> None:
    """Staging directories of encodes that were killed outright (SIGKILL, power loss) carry
    the dead process's id; remove those, never one of a running encode."""
    for old in out.parent.glob(f".{out.name}.partial-*-*"):
        pid = old.name.rsplit(".partial-", 1)[1].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)


def _install(staging: Path, out: Path) -> None:
    """Swap the validated tree into place; an older tree is removed only afterwards."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(old)
    staging.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _run_quiet(argv: list[str], label: str) -> None:
    run_ffmpeg(argv, label=label, total_seconds=1, show=False)


def _measure_intermediates(items: list[Intermediate], src: Source) -> dict[str, int]:
    """Mean bit/s of each encode; also catches a source that ends early (truncated file)."""
    rates = {}
    with ThreadPoolExecutor(4) as pool:
        infos = list(pool.map(probe_media, [item.path for item in items]))
    for item, info in zip(items, infos, strict=True):
        stream = info["streams"][0]
        length = float(stream.get("duration") or info["format"].get("duration") or 0)
        if item.kind != "audio" and length < src.duration - max(0.5, 2 / float(src.fps)):
            raise UserError(
                f"Source {src.label} ended after {length:.2f} s although it should last"
                f" {src.duration:.2f} s: the file is probably truncated or damaged."
                " Re-export it, or pass --duration no longer than the part that plays."
            )
        rates[item.representation_id] = int(stream.get("bit_rate") or 0)
    return rates


def _finish_dash(
    dash_dir: Path, items: list[Intermediate], measured: dict[str, int], spec: Ladder, src: Source
) -> tuple[list[Rendition], AudioRecord]:
    renames, codecs, peaks = {}, {}, {}
    segment_counts = {}
    for index, item in enumerate(items):
        rep_id = item.representation_id
        (dash_dir / str(index)).rename(dash_dir / rep_id)
        renames[str(index)] = rep_id
        _, codecs[rep_id] = init_segment_codecs(dash_dir / rep_id / "init.m4s")
    # Segment sizes give the peak rate; read the timeline before the ids change.
    mpd = dash.load_mpd(dash_dir / "manifest.mpd")
    for aset in mpd.adaptation_sets:
        for rep in aset.representations:
            rep_id = renames[rep.id]
            rates = [
                (dash_dir / rep_id / seg.path.name).stat().st_size * 8 / seg.duration
                for seg in rep.segments if seg.duration > 0
            ]
            peaks[rep_id] = round(max(rates))
            segment_counts[rep_id] = len(rep.segments)
    dash.finish_mpd(dash_dir / "manifest.mpd", renames, codecs, peaks,
                    title=f"mpstream {spec.name} ladder: {src.label}")
    renditions = [
        Rendition(
            rung=item.rung.name, codec=item.kind, width=item.rung.width, height=item.rung.height,
            nominal_bitrate=item.rung.bitrate, measured_bitrate=measured[item.representation_id],
            peak_bitrate=peaks[item.representation_id], codecs=codecs[item.representation_id],
            segments=segment_counts[item.representation_id],
        )
        for item in items if item.rung is not None
    ]
    audio = AudioRecord(codecs=codecs["audio"], bitrate=measured["audio"],
                        dash_representation="audio")
    return renditions, audio


def _finish_hls(hls_dir: Path, items: list[Intermediate], src: Source) -> None:
    # The audio in the TS segments is the same AAC encode as the DASH audio representation.
    audio_codecs = init_segment_codecs(hls_dir.parent / "dash" / "audio" / "init.m4s")[1]
    rungs = [item.rung for item in items if item.kind == "avc" and item.rung is not None]
    playlists = [hls.load_media_playlist(hls_dir / r.name / "index.m3u8")[1] for r in rungs]
    with ThreadPoolExecutor(4) as pool:
        video = list(pool.map(ts_video_codecs, [segments[0].path for segments in playlists]))
    variants = []
    for rung, segments, video_codecs in zip(rungs, playlists, video, strict=True):
        peak, average = hls.segment_rates(segments)
        variants.append(hls.Variant(
            uri=f"{rung.name}/index.m3u8", peak_bandwidth=peak, average_bandwidth=average,
            width=rung.width, height=rung.height,
            codecs=f"{video_codecs},{audio_codecs}", frame_rate=src.fps,
        ))
    hls.write_master(hls_dir / "master.m3u8", variants)


def _media_record(
    spec: Ladder, src: Source, segment_duration: float, renditions: list[Rendition],
    audio: AudioRecord,
) -> MediaRecord:
    rungs = []
    for rung in spec.rungs:
        mine = [r for r in renditions if r.rung == rung.name]
        rungs.append(RungRecord(
            name=rung.name, width=rung.width, height=rung.height, nominal_bitrate=rung.bitrate,
            codecs={r.codec: r.codecs for r in mine},
            measured_bitrate={r.codec: r.measured_bitrate for r in mine},
            peak_bitrate={r.codec: r.peak_bitrate for r in mine},
            dash_representation={r.codec: f"{r.codec}-{rung.name}" for r in mine},
            hls_playlist=f"hls/{rung.name}/index.m3u8" if "avc" in rung.codecs else None,
            segments=max(r.segments for r in mine),
        ))
    return MediaRecord(
        ladder=spec.name, source=src.label, segment_duration=segment_duration,
        duration=src.duration, frame_rate=float(src.fps), audio=audio, rungs=rungs,
    )
