"""Every derived QoE figure of one session, computed from its events (docs/qoe.md defines each).

The collector's summary (server/summary.py), its dashboard and the runner's report
(runner/metrics/common.py) all call `session_metrics`, so a figure means the same wherever it is
shown. Events are read through the collector's own models (mpstream.qoe.events): a dict (a run
folder's events.json, the collector's storage) is validated as the collector validated it when
it came in; pure functions, no database, no Flask.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Flag, auto
from types import UnionType
from typing import Annotated, Any, TypedDict, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, TypeAdapter

from mpstream.metric import Metric
from mpstream.qoe.events import (
    AbrDecisionEvent,
    AbrEvent,
    AnyEvent,
    BaseEvent,
    BufferEvent,
    EndEvent,
    ErrorEvent,
    LadderEvent,
    LiveLatencyEvent,
    PlaybackEvent,
    QualitySwitchEvent,
    Rung,
    SegmentData,
    SegmentEvent,
    StallEndEvent,
    StallStartEvent,
    StartupEvent,
)

# An event as it is stored ({seq, t_ms, type, data}) or already parsed.
Event = dict[str, Any] | BaseEvent
E = TypeVar("E", bound=BaseEvent)

# Segments whose download rate counts: the media the viewer waits for. Init segments are a few
# hundred bytes (their "rate" measures the round trip, not the path) and audio is a small
# parallel stream, so both are left out.
VIDEO_KINDS = ("video", "muxed")
# Events that carry the playhead's position (media seconds).
POSITION_EVENTS = (PlaybackEvent, EndEvent, BufferEvent, StallStartEvent, StallEndEvent)

_EVENTS: TypeAdapter[list[BaseEvent]] = TypeAdapter(list[AnyEvent])


def parse_events(events: Iterable[Event]) -> list[BaseEvent]:
    """The events through the collector's models, in `seq` order (the order the page recorded
    them). Parsed ones pass as they are."""
    return sorted(_EVENTS.validate_python(list(events)), key=lambda e: e.seq)


def of_type(events: Iterable[BaseEvent], kind: type[E]) -> list[E]:
    """The events of one type, in the order given."""
    return [e for e in events if isinstance(e, kind)]


# --- segments -----------------------------------------------------------------------------


def segment_rate_bps(data: SegmentData) -> float | None:
    """bytes × 8 / (t_done − t_request); undefined when no time elapsed or nothing arrived."""
    elapsed_ms = data.t_done - data.t_request
    if elapsed_ms <= 0 or not data.bytes:
        return None
    return data.bytes * 8 / (elapsed_ms / 1000)


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
    segs = [e.data for e in of_type(parse_events(events), SegmentEvent)
            if e.data.kind in VIDEO_KINDS]
    by_index: dict[int, VideoSegment] = {}
    for pos, d in enumerate(segs):
        idx = d.index if d.index is not None else pos
        by_index[idx] = VideoSegment(
            index=idx, bitrate_bps=d.bitrate, bytes=d.bytes, duration_s=d.duration_s,
            t_request=d.t_request, t_done=d.t_done, rate_bps=segment_rate_bps(d),
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
    evs = parse_events(events)
    out: list[Stall] = []
    opened: StallStartEvent | None = None
    for e in evs:
        if isinstance(e, StallStartEvent) and opened is None:
            opened = e
        elif isinstance(e, StallEndEvent) and opened is not None:
            out.append(Stall(opened.t_ms, e.data.duration_ms, opened.data.position))
            opened = None
    if opened is not None:
        last = max(e.t_ms for e in evs)
        out.append(Stall(opened.t_ms, max(0.0, last - opened.t_ms), opened.data.position,
                         open=True))
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


class LiveLatency(TypedDict):
    mean_s: float | None
    p95_s: float | None
    samples: int
    catchup_share: float | None


# A playback rate this far from 1 is the player catching up (or falling back) to its target.
CATCHUP_RATE_OFF = 0.01


def live_latency(events: Iterable[Event]) -> LiveLatency:
    """Latency to live of a session from its `live_latency` samples (one a second): mean, 95th
    percentile (linear interpolation between order statistics), the sample count, and the share
    of samples taken while the player changed its playback rate to reach its target. All None
    (count 0) for on-demand media."""
    samples = of_type(parse_events(events), LiveLatencyEvent)
    values = sorted(e.data.latency_s for e in samples)
    if not values:
        return {"mean_s": None, "p95_s": None, "samples": 0, "catchup_share": None}
    catching_up = sum(1 for e in samples if abs(e.data.playback_rate - 1) > CATCHUP_RATE_OFF)
    rank = 0.95 * (len(values) - 1)
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    p95 = values[low] + (values[high] - values[low]) * (rank - low)
    return {"mean_s": sum(values) / len(values), "p95_s": p95, "samples": len(values),
            "catchup_share": catching_up / len(values)}


def played_s(events: Iterable[Event]) -> float:
    """Media seconds played: the largest position any event reported (on-demand sessions play
    from 0 without seeking). A live session's positions are on the stream's timeline, which
    began before the session: what was played is the span from where playback started."""
    evs = parse_events(events)
    positions = [e.data.position for e in evs if isinstance(e, POSITION_EVENTS)]
    if not positions:
        return 0.0
    live = bool(of_type(evs, LiveLatencyEvent))
    return max(positions) - (min(positions) if live else 0.0)


def rendition_steps(events: Iterable[Event]) -> list[tuple[float, float]]:
    """(from t_ms, bit/s) of the rendition on screen: startup's bitrate, then each switch."""
    steps: list[tuple[float, float]] = []
    for e in parse_events(events):
        if isinstance(e, StartupEvent) and not steps:
            steps.append((e.t_ms, e.data.bitrate))
        elif isinstance(e, QualitySwitchEvent) and steps:
            steps.append((e.t_ms, e.data.to_bitrate))
    return steps


