"""Per-trial figures computed from a trial's raw data (events, kernel samples, iperf output).

QoE figures come from the player's events (docs/qoe-events.md), not from the collector's summary,
so the report can be checked against the raw data alone; the summary fills only what the events
cannot give on their own (time-weighted bitrate, played time) when present.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from mpstream.qoe import live_latency
from mpstream.qoe import video_segment_rates as segment_rates
from mpstream.runner.layout import TrialRecord
from mpstream.runner.sampler import read_samples

BIN_S = 1.0



def stalls_ms(events: list[dict]) -> list[float]:
    """Duration of every stall. A stall still open when the session ended (its path never came
    back) lasts until the session's last event: leaving it out would hide the worst case."""
    out: list[float] = []
    open_at: float | None = None
    for e in sorted(events, key=lambda e: e.get("seq", 0)):
        if e.get("type") == "stall_start":
            open_at = float(e["t_ms"])
        elif e.get("type") == "stall_end":
            out.append(float(e["data"].get("duration_ms", 0.0)))
            open_at = None
    if open_at is not None and events:
        last = max(float(e["t_ms"]) for e in events)
        out.append(max(0.0, last - open_at))
    return out


def video_metrics(rec: TrialRecord) -> dict[str, float]:
    ev = rec.events
    s = rec.summary or {}
    startup = next((e["data"] for e in ev if e.get("type") == "startup"), None)
    stalls = stalls_ms(ev)
    rates = [r for _, r in segment_rates(ev)]
    played = s.get("played_s")
    if played is None:
        ends = [e["data"].get("position") for e in ev if e.get("type") in ("end", "playback")]
        played = max((p for p in ends if p is not None), default=None)
    stall_total = sum(stalls)
    latency = live_latency(ev)
    m: dict[str, float] = {
        "startup_delay_ms": float(startup["startup_delay_ms"]) if startup else math.nan,
        "stall_count": float(len(stalls)),
        "stall_ms": stall_total,
        "longest_stall_ms": max(stalls, default=0.0),
        "rebuffer_ratio": (
            stall_total / (stall_total + played * 1000.0)
            if played is not None and (stall_total + played * 1000.0) > 0
            else math.nan
        ),
        "switches": float(sum(1 for e in ev if e.get("type") == "quality_switch")),
        "mean_bitrate_mbps": _mbps(s.get("mean_bitrate_bps")),
        "segments": float(len(rates)),
        "download_rate_mbps": (sum(rates) / len(rates) / 1e6) if rates else math.nan,
        "played_s": float(played) if played is not None else math.nan,
        # Live streams only (NaN on demand, so the report leaves the rows out).
        "live_latency_mean_s": _or_nan(latency["mean_s"]),
        "live_latency_p95_s": _or_nan(latency["p95_s"]),
        # The media element's counters (getVideoPlaybackQuality): the decoder kept up or not.
        "decoded_frames": _frames(ev, "total_frames"),
        "dropped_frames": _frames(ev, "dropped_frames"),
    }
    cap = rec.meta.get("capacity_bps")
    m["download_share"] = (
        m["download_rate_mbps"] * 1e6 / cap if cap and not math.isnan(m["download_rate_mbps"])
        else math.nan
    )
    return m


def _or_nan(v) -> float:
    return math.nan if v is None else float(v)


def _frames(events: list[dict], field: str) -> float:
    counts = [e["data"].get(field) for e in events if e.get("type") == "playback"]
    counts = [c for c in counts if c is not None]
    return float(max(counts)) if counts else math.nan


def _mbps(v) -> float:
    return float(v) / 1e6 if v is not None else math.nan


def iperf_metrics(rec: TrialRecord) -> dict[str, float]:
    end = (rec.iperf or {}).get("end", {})
    recv = end.get("sum_received", {}).get("bits_per_second")
    sent = end.get("sum_sent", {})
    m = {
        "throughput_mbps": _mbps(recv),
        "iperf_retransmits": float(sent.get("retransmits", math.nan)),
    }
    cap = rec.meta.get("capacity_bps")
    m["throughput_share"] = m["throughput_mbps"] * 1e6 / cap if cap else math.nan
    return m


def socket_increments(rows: list[dict], column: str) -> list[tuple[float, int | None, int]]:
    """(t_s, path, increase of `column` since the socket's previous sample) for every row.

    A socket is one (local, peer) pair; its first sample counts from zero (the samplers start
    before any connection of the trial opens). A counter never decreases, so a drop means a new
    socket reused the address pair: its value counts from zero again.
    """
    last: dict[tuple[str, str], int] = {}
    out = []
    for r in sorted(rows, key=lambda r: r["t_s"]):
        key = (r["local"], r["peer"])
        v = r[column]
        prev = last.get(key, 0)
        inc = v - prev if v >= prev else v
        last[key] = v
        if inc:
            out.append((r["t_s"], r["path"], inc))
    return out


def binned_by_path(
    rows: list[dict], column: str, bin_s: float = BIN_S
) -> dict[int, dict[int, float]]:
    """path -> {bin index -> sum of increments of `column` in that bin}; unknown paths dropped."""
    out: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for t, path, inc in socket_increments(rows, column):
        if path is None:
            continue
        out[path][int(t // bin_s)] += inc
    return {p: dict(b) for p, b in out.items()}


def sample_span_s(rows: list[dict]) -> float:
    ts = [r["t_s"] for r in rows]
    return (max(ts) - min(ts)) if len(ts) > 1 else math.nan


def kernel_metrics(rec: TrialRecord, n_paths: int) -> dict[str, float]:
    """Per-path bytes share (client side, received), retransmissions per second (sender side),
    and the sender's mean smoothed RTT per path."""
    m: dict[str, float] = {}
    client = _rows(rec.samples_client)
    sender_file = rec.samples_server if rec.meta.get("sender", "server") == "server" \
        else rec.samples_client
    sender = _rows(sender_file)
    recv_col = "bytes_received" if rec.meta.get("sender", "server") == "server" else "bytes_acked"
    recv = binned_by_path(client, recv_col)
    total = sum(sum(b.values()) for b in recv.values())
    retr = binned_by_path(sender, "retrans_total")
    span = sample_span_s(sender)
    for p in range(n_paths):
        got = sum(recv.get(p, {}).values())
        m[f"path{p}_bytes_share"] = got / total if total else math.nan
        m[f"path{p}_mbytes"] = got / 1e6
        m[f"path{p}_retrans_per_s"] = (
            sum(retr.get(p, {}).values()) / span if span and not math.isnan(span) else math.nan
        )
        rtts = [r["rtt_ms"] for r in sender if r["path"] == p and r["rtt_ms"] is not None
                and r["state"] == "ESTAB"]
        m[f"path{p}_rtt_ms"] = sum(rtts) / len(rtts) if rtts else math.nan
    m["retrans_per_s"] = (
        sum(sum(b.values()) for b in retr.values()) / span if span and not math.isnan(span)
        else math.nan
    )
    return m


def _rows(path: Path) -> list[dict]:
    return read_samples(path) if Path(path).is_file() else []


def n_paths_of(records: list[TrialRecord]) -> int:
    return max((len(r.meta.get("paths", [])) for r in records), default=0)


def trial_metrics(rec: TrialRecord, n_paths: int) -> dict[str, float]:
    base = video_metrics(rec) if rec.meta.get("kind", "video") == "video" else iperf_metrics(rec)
    return {**base, **kernel_metrics(rec, n_paths)}
