"""Standard QoE scores of one session, each with the inputs it was computed from
(docs/qoe.md gives the formulas, their sources, units and where we depart from them).

- yin: QoE_lin of Yin et al., "A Control-Theoretic Approach for Dynamic Adaptive Video
  Streaming over HTTP", SIGCOMM 2015, with the paper's default weights (λ = 1, μ = μs = 3000).
- clae, duanmu, yu: the models as goDASH (github.com/uccmisl/godash, qoe/) computes them; the
  formulas are restated here from its published definitions, not copied.
- p1203_input: the ITU-T P.1203 mode-0 input of the session, for the reference implementation
  (`itu_p1203`, licensed for non-commercial research: we never ship it); `p1203_o46` calls it
  when the user has installed it.

The per-segment inputs are the video segments played (mpstream.qoe.metrics.video_segments):
their nominal bitrates R_k in index order, K of them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

from mpstream.metric import Metric
from mpstream.qoe.events import (
    BaseEvent,
    QualitySwitchEvent,
    SegmentData,
    SegmentEvent,
    StartupData,
    StartupEvent,
)
from mpstream.qoe.metrics import (
    Event,
    ladder_top_bps,
    of_type,
    parse_events,
    played_s,
    rendition_steps,
    stall_figures,
    stalls,
    video_segments,
)

# The scores, declared once (mpstream/metric.py): the collector's summary and grouped statistics
# and a run's trial figures show them under these names, labels and units.
SCORE_METRICS = (
    Metric("qoe_yin", "QoE Yin (QoE_lin)", "kbit/s"),
    Metric("qoe_clae", "QoE Clae"),
    Metric("qoe_duanmu", "QoE Duanmu"),
    Metric("qoe_yu", "QoE Yu", "Mbit/s"),
)
SCORE_FIELDS = tuple(score.name for score in SCORE_METRICS)

# Yin et al. 2015, QoE_lin defaults: q(R) = R in kbit/s, λ = 1 (per kbit/s of change),
# μ = μs = 3000 (kbit/s per second of rebuffering / of startup delay).
YIN_LAMBDA = 1.0
YIN_MU = 3000.0
YIN_MU_S = 3000.0

# Yu et al. as goDASH states it: avg bitrate (Mbit/s) − w1·switching − w2·starvation. goDASH
# writes w1 as float64(1 / 3), which Go evaluates as an integer division: its w1 is 0. We use
# the 1/3 the model means; `inputs.yu.switching_mbps` lets anyone recompute goDASH's figure
# (yu + switching_mbps / 3).
YU_W1 = 1 / 3
YU_W2 = 20.0

# Claeys et al. as goDASH states it; the stall-duration term saturates at 15 s.
CLAE_STALL_CAP_S = 15.0


def _rate_changes(bitrates: list[float]) -> list[float]:
    """|R_k − R_{k−1}| for k = 2..K, bit/s."""
    return [abs(b - a) for a, b in pairwise(bitrates)]


def yin_qoe_lin(bitrates_bps: list[float], stall_s: float, startup_s: float) -> float | None:
    """Σ R_k − λ Σ |R_{k+1} − R_k| − μ·rebuffer_s − μs·startup_s, R in kbit/s."""
    if not bitrates_bps:
        return None
    kbps = [b / 1000 for b in bitrates_bps]
    return (sum(kbps) - YIN_LAMBDA * sum(_rate_changes(kbps))
            - YIN_MU * stall_s - YIN_MU_S * startup_s)


def clae(bitrates_bps: list[float], top_bitrate_bps: float, stall_count: int,
         stall_s: float) -> float | None:
    """max(0, 0.17 + 5.67·mean(R)/Rmax − 6.72·sd(R)/Rmax − stall penalty), where the stall
    penalty (only with stalls) is 4.95·(0.875·(1 + ln(n_stalls/K)/6) + 0.125·min(1, mean
    stall s / 15)). sd is the sample standard deviation (0 with one segment)."""
    k = len(bitrates_bps)
    if k == 0 or top_bitrate_bps <= 0:
        return None
    mean = sum(bitrates_bps) / k
    sd = math.sqrt(sum((b - mean) ** 2 for b in bitrates_bps) / (k - 1)) if k > 1 else 0.0
    penalty = 0.0
    if stall_count > 0:
        per_stall = min(1.0, (stall_s / stall_count) / CLAE_STALL_CAP_S)
        penalty = 4.95 * (0.875 * (1 + math.log(stall_count / k) / 6) + 0.125 * per_stall)
    return max(0.0, 0.17 + 5.67 * mean / top_bitrate_bps - 6.72 * sd / top_bitrate_bps - penalty)


def duanmu(bitrates_bps: list[float], startup_s: float, stall_s: float,
           played: float) -> float | None:
    """54 − 2.3·startup_s − 56.5·(stall_s / played_s) + 0.0070·mean(R) kbit/s
    + 0.0007·(Σ|ΔR| / number of changes) kbit/s."""
    if not bitrates_bps or played <= 0:
        return None
    changes = [c for c in _rate_changes(bitrates_bps) if c > 0]
    magnitude_kbps = sum(changes) / 1000 / len(changes) if changes else 0.0
    mean_kbps = sum(bitrates_bps) / len(bitrates_bps) / 1000
    return (54.0 - 2.3 * startup_s - 56.5 * (stall_s / played) + 0.0070 * mean_kbps
            + 0.0007 * magnitude_kbps)


def yu(bitrates_bps: list[float], media_s: float, stall_s: float) -> float | None:
    """mean(R) Mbit/s − w1·(Σ|ΔR| Mbit/s / K) − w2·stall_s / (media_s + stall_s), with
    media_s the segments' media duration."""
    k = len(bitrates_bps)
    if k == 0 or media_s + stall_s <= 0:
        return None
    mean_mbps = sum(bitrates_bps) / k / 1e6
    switching = sum(_rate_changes(bitrates_bps)) / 1e6 / k
    return mean_mbps - YU_W1 * switching - YU_W2 * stall_s / (media_s + stall_s)


