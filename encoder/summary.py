"""The table `mpstream encode` prints when it is done."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from mpstream.encoder.pipeline import EncodeResult


def summary_table(result: EncodeResult) -> Table:
    table = Table(
        title=f"{result.ladder} ladder · {result.source}",
        caption=f"{result.duration:g} s in {result.segment_duration:g} s segments;"
                " rates in kbit/s (video only); Δ = measured vs nominal",
    )
    table.add_column("rung")
    table.add_column("codecs")
    table.add_column("size")
    for column in ("nominal", "measured", "Δ", "peak", "segs"):
        table.add_column(column, justify="right")
    for r in sorted(result.renditions, key=lambda r: (r.codec, r.nominal_bitrate)):
        colour = "green" if r.within_tolerance else "red"
        table.add_row(
            r.rung, r.codecs, f"{r.width}×{r.height}",
            f"{r.nominal_bitrate / 1000:.0f}", f"{r.measured_bitrate / 1000:.0f}",
            f"[{colour}]{r.deviation:+.1%}[/]", f"{r.peak_bitrate / 1000:.0f}", str(r.segments),
        )
    return table