def _overlap(a: float, b: float, intervals: list[Stall]) -> float:
    return sum(max(0.0, min(b, s.end_ms) - max(a, s.start_ms)) for s in intervals)


def session_end_ms(events: Iterable[Event]) -> float:
    evs = parse_events(events)
    ends = of_type(evs, EndEvent)
    return ends[0].t_ms if ends else max(e.t_ms for e in evs)


def time_weighted_bitrate(events: Iterable[Event]) -> float | None:
    """Mean of the on-screen rendition's bitrate weighted by the wall time it was playing:
    from the startup event to the end event (or the last event), stall intervals left out."""
    evs = parse_events(events)
    steps = rendition_steps(evs)
    if not steps:
        return None
    t_end = session_end_ms(evs)
    halted = stalls(evs)
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
    return sum(1 for e in of_type(parse_events(events), QualitySwitchEvent)
               if e.data.from_bitrate is not None)


def down_switches(events: Iterable[Event]) -> int:
    """Quality switches to a lower bitrate."""
    return sum(1 for e in of_type(parse_events(events), QualitySwitchEvent)
               if e.data.from_bitrate is not None and e.data.to_bitrate < e.data.from_bitrate)


def ladder(events: Iterable[Event]) -> list[Rung] | None:
    """The representations of the session's `ladder` event, lowest first; None without one."""
    found = of_type(parse_events(events), LadderEvent)
    return list(found[0].data.representations) if found else None


def abr_name(events: Iterable[Event]) -> str | None:
    """The adaptation rule the player said it runs (its `abr` event); None when the session did
    not send one (sessions recorded before the page reported it)."""
    found = of_type(parse_events(events), AbrEvent)
    return found[0].data.name if found else None


def ladder_top_bps(events: Iterable[Event]) -> float | None:
    """The top rung of the ladder the player chose from (its `ladder` event); None when the
    session did not send one (sessions recorded before the probe sent the ladder)."""
    rungs = ladder(events)
    return max(r.bitrate for r in rungs) if rungs is not None else None


# --- the whole session --------------------------------------------------------------------


class Table(Flag):
    """The tables of figures beyond a session's own summary and the collector's CSV export,
    which take every field: a run's trial figures (runner/workloads/video.py reports each under
    its own name) and the collector's grouped statistics (server/summary.py)."""

    NONE = 0
    TRIAL = auto()
    GROUPED = auto()


