"""`mpstream encode`: the command-line face of encoder.pipeline.encode_media."""

from __future__ import annotations

import signal
from pathlib import Path

import click
from rich.console import Console

from mpstream.encoder.pipeline import EncodeResult, encode_media
from mpstream.encoder.summary import summary_table
from mpstream.errors import EXIT_INTERRUPTED
from mpstream.paths import DEFAULT_MEDIA


@click.command()
@click.argument("source")
@click.option("--ladder", default="standard", show_default=True,
              help="Built-in ladder (small, tiny, standard, thesis) or the path of a ladder file.")
@click.option("--segment-duration", type=float, default=4.0, show_default=True,
              help="Segment length in seconds (the data set used 2, 4, 6, 10 or 20).")
@click.option("--duration", type=float, default=None,
              help="Seconds to encode. Default: the whole file; 60 for sample and synthetic.")
@click.option("--out", type=click.Path(path_type=Path), default=DEFAULT_MEDIA,
              show_default=True, help="Directory of the media tree (replaced if it holds one).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def encode(source: str, ladder: str, segment_duration: float, duration: float | None,
           out: Path, quiet: bool) -> None:
    """Encode SOURCE (a video file, `sample` or `synthetic`) into an HLS + DASH ladder.

    One ffmpeg process decodes the source once and encodes every rung in H.264 and HEVC;
    HLS (MPEG-TS, H.264 + AAC) and DASH (fMP4: HEVC set, AVC set, audio set) are packaged from
    those encodes, validated, and only then moved to --out.
    """
    # SIGTERM unwinds like Ctrl-C: ffmpeg is stopped and the staging directory removed.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    console = Console(stderr=True)
    result = encode_media(source, ladder, segment_duration, duration, out,
                          progress=not quiet, console=console)
    _report(result)


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(EXIT_INTERRUPTED)  # as Ctrl-C ends it: one code for interrupted


def _report(result: EncodeResult) -> None:
    console = Console()
    console.print(summary_table(result))
    v = result.validation
    console.print(
        f"[green]valid[/]: {v.playlists} playlists, {v.representations} DASH representations,"
        f" {v.segments} segments, {v.keyframes_checked} keyframe starts checked"
    )
    console.print(f"HLS  {result.hls_master}")
    console.print(f"DASH {result.dash_manifest}")
    console.print(f"info {result.media_json}")
    console.print(
        f"{result.duration:g} s of media in {result.total_seconds:.1f} s"
        f" ({result.realtime_factor:.2f}× real time)"
    )
