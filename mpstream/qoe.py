"""QoE definitions shared by the collector's summaries, its dashboard and the runner's report,
so that a figure means the same wherever it is shown (docs/qoe-events.md states them)."""

from __future__ import annotations

from typing import Any

# Segments whose download rate counts: the media the viewer waits for. Init segments are a few
# hundred bytes (their "rate" measures the round trip, not the path) and audio is a small
# parallel stream, so both are left out.
VIDEO_KINDS = ("video", "muxed")


def segment_rate_bps(data: dict[str, Any]) -> float | None:
    """bytes × 8 / (t_done − t_request); undefined when no time elapsed or nothing arrived."""
    elapsed_ms = data["t_done"] - data["t_request"]
    if elapsed_ms <= 0 or not data.get("bytes"):
        return None
    return data["bytes"] * 8 / (elapsed_ms / 1000)


def video_segment_rates(events: list[dict[str, Any]]) -> list[tuple[int, float]]:
    """(segment index, download rate in bit/s) of each video segment, by index.

    A segment without an index gets its position among the video segments. A repeated index (a
    segment fetched again at another rung) keeps the last download, which is the one played.
    """
    segs = [
        e["data"]
        for e in sorted(events, key=lambda e: e.get("seq", 0))
        if e.get("type") == "segment" and e.get("data", {}).get("kind") in VIDEO_KINDS
    ]
    by_index: dict[int, float] = {}
    for pos, data in enumerate(segs):
        rate = segment_rate_bps(data)
        if rate is None:
            continue
        idx = data.get("index")
        by_index[int(idx) if idx is not None else pos] = rate
    return sorted(by_index.items())


def live_latency(events: list[dict[str, Any]]) -> dict[str, float | int | None]:
    """Latency to live of a session from its `live_latency` samples (one a second): mean, 95th
    percentile (linear interpolation between order statistics) and the sample count. All None
    (count 0) for on-demand media."""
    values = sorted(
        float(e["data"]["latency_s"]) for e in events if e.get("type") == "live_latency"
    )
    if not values:
        return {"mean_s": None, "p95_s": None, "samples": 0}
    rank = 0.95 * (len(values) - 1)
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    p95 = values[low] + (values[high] - values[low]) * (rank - low)
    return {"mean_s": sum(values) / len(values), "p95_s": p95, "samples": len(values)}