TRIAL, GROUPED = Table.TRIAL, Table.GROUPED


@dataclass(frozen=True)
class Shown:
    """A session figure's declaration, on its field: the label and unit every table shows it
    with, and which tables show it (`session_figures`, `TRIAL_FIGURES`, `GROUPED_FIGURES`)."""

    label: str
    unit: str = ""
    tables: Table = Table.NONE


class SessionMetrics(BaseModel):
    """Every derived figure of one session (docs/qoe.md defines each). A figure the session
    cannot give (no startup, no segment, no ladder) is None. The collector's summary, its CSV
    export and grouped statistics, and the runner's trial figures read their names from here;
    a figure shown in a table is declared once, on its field (`Shown`)."""

    model_config = ConfigDict(frozen=True)

    codec: str | None  # the startup rendition's
    # play request to first frame, then its parts
    startup_delay_ms: Annotated[float | None, Shown("startup delay", "ms", TRIAL | GROUPED)]
    manifest_ms: Annotated[float | None, Shown("startup: manifest", "ms", TRIAL)]
    first_segment_ms: Annotated[float | None, Shown("startup: first segment", "ms", TRIAL)]
    decode_ms: Annotated[float | None, Shown("startup: decode", "ms", TRIAL)]
    stall_count: Annotated[int, Shown("stalls", "count", TRIAL | GROUPED)]
    stall_ms: Annotated[float, Shown("stall time", "ms", TRIAL | GROUPED)]
    longest_stall_ms: Annotated[float, Shown("longest stall", "ms", TRIAL | GROUPED)]
    # stall time / (stall time + played)
    rebuffer_ratio: Annotated[float | None, Shown("rebuffer ratio", "", TRIAL | GROUPED)]
    played_s: Annotated[float, Shown("played time", "s", TRIAL | GROUPED)]  # media seconds
    switches: Annotated[int, Shown("quality switches", "count", TRIAL | GROUPED)]
    down_switches: Annotated[int, Shown("switches down", "count", TRIAL)]
    # time-weighted, stalls left out (a trial reports it in Mbit/s: mean_bitrate_mbps)
    mean_bitrate_bps: Annotated[float | None, Shown("time-weighted bitrate", "bit/s", GROUPED)]
    top_bitrate_bps: float | None  # the ladder's top rung (None: no ladder event)
    # mean_bitrate_bps / top_bitrate_bps
    bitrate_utilization: Annotated[float | None,
                                   Shown("time-weighted bitrate / top rung", "", TRIAL)]
    segments: Annotated[int, Shown("video segments", "count", TRIAL)]  # video ones, by index
    downloads: int  # segment downloads of any kind
    # (a trial reports it in Mbit/s: download_rate_mbps)
    mean_download_rate_bps: Annotated[float | None,
                                      Shown("per-segment download rate", "bit/s", GROUPED)]
    # mean download rate / the paths' capacity
    download_share: Annotated[float | None,
                              Shown("download rate / sum of path rates", "", TRIAL)]
    segment_rates_bps: list[float]  # each video segment's download rate
    # (a trial's is NaN when the session never played: runner/workloads/video.py)
    dropped_frames: Annotated[int, Shown("dropped frames", "count", GROUPED)]
    total_frames: int
    errors: Annotated[int, Shown("errors", "count", GROUPED)]
    end_reason: str | None
    # None for on-demand media
    live_latency_mean_s: Annotated[float | None,
                                   Shown("latency to live, mean", "s", TRIAL | GROUPED)]
    live_latency_p95_s: Annotated[float | None, Shown("latency to live, p95", "s", TRIAL | GROUPED)]
    live_latency_samples: int
    # share of those samples at a playback rate other than 1
    live_catchup_share: Annotated[float | None, Shown(
        "time catching up to the live target (rate not 1)", "", TRIAL | GROUPED)]
    abr: str | None  # the adaptation rule the player reported (None: no abr event)
    abr_decisions: int  # abr_decision events: decisions of a rule of ours
    ladder: list[Rung] | None  # the ladder event's representations (None: none sent)


