"""Per-session QoE summaries and grouped statistics, exactly as docs/qoe-events.md defines them.

Pure functions of stored rows: no database, no Flask, so they are tested on hand-computed values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from mpstream.qoe import live_latency, video_segment_rates

GROUP_KEYS = ("scenario", "trial", "player", "transport", "protocol")
GROUPED_METRICS = (
    "startup_delay_ms",
    "stall_count",
    "stall_ms",
    "rebuffer_ratio",
    "mean_download_rate_bps",
    "mean_bitrate_bps",
    "switches",
    "dropped_frames",
    "errors",
    "played_s",
    "live_latency_mean_s",
    "live_latency_p95_s",
)
SCALAR_FIELDS = (
    "session", "player", "transport", "protocol", "scenario", "trial", "codec",
    "startup_delay_ms", "stall_count", "stall_ms", "rebuffer_ratio", "segments",
    "mean_download_rate_bps", "mean_bitrate_bps", "switches", "dropped_frames", "total_frames",
    "errors", "played_s", "end_reason", "live_latency_mean_s", "live_latency_p95_s",
    "live_latency_samples",
)  # fmt: skip



def stall_intervals(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(start, end) page times in ms of each stall.

    A stall starts at a stall_start and ends at the next stall_end: end = stall_start's t_ms +
    stall_end's duration_ms (the player's own measure). A stall still open when the events stop
    ends at the last event's t_ms.
    """
    out: list[tuple[float, float]] = []
    open_at: float | None = None
    for ev in events:
        if ev["type"] == "stall_start" and open_at is None:
            open_at = ev["t_ms"]
        elif ev["type"] == "stall_end" and open_at is not None:
            out.append((open_at, open_at + ev["data"]["duration_ms"]))
            open_at = None
    if open_at is not None:
        last = max(ev["t_ms"] for ev in events)
        out.append((open_at, max(open_at, last)))
    return out


def _bitrate_steps(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(from t_ms, bit/s) of the rendition playing: startup's bitrate, then each switch."""
    steps: list[tuple[float, float]] = []
    for ev in events:
        if ev["type"] == "startup" and not steps:
            steps.append((ev["t_ms"], ev["data"]["bitrate"]))
        elif ev["type"] == "quality_switch" and steps:
            steps.append((ev["t_ms"], ev["data"]["to_bitrate"]))
    return steps


def _overlap(a: float, b: float, intervals: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, e) - max(a, s)) for s, e in intervals)


def time_weighted_bitrate(events: list[dict[str, Any]]) -> float | None:
    """Mean of the playing rendition's bitrate weighted by wall time spent playing it.

    Playing time runs from the startup event to the end event (or the last event), minus
    stall intervals.
    """
    steps = _bitrate_steps(events)
    if not steps:
        return None
    ends = [ev["t_ms"] for ev in events if ev["type"] == "end"]
    t_end = ends[0] if ends else max(ev["t_ms"] for ev in events)
    stalls = stall_intervals(events)
    weighted = total = 0.0
    for (t0, rate), nxt in zip(steps, [*steps[1:], (t_end, 0.0)], strict=True):
        t1 = min(nxt[0], t_end)
        if t1 <= t0:
            continue
        playing = (t1 - t0) - _overlap(t0, t1, stalls)
        weighted += rate * playing
        total += playing
    if total <= 0:
        return steps[-1][1]
    return weighted / total


def summarize(session: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-session summary; `events` in seq order."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for ev in events:
        by_type.setdefault(ev["type"], []).append(ev)
    startup = by_type.get("startup", [None])[0]
    segments = sorted(by_type.get("segment", []), key=lambda e: (e["data"]["t_request"], e["seq"]))
    rates = [rate for _, rate in video_segment_rates(events)]
    stall_ms = sum(e - s for s, e in stall_intervals(events)) if events else 0.0
    positions = [
        ev["data"]["position"]
        for ev in events
        if ev["type"] in ("playback", "end", "buffer", "stall_start", "stall_end")
    ]
    latency = live_latency(events)
    # A live session's positions are on the stream's timeline, which began before the
    # session: what was played is the span from where playback started.
    played_s = max(positions, default=0.0) - (min(positions, default=0.0)
                                                if latency["samples"] else 0.0)
    stall_s = stall_ms / 1000
    rebuffer = stall_s / (stall_s + played_s) if stall_s + played_s > 0 else None
    playback = by_type.get("playback", [])
    ends = by_type.get("end", [])
    return {
        "session": session["id"],
        "player": session["player"],
        "transport": session["transport"],
        "protocol": session["protocol"],
        "scenario": session["scenario"],
        "trial": session["trial"],
        "codec": startup["data"]["codec"] if startup else None,
        "startup_delay_ms": startup["data"]["startup_delay_ms"] if startup else None,
        "stall_count": len(by_type.get("stall_start", [])),
        "stall_ms": stall_ms,
        "rebuffer_ratio": rebuffer,
        "segments": len(segments),
        "mean_download_rate_bps": sum(rates) / len(rates) if rates else None,
        "segment_rates_bps": rates,
        "mean_bitrate_bps": time_weighted_bitrate(events) if events else None,
        "switches": sum(
            1 for e in by_type.get("quality_switch", []) if e["data"]["from_bitrate"] is not None
        ),
        "dropped_frames": max((e["data"]["dropped_frames"] for e in playback), default=0),
        "total_frames": max((e["data"]["total_frames"] for e in playback), default=0),
        "errors": len(by_type.get("error", [])),
        "played_s": played_s,
        "end_reason": ends[0]["data"]["reason"] if ends else None,
        "live_latency_mean_s": latency["mean_s"],
        "live_latency_p95_s": latency["p95_s"],
        "live_latency_samples": latency["samples"],
    }


def describe(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """n, mean, sample standard deviation and the Student-t 95 % confidence interval of the
    mean (the runner's statistics, so the dashboard and the report agree).

    None values (a metric a session does not have) are left out and not counted in n; with
    one value, sd and the interval are null.
    """
    # Imported here: scipy costs every collector worker a second at start.
    from mpstream.runner.stats import summarize as trial_stats

    s = trial_stats([v for v in values if v is not None])

    def finite(x: float) -> float | None:
        return None if math.isnan(x) else x

    return {
        "n": s.n,
        "mean": finite(s.mean),
        "sd": finite(s.sd),
        "ci95_low": finite(s.ci_low),
        "ci95_high": finite(s.ci_high),
    }


def grouped(summaries: list[dict[str, Any]], by: list[str]) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for s in summaries:
        groups.setdefault(tuple(s[k] for k in by), []).append(s)

    def order(key: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple((v is None, str(v)) for v in key)

    return [
        {
            "group": dict(zip(by, key, strict=True)),
            "n": len(members),
            "metrics": {m: describe(s[m] for s in members) for m in GROUPED_METRICS},
        }
        for key, members in sorted(groups.items(), key=lambda kv: order(kv[0]))
    ]