def top_bitrate(events: list[BaseEvent], bitrates_bps: list[float]) -> float:
    """R_max: the ladder's top rung (the probe's `ladder` event). A session recorded without
    one scores against the highest video bitrate it fetched or showed, as if its own highest
    rung were the top (docs/qoe.md)."""
    top = ladder_top_bps(events)
    if top is not None:
        return top
    seen = [r for _, r in rendition_steps(events)] + bitrates_bps
    return max(seen, default=0.0)


def session_scores(events: Iterable[Event]) -> dict[str, Any]:
    """The four scores (None when the session has no video segment, or for Duanmu no played
    time) and `inputs`: the figures each was computed from, in the units the formula uses."""
    evs = parse_events(events)
    segs = video_segments(evs)
    bitrates = [s.bitrate_bps for s in segs]
    halted = stall_figures(stalls(evs)) if evs else stall_figures([])
    stall_s = halted["ms"] / 1000
    starts = of_type(evs, StartupEvent)
    startup_s = starts[0].data.startup_delay_ms / 1000 if starts else 0.0
    played = played_s(evs)
    durations = [s.duration_s for s in segs if s.duration_s is not None]
    media_s = sum(durations) if segs and len(durations) == len(segs) else played
    top = top_bitrate(evs, bitrates)
    changes = _rate_changes(bitrates)
    inputs = {
        "segments": len(segs),
        "bitrates_kbps": [round(b / 1000, 3) for b in bitrates],
        "top_bitrate_kbps": round(top / 1000, 3),
        "startup_s": startup_s,
        "stall_count": halted["count"],
        "stall_s": stall_s,
        "played_s": played,
        "media_s": media_s,
        "rate_change_sum_kbps": round(sum(changes) / 1000, 3),
        "rate_changes": sum(1 for c in changes if c > 0),
        "yu_switching_mbps": sum(changes) / 1e6 / len(segs) if segs else None,
    }
    return {
        "qoe_yin": yin_qoe_lin(bitrates, stall_s, startup_s),
        "qoe_clae": clae(bitrates, top, halted["count"], stall_s),
        "qoe_duanmu": duanmu(bitrates, startup_s, stall_s, played),
        "qoe_yu": yu(bitrates, media_s, stall_s),
        "inputs": inputs,
    }


