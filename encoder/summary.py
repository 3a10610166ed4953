"""The table `mpstream encode` prints when it is done."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from mpstream.encoder.pipeline import EncodeResult


def summary_table(result: EncodeResult) -> Table:
    table = Table(title=f"{result.ladder} ladder · {result.source} · "
                        f"{result.duration:g} s in {result.segment_duration:g} s segments")
    for column in ("rung", "codec", "codecs", "resolution"):
        table.add_column(column)
    for column in ("nominal kbit/s", "measured kbit/s", "Δ", "peak kbit/s", "segments"):
        table.add_column(column, justify="right")
    for r in sorted(result.renditions, key=lambda r: (r.codec, r.nominal_bitrate)):
        colour = "green" if r.within_tolerance else "red"
        table.add_row(
            r.rung, r.codec.upper(), r.codecs, f"{r.width}×{r.height}",
            f"{r.nominal_bitrate / 1000:.0f}", f"{r.measured_bitrate / 1000:.0f}",
            f"[{colour}]{r.deviation:+.1%}[/]", f"{r.peak_bitrate / 1000:.0f}", str(r.segments),
        )
    return table
