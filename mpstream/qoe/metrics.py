"""Every derived QoE figure of one session, computed from its events (docs/qoe.md defines each).

The collector's summary (server/summary.py), its dashboard and the runner's report
(runner/metrics.py) all call `session_metrics`, so a figure means the same wherever it is
shown. Pure functions of the event dicts `{seq, t_ms, type, data}`: no database, no Flask.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypedDict

Event = dict[str, Any]

# Segments whose download rate counts: the media the viewer waits for. Init segments are a few
# hundred bytes (their "rate" measures the round trip, not the path) and audio is a small
# parallel stream, so both are left out.
VIDEO_KINDS = ("video", "muxed")
# Events that carry the playhead's position (media seconds).
POSITION_TYPES = ("playback", "end", "buffer", "stall_start", "stall_end")


def in_order(events: Iterable[Event]) -> list[Event]:
    """Events in `seq` order (the order the page recorded them)."""
    return sorted(events, key=lambda e: e.get("seq", 0))


# --- segments -----------------------------------------------------------------------------


def segment_rate_bps(data: dict[str, Any]) -> float | None:
    """bytes × 8 / (t_done − t_request); undefined when no time elapsed or nothing arrived."""
    elapsed_ms = data["t_done"] - data["t_request"]
    if elapsed_ms <= 0 or not data.get("bytes"):
        return None
    return data["bytes"] * 8 / (elapsed_ms / 1000)


@dataclass(frozen=True)
class VideoSegment:
    """The download of one video segment that was played (the last one of its index)."""

    index: int
    bitrate_bps: float  # nominal bitrate of the rendition it belongs to
    bytes: int
    duration_s: float | None
    t_request: float
    t_done: float
    rate_bps: float | None  # download rate; None when undefined
    width: int | None = None
    height: int | None = None


def video_segments(events: Iterable[Event]) -> list[VideoSegment]:
    """The video segments by index. A segment without an index gets its position among the
    video segments; a repeated index (fetched again at another rung) keeps the last download,
    which is the one played."""
    segs = [e["data"] for e in in_order(events)
            if e.get("type") == "segment" and e.get("data", {}).get("kind") in VIDEO_KINDS]
    by_index: dict[int, VideoSegment] = {}
    for pos, d in enumerate(segs):
        idx = int(d["index"]) if d.get("index") is not None else pos
        by_index[idx] = VideoSegment(
            index=idx, bitrate_bps=float(d["bitrate"]), bytes=int(d["bytes"]),
            duration_s=d.get("duration_s"), t_request=float(d["t_request"]),
            t_done=float(d["t_done"]), rate_bps=segment_rate_bps(d),
        )
    return [by_index[i] for i in sorted(by_index)]


def video_segment_rates(events: Iterable[Event]) -> list[tuple[int, float]]:
    """(segment index, download rate in bit/s) of each video segment with a defined rate."""
    return [(s.index, s.rate_bps) for s in video_segments(events) if s.rate_bps is not None]


# --- stalls -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stall:
    start_ms: float  # page time of the stall_start
    duration_ms: float
    position_s: float  # where playback stopped
    open: bool = False  # never ended: lasts until the session's last event

    @property
    def end_ms(self) -> float:
        return self.start_ms + self.duration_ms


def stalls(events: Iterable[Event]) -> list[Stall]:
    """Each stall: a `stall_start` opens one, the next `stall_end` closes it and gives its
    duration (the player's own measure). A stall still open at the last event lasts until that
    event's t_ms: leaving it out would hide the worst case (a path that never came back)."""
    evs = in_order(events)
    out: list[Stall] = []
    opened: Event | None = None
    for e in evs:
        if e["type"] == "stall_start" and opened is None:
            opened = e
        elif e["type"] == "stall_end" and opened is not None:
            out.append(Stall(float(opened["t_ms"]), float(e["data"]["duration_ms"]),
                             float(opened["data"]["position"])))
            opened = None
    if opened is not None:
        last = max(float(e["t_ms"]) for e in evs)
        out.append(Stall(float(opened["t_ms"]), max(0.0, last - float(opened["t_ms"])),
                         float(opened["data"]["position"]), open=True))
    return out


class StallFigures(TypedDict):
    count: int
    ms: float
    longest_ms: float


def stall_figures(found: list[Stall]) -> StallFigures:
    """count, total ms and longest ms of the given stalls."""
    return {
        "count": len(found),
        "ms": float(sum(s.duration_ms for s in found)),
        "longest_ms": float(max((s.duration_ms for s in found), default=0.0)),
    }


def stalls_after(events: Iterable[Event], t_ms: float) -> StallFigures:
    """The stalls that began at or after page time `t_ms` (e.g. a path failure): did the event
    cause a stall, and how long was playback halted?"""
    return stall_figures([s for s in stalls(events) if s.start_ms >= t_ms])


# --- playback -----------------------------------------------------------------------------


def live_latency(events: Iterable[Event]) -> dict[str, float | int | None]:
    """Latency to live of a session from its `live_latency` samples (one a second): mean, 95th
    percentile (linear interpolation between order statistics) and the sample count. All None
    (count 0) for on-demand media."""
    values = sorted(float(e["data"]["latency_s"]) for e in events
                    if e.get("type") == "live_latency")
    if not values:
        return {"mean_s": None, "p95_s": None, "samples": 0}
    rank = 0.95 * (len(values) - 1)
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    p95 = values[low] + (values[high] - values[low]) * (rank - low)
    return {"mean_s": sum(values) / len(values), "p95_s": p95, "samples": len(values)}


def played_s(events: Iterable[Event]) -> float:
    """Media seconds played: the largest position any event reported (on-demand sessions play
    from 0 without seeking). A live session's positions are on the stream's timeline, which
    began before the session: what was played is the span from where playback started."""
    evs = list(events)
    positions = [e["data"]["position"] for e in evs if e["type"] in POSITION_TYPES]
    if not positions:
        return 0.0
    live = any(e["type"] == "live_latency" for e in evs)
    return float(max(positions) - (min(positions) if live else 0.0))


def rendition_steps(events: Iterable[Event]) -> list[tuple[float, float]]:
    """(from t_ms, bit/s) of the rendition on screen: startup's bitrate, then each switch."""
    steps: list[tuple[float, float]] = []
    for e in in_order(events):
        if e["type"] == "startup" and not steps:
            steps.append((float(e["t_ms"]), float(e["data"]["bitrate"])))
        elif e["type"] == "quality_switch" and steps:
            steps.append((float(e["t_ms"]), float(e["data"]["to_bitrate"])))
    return steps


def _overlap(a: float, b: float, intervals: list[Stall]) -> float:
    return sum(max(0.0, min(b, s.end_ms) - max(a, s.start_ms)) for s in intervals)


def session_end_ms(events: list[Event]) -> float:
    ends = [e["t_ms"] for e in in_order(events) if e["type"] == "end"]
    return float(ends[0] if ends else max(e["t_ms"] for e in events))


def time_weighted_bitrate(events: list[Event]) -> float | None:
    """Mean of the on-screen rendition's bitrate weighted by the wall time it was playing:
    from the startup event to the end event (or the last event), stall intervals left out."""
    steps = rendition_steps(events)
    if not steps:
        return None
    t_end = session_end_ms(events)
    halted = stalls(events)
    weighted = total = 0.0
    for (t0, rate), nxt in zip(steps, [*steps[1:], (t_end, 0.0)], strict=True):
        t1 = min(nxt[0], t_end)
        if t1 <= t0:
            continue
        playing = (t1 - t0) - _overlap(t0, t1, halted)
        weighted += rate * playing
        total += playing
    if total <= 0:
        return steps[-1][1]
    return weighted / total


def switches(events: Iterable[Event]) -> int:
    """Quality switches: `quality_switch` events with a `from_bitrate` (the probe sends the
    first rendition in `startup`, so each of its quality_switch events is a switch)."""
    return sum(1 for e in events
               if e["type"] == "quality_switch" and e["data"].get("from_bitrate") is not None)


def down_switches(events: Iterable[Event]) -> int:
    """Quality switches to a lower bitrate."""
    return sum(1 for e in events if e["type"] == "quality_switch"
               and e["data"].get("from_bitrate") is not None
               and e["data"]["to_bitrate"] < e["data"]["from_bitrate"])


def ladder(events: Iterable[Event]) -> list[dict[str, Any]] | None:
    """The representations of the session's `ladder` event, lowest first; None without one."""
    for e in events:
        if e["type"] == "ladder":
            return list(e["data"]["representations"])
    return None


def abr_name(events: Iterable[Event]) -> str | None:
    """The adaptation rule the player said it runs (its `abr` event); None when the session did
    not send one (sessions recorded before the page reported it)."""
    for e in events:
        if e["type"] == "abr":
            return str(e["data"]["name"])
    return None


def ladder_top_bps(events: Iterable[Event]) -> float | None:
    """The top rung of the ladder the player chose from (its `ladder` event); None when the
    session did not send one (sessions recorded before the probe sent the ladder)."""
    for e in events:
        if e["type"] == "ladder":
            return float(max(r["bitrate"] for r in e["data"]["representations"]))
    return None


# --- the whole session --------------------------------------------------------------------

METRIC_FIELDS = (
    "codec", "startup_delay_ms", "manifest_ms", "first_segment_ms", "decode_ms",
    "stall_count", "stall_ms", "longest_stall_ms", "rebuffer_ratio", "played_s", "switches",
    "down_switches", "mean_bitrate_bps", "top_bitrate_bps", "bitrate_utilization",
    "segments", "downloads", "mean_download_rate_bps", "download_share", "dropped_frames",
    "total_frames", "errors", "end_reason", "live_latency_mean_s", "live_latency_p95_s",
    "live_latency_samples", "abr", "abr_decisions",
)  # fmt: skip


def session_metrics(events: Iterable[Event], *, capacity_bps: float | None = None
                    ) -> dict[str, Any]:
    """Every derived figure of a session (METRIC_FIELDS, plus segment_rates_bps and ladder). A
    figure the session cannot give (no startup, no segment) is None. `capacity_bps`, when known
    (the sum of the emulated paths' rates), gives download_share = mean download rate /
    capacity."""
    evs = in_order(events)
    by_type: dict[str, list[Event]] = {}
    for e in evs:
        by_type.setdefault(e["type"], []).append(e)
    startup = by_type["startup"][0]["data"] if "startup" in by_type else None
    halted = stall_figures(stalls(evs)) if evs else stall_figures([])
    played = played_s(evs)
    stall_s = halted["ms"] / 1000
    rates = [rate for _, rate in video_segment_rates(evs)]
    mean_rate = sum(rates) / len(rates) if rates else None
    playback = by_type.get("playback", [])
    ends = by_type.get("end", [])
    latency = live_latency(evs)
    mean_bitrate = time_weighted_bitrate(evs) if evs else None
    top = ladder_top_bps(evs)

    def part(name: str) -> float | None:
        return float(startup[name]) if startup and startup.get(name) is not None else None

    return {
        "codec": startup.get("codec") if startup else None,
        "startup_delay_ms": part("startup_delay_ms"),
        "manifest_ms": part("manifest_ms"),
        "first_segment_ms": part("first_segment_ms"),
        "decode_ms": part("decode_ms"),
        "stall_count": halted["count"],
        "stall_ms": halted["ms"],
        "longest_stall_ms": halted["longest_ms"],
        "rebuffer_ratio": stall_s / (stall_s + played) if stall_s + played > 0 else None,
        "played_s": played,
        "switches": switches(evs),
        "down_switches": down_switches(evs),
        "mean_bitrate_bps": mean_bitrate,
        "top_bitrate_bps": top,
        "bitrate_utilization": mean_bitrate / top if mean_bitrate is not None and top
        else None,
        "segments": len(video_segments(evs)),
        "downloads": len(by_type.get("segment", [])),
        "mean_download_rate_bps": mean_rate,
        "download_share": mean_rate / capacity_bps if mean_rate is not None and capacity_bps
        else None,
        "segment_rates_bps": rates,
        "dropped_frames": max((e["data"]["dropped_frames"] for e in playback), default=0),
        "total_frames": max((e["data"]["total_frames"] for e in playback), default=0),
        "errors": len(by_type.get("error", [])),
        "end_reason": ends[0]["data"]["reason"] if ends else None,
        "live_latency_mean_s": latency["mean_s"],
        "live_latency_p95_s": latency["p95_s"],
        "live_latency_samples": latency["samples"],
        "abr": abr_name(evs),
        "abr_decisions": len(by_type.get("abr_decision", [])),
        "ladder": ladder(evs),
    }