# --- ITU-T P.1203 mode 0 -------------------------------------------------------------------


def _p1203_codec(codec: str | None) -> str:
    c = (codec or "").lower()
    if c.startswith(("avc1", "avc3")):
        return "h264"
    if c.startswith(("hvc1", "hev1")):
        return "h265"
    if c.startswith("vp09"):
        return "vp9"
    return c or "unknown"


def p1203_input(events: Iterable[Event], *, fps: float | None = None,
                display: str = "1920x1080", device: str = "pc") -> dict[str, Any]:
    """The session as ITU-T P.1203 mode-0 input (metadata only): I13 video segments (bitrate
    kbit/s, codec, duration s, fps, resolution, start s), I11 audio segments, I23 stalls as
    [media position s, duration s] with the startup delay as a stall at 0, and IGen.

    The probe records no frame rate: `fps` comes from the caller (the runner knows the
    encoded media's); None is written as null. A segment's resolution is that of the
    rendition with its bitrate (startup and quality_switch events).
    """
    evs = parse_events(events)
    sizes: dict[float, str] = {}
    codec = None
    for e in evs:
        if isinstance(e, StartupEvent | QualitySwitchEvent):
            shown = e.data
            rate = shown.bitrate if isinstance(shown, StartupData) else shown.to_bitrate
            if shown.width and shown.height:
                sizes[rate] = f"{shown.width}x{shown.height}"
            codec = codec or shown.codec

    def size_of(bitrate: float) -> str | None:
        if bitrate in sizes:
            return sizes[bitrate]
        if not sizes:
            return None
        return sizes[min(sizes, key=lambda r: abs(r - bitrate))]

    video, start = [], 0.0
    for s in video_segments(evs):
        dur = s.duration_s or 0.0
        video.append({"bitrate": round(s.bitrate_bps / 1000, 3), "codec": _p1203_codec(codec),
                      "duration": dur, "fps": fps, "resolution": size_of(s.bitrate_bps),
                      "start": round(start, 3)})
        start += dur
    audio, a_start = [], 0.0
    by_index: dict[int, SegmentData] = {}
    for seg in of_type(evs, SegmentEvent):
        if seg.data.kind == "audio":
            d = seg.data
            by_index[d.index if d.index is not None else len(by_index)] = d
    for _, d in sorted(by_index.items()):
        dur = d.duration_s or 0.0
        audio.append({"bitrate": round(d.bitrate / 1000, 3), "codec": "aaclc",
                      "duration": dur, "start": round(a_start, 3)})
        a_start += dur
    starts = of_type(evs, StartupEvent)
    stalling = [[0.0, starts[0].data.startup_delay_ms / 1000]] if starts else []
    stalling += [[s.position_s, s.duration_ms / 1000] for s in stalls(evs)]
    return {
        "I11": {"segments": audio, "streamId": 1},
        "I13": {"segments": video, "streamId": 1},
        "I23": {"stalling": stalling, "streamId": 1},
        "IGen": {"device": device, "displaySize": display, "viewingDistance": "150cm"},
    }


def p1203_available() -> bool:
    """Whether the user installed the P.1203 reference implementation (`itu_p1203`)."""
    import importlib.util

    return importlib.util.find_spec("itu_p1203") is not None


def p1203_o46(p1203: dict[str, Any]) -> tuple[float | None, str | None]:
    """(O46, None) from the user's own `itu_p1203` installation, or (None, why not)."""
    try:
        from itu_p1203 import P1203Standalone
    except ImportError:
        return None, "itu_p1203 is not installed (pip install itu-p1203 yourself: its licence " \
                     "allows non-commercial research use only)"
    try:
        result = P1203Standalone(p1203).calculate_complete()
        return float(result["O46"]), None
    except Exception as exc:
        return None, f"itu_p1203 failed: {exc}"
