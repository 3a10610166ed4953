"""Published figures our conditions are set beside (the studies we reproduce: the 2017 MPTCP
thesis, the NP03 report, the MPCC reproduction).

Keys are "<study>/<experiment>/<condition>"; a scenario's condition names its key in
`reference`. Each figure says which of our metrics it compares with and how the study measured
it, because the measurements differ (VLC's counters there, the page's QoE probe here).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    metric: str  # a key of our per-trial metrics
    value: float
    unit: str
    how: str


THESIS = "Wejin 2017 (MSc thesis, EMU)"

_PATHS = {
    "latency": {"balanced": "10 ms / 10 ms", "unbalanced": "15 ms / 5 ms", "single": "10 ms"},
    "loss": {"balanced": "10% / 10%", "unbalanced": "15% / 5%", "single": "20%"},
    "bandwidth": {"balanced": "15 / 15 Mbit/s", "unbalanced": "25 / 5 Mbit/s",
                  "single": "30 Mbit/s"},
}

PUBLISHED: dict[str, list[Published]] = {
    "thesis/latency/balanced": [
        Published("startup_delay_ms", 6.5, "ms", "VLC initial buffering, mean"),
        Published("stall_count", 2, "events", "VLC buffering events"),
    ],
    "thesis/latency/unbalanced": [
        Published("startup_delay_ms", 27, "ms", "VLC initial buffering, mean"),
        Published("stall_count", 5, "events", "VLC buffering events"),
    ],
    "thesis/latency/single": [
        Published("startup_delay_ms", 3, "ms", "VLC initial buffering, mean"),
        Published("stall_count", 2, "events", "VLC buffering events"),
    ],
    "thesis/loss/balanced": [
        Published("retrans_per_s", 14, "packets/s", "retransmitted packets per 1 s tick"),
    ],
    "thesis/loss/unbalanced": [
        Published("retrans_per_s", 9, "packets/s", "retransmitted packets per 1 s tick"),
    ],
    "thesis/loss/single": [
        Published("retrans_per_s", 1, "packets/s", "retransmitted packets per 1 s tick"),
    ],
    "thesis/bandwidth/balanced": [
        Published("download_rate_mbps", 17.6, "Mbit/s", "per-segment download rate, 24 V9 "
                  "segments, 5 trials"),
        Published("download_share", 17.6 / 30, "of 30 Mbit/s", "mean rate / sum of path rates"),
    ],
    "thesis/bandwidth/unbalanced": [
        Published("download_rate_mbps", 11.0, "Mbit/s", "per-segment download rate, 24 V9 "
                  "segments, 5 trials"),
        Published("download_share", 11.0 / 30, "of 30 Mbit/s", "mean rate / sum of path rates"),
    ],
    "thesis/bandwidth/single": [
        Published("download_rate_mbps", 8.6, "Mbit/s", "per-segment download rate, 24 V9 "
                  "segments, 5 trials (two trials collapsed to 0.7-4.6 Mbit/s)"),
        Published("download_share", 8.6 / 30, "of 30 Mbit/s", "mean rate / path rate"),
    ],
}


def published(key: str | None) -> list[Published]:
    return PUBLISHED.get(key or "", [])


def condition_text(key: str) -> str:
    """'thesis/bandwidth/unbalanced' -> 'bandwidth, unbalanced (25 / 5 Mbit/s)'."""
    parts = key.split("/")
    if len(parts) != 3:
        return key
    _, exp, cond = parts
    paths = _PATHS.get(exp, {}).get(cond)
    return f"{exp}, {cond}" + (f" ({paths})" if paths else "")