def _holds_a_list(annotation: Any) -> bool:
    args = get_args(annotation) if isinstance(annotation, UnionType) else (annotation,)
    return any(get_origin(a) is list for a in args)


# The figures with one value each (the collector's CSV columns), in the model's order.
METRIC_FIELDS = tuple(name for name, field in SessionMetrics.model_fields.items()
                      if not _holds_a_list(field.annotation))
# The declared figures (a `Shown` on their field), in the model's order.
SHOWN = {name: shown for name, field in SessionMetrics.model_fields.items()
         for shown in field.metadata if isinstance(shown, Shown)}
# Those a run's trial reports under their own names, and those the collector's grouped
# statistics describe: each table's figures, in the model's order.
TRIAL_FIGURES = tuple(name for name, shown in SHOWN.items() if TRIAL in shown.tables)
GROUPED_FIGURES = tuple(name for name, shown in SHOWN.items() if GROUPED in shown.tables)


def session_figures(*names: str) -> tuple[Metric, ...]:
    """The declarations of `names`, a choice of figures in the chooser's order, each checked to
    be a declared figure of a session (a misspelt name fails where the choice is made, not where
    it is read)."""
    unknown = [n for n in names if n not in SHOWN]
    if unknown:
        raise ValueError(f"not declared figures of a session: {', '.join(unknown)}")
    return tuple(Metric(n, SHOWN[n].label, SHOWN[n].unit) for n in names)


def session_metrics(events: Iterable[Event], *, capacity_bps: float | None = None
                    ) -> SessionMetrics:
    """Every derived figure of a session. `capacity_bps`, when known (the sum of the emulated
    paths' rates), gives download_share = mean download rate / capacity."""
    evs = parse_events(events)
    starts = of_type(evs, StartupEvent)
    startup = starts[0].data if starts else None
    halted = stall_figures(stalls(evs)) if evs else stall_figures([])
    played = played_s(evs)
    stall_s = halted["ms"] / 1000
    rates = [rate for _, rate in video_segment_rates(evs)]
    mean_rate = sum(rates) / len(rates) if rates else None
    playback = of_type(evs, PlaybackEvent)
    ends = of_type(evs, EndEvent)
    latency = live_latency(evs)
    mean_bitrate = time_weighted_bitrate(evs) if evs else None
    top = ladder_top_bps(evs)
    return SessionMetrics(
        codec=startup.codec if startup else None,
        startup_delay_ms=startup.startup_delay_ms if startup else None,
        manifest_ms=startup.manifest_ms if startup else None,
        first_segment_ms=startup.first_segment_ms if startup else None,
        decode_ms=startup.decode_ms if startup else None,
        stall_count=halted["count"],
        stall_ms=halted["ms"],
        longest_stall_ms=halted["longest_ms"],
        rebuffer_ratio=stall_s / (stall_s + played) if stall_s + played > 0 else None,
        played_s=played,
        switches=switches(evs),
        down_switches=down_switches(evs),
        mean_bitrate_bps=mean_bitrate,
        top_bitrate_bps=top,
        bitrate_utilization=mean_bitrate / top if mean_bitrate is not None and top else None,
        segments=len(video_segments(evs)),
        downloads=len(of_type(evs, SegmentEvent)),
        mean_download_rate_bps=mean_rate,
        download_share=mean_rate / capacity_bps if mean_rate is not None and capacity_bps
        else None,
        segment_rates_bps=rates,
        dropped_frames=max((e.data.dropped_frames for e in playback), default=0),
        total_frames=max((e.data.total_frames for e in playback), default=0),
        errors=len(of_type(evs, ErrorEvent)),
        end_reason=ends[0].data.reason if ends else None,
        live_latency_mean_s=latency["mean_s"],
        live_latency_p95_s=latency["p95_s"],
        live_latency_samples=latency["samples"],
        live_catchup_share=latency["catchup_share"],
        abr=abr_name(evs),
        abr_decisions=len(of_type(evs, AbrDecisionEvent)),
        ladder=ladder(evs),
    )
