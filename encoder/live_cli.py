"""`mpstream live`: the command-line face of encoder.live.run_live."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from mpstream.encoder.live import LiveConfig, run_live
from mpstream.encoder.lowlatency import DEFAULT_RTT_S, LowLatency
from mpstream.proc import signals_interrupt


@click.command()
@click.argument("source")
@click.option("--ladder", default="small", show_default=True,
              help="Built-in ladder (small, tiny, standard, thesis) or the path of a ladder file.")
@click.option("--segment-duration", type=float, default=2.0, show_default=True,
              help="Segment length in seconds.")
@click.option("--window", "window_s", type=float, default=30.0, show_default=True,
              help="Seconds of segments the playlists and the MPD list (the DVR window); older"
                   " segments are deleted.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("media/live"),
              show_default=True, help="Directory of the live tree (replaced if it holds one).")
@click.option("--low-latency", is_flag=True,
              help="LL-DASH and LL-HLS: each segment written in parts (CMAF chunks) that are "
                   "served while the segment is encoded; see docs/live.md.")
@click.option("--part-duration", type=float, default=None,
              help="With --low-latency: seconds of media in a part [default: 0.5].")
@click.option("--target-latency", "target_latency_s", type=float, default=None,
              help="With --low-latency: the latency to live the manifests ask players to hold "
                   "[default: three parts plus --rtt; at least three parts].")
@click.option("--rtt", "rtt_s", type=float, default=None,
              help="With --low-latency: the round trip (s) between the server and its players "
                   f"that the default target allows for [default: {DEFAULT_RTT_S:g}].")
def live(source: str, ladder: str, segment_duration: float, window_s: float, out: Path,
         low_latency: bool, part_duration: float | None,
         target_latency_s: float | None, rtt_s: float | None) -> None:
    """Stream SOURCE live as HLS + DASH: `synthetic` (a test pattern with the UTC clock burned
    in), a V4L2 camera (/dev/videoN), or a video file / `sample` looped forever.

    One ffmpeg process decodes the source once, encodes every rung in H.264 and HEVC, and
    writes sliding-window HLS (MPEG-TS) and a dynamic DASH MPD into --out, which
    `mpstream serve --media DIR` serves. Ctrl-C or SIGTERM ends the stream: the playlists get
    EXT-X-ENDLIST, the MPD turns static over the segments left, live.json says `ended`.
    """
    console = Console(stderr=True)
    if not low_latency and (part_duration, target_latency_s, rtt_s) != (None, None, None):
        raise click.UsageError("--part-duration, --target-latency and --rtt go with "
                               "--low-latency")
    low = (LowLatency(part_duration=0.5 if part_duration is None else part_duration,
                      target_latency_s=target_latency_s,
                      rtt_s=DEFAULT_RTT_S if rtt_s is None else rtt_s)
           if low_latency else None)
    config = LiveConfig(source=source, ladder=ladder, segment_duration=segment_duration,
                        window_s=window_s, out=out, low_latency=low)

    def ready(root: Path) -> None:
        console.print(f"live: HLS  {root / 'hls' / 'master.m3u8'}")
        console.print(f"live: DASH {root / 'dash' / 'manifest.mpd'}")
        console.print("live: streaming; Ctrl-C ends it", markup=False)

    with signals_interrupt():
        state = run_live(config, on_ready=ready,
                         on_warning=lambda m: console.print(f"live: warning: {m}", markup=False))
    console.print(f"live: ended ({state.end_reason}); the tree in {Path(out).resolve()} is"
                  " static now", markup=False)
