"""The QoE events as strict pydantic models: the vocabulary the player's probe sends, the
collector validates (server/schemas.py) and every QoE figure is computed from (metrics.py).
docs/qoe-events.md is the prose of this file.

Strict means: no type coercion ("5" is not an int, 1.5 is not an int, 1 is not a bool), every
field required unless the doc says null is allowed, unknown fields rejected, numbers finite and
in range, strings bounded and free of NUL and lone surrogates (neither SQLite's UTF-8 nor
PostgreSQL's text can hold them, so letting them through would turn bad input into a 5xx).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from mpstream.qoe.abrcatalog import our_rules

# Bounds that keep every number representable in a 64-bit column and in a JS double.
MAX_INT = 2**53
MAX_SEQ = 2**31 - 1
MAX_MS = 1e12


def _storable_text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("must be valid Unicode (no lone surrogates)") from exc
    return value


# Bounded text that a database can store: Text<max> (or NonEmptyText<max>) is a str of at most
# max characters, without NUL or lone surrogates.
_STORABLE = AfterValidator(_storable_text)
Text200 = Annotated[str, StringConstraints(min_length=0, max_length=200), _STORABLE]
Text500 = Annotated[str, StringConstraints(min_length=0, max_length=500), _STORABLE]
Text2000 = Annotated[str, StringConstraints(min_length=0, max_length=2000), _STORABLE]
Text100 = Annotated[str, StringConstraints(min_length=0, max_length=100), _STORABLE]
NonEmptyText100 = Annotated[str, StringConstraints(min_length=1, max_length=100), _STORABLE]
Url = Annotated[str, StringConstraints(min_length=1, max_length=2048), _STORABLE]
Codec = Annotated[str, StringConstraints(min_length=0, max_length=100), _STORABLE]
Ms = Annotated[float, Field(ge=0, le=MAX_MS)]
Seconds = Annotated[float, Field(ge=0, le=MAX_MS / 1000)]
Count = Annotated[int, Field(ge=0, le=MAX_INT)]
Bitrate = Annotated[float, Field(ge=0, le=1e12)]
Pixels = Annotated[int, Field(ge=0, le=100_000)]


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)



# --- event data, one model per type ---


class ManifestData(Strict):
    url: Url
    t_request: Ms
    t_done: Ms
    bytes: Count


class StartupData(Strict):
    startup_delay_ms: Ms
    manifest_ms: Ms
    first_segment_ms: Ms
    decode_ms: Ms
    codec: Codec
    width: Pixels
    height: Pixels
    bitrate: Bitrate


class SegmentData(Strict):
    url: Url
    kind: Literal["video", "audio", "init", "muxed"]
    bitrate: Bitrate
    bytes: Count
    t_request: Ms
    t_first_byte: Ms
    t_done: Ms
    index: Count | None
    duration_s: Seconds | None
    # A low-latency part of segment `index` (LL-HLS loads a segment part by part).
    part: Count | None = None


class StallStartData(Strict):
    position: Seconds


class StallEndData(Strict):
    position: Seconds
    duration_ms: Ms


class QualitySwitchData(Strict):
    # null when the player reports its first choice of rendition (not counted as a switch)
    from_bitrate: Bitrate | None
    to_bitrate: Bitrate
    width: Pixels
    height: Pixels
    codec: Codec


class BufferData(Strict):
    level_s: Seconds
    position: Seconds


class PlaybackData(Strict):
    position: Seconds
    dropped_frames: Count
    total_frames: Count


class LiveLatencyData(Strict):
    # Once a second on a live stream: the live edge minus the playhead (hls.js `latency`;
    # dash.js `getCurrentLiveLatency()`, against the server's clock from the MPD's UTCTiming).
    latency_s: Seconds
    target_s: Seconds | None  # what the player aims for (the page's target_latency)
    playback_rate: Annotated[float, Field(ge=0, le=16)]  # > 1 while catching up


class ErrorData(Strict):
    message: Text2000
    fatal: bool
    code: Text200 | None


class Rung(Strict):
    bitrate: Bitrate
    width: Pixels
    height: Pixels
    codec: Codec


class LadderData(Strict):
    # Once, when the player knows it: the video representations it may choose from (those the
    # browser can decode), lowest bitrate first.
    representations: Annotated[list[Rung], Field(min_length=1, max_length=64)]


AbrName = Annotated[str, StringConstraints(min_length=1, max_length=40), _STORABLE]
ParamName = Annotated[str, StringConstraints(min_length=1, max_length=40), _STORABLE]
AbrParams = Annotated[dict[ParamName, Annotated[float, Field(ge=0, le=1e12)]],
                      Field(max_length=16)]


class AbrData(Strict):
    # Once, after the player is configured: the adaptation rule it says it runs (the page reads
    # its settings back), the player's own rule names, and the rule's numeric parameters.
    name: AbrName
    player_rules: Annotated[list[Text100], Field(max_length=16)]
    params: AbrParams


class PastDownload(Strict):
    bytes: Count
    t_request: Ms
    t_done: Ms
    predicted_bps: Bitrate | None  # RobustMPC's prediction for this download, if it made one


class PathInput(Strict):
    # One path as a rule that reads the paths was given it (player/src/abr/paths.js): its rate,
    # whether the path policy holds it back now or spares it, and whether it delivers.
    address: Annotated[str, Field(min_length=2, max_length=45)]  # the client's, on the path
    bps: Bitrate
    held: bool
    spared: bool
    live: bool


class AbrInputs(Strict):
    ladder_bps: Annotated[list[Bitrate], Field(min_length=1, max_length=64)]
    buffer_s: Seconds
    segment_s: Seconds
    previous: Annotated[int, Field(ge=0, le=63)] | None
    past: Annotated[list[PastDownload], Field(max_length=10)]
    # Only for a rule that reads the paths (catalog.json "inputs"); null before any is measured.
    paths: Annotated[list[PathInput], Field(max_length=16)] | None = None


if TYPE_CHECKING:
    OurRule = str
else:
    # One of our rules, by the name the player's catalog gives it (player/src/abr/catalog.json,
    # which the page reads too): a Literal of the catalog's names, so the check, its error and
    # the JSON Schema's enum are those of a Literal written out.
    OurRule = Literal[our_rules()]


class AbrDecisionData(Strict):
    # One decision of a rule of ours: exactly what the rule was given (inputs, params) and what
    # it chose, so that the decision can be recomputed offline (docs/abr.md).
    rule: OurRule
    inputs: AbrInputs
    params: AbrParams
    index: Annotated[int, Field(ge=0, le=63)]
    bitrate: Bitrate
    estimate_bps: Bitrate | None


class EndData(Strict):
    reason: Literal["ended", "duration", "error", "closed"]
    position: Seconds


EVENT_DATA: dict[str, type[Strict]] = {
    "manifest": ManifestData,
    "startup": StartupData,
    "segment": SegmentData,
    "stall_start": StallStartData,
    "stall_end": StallEndData,
    "quality_switch": QualitySwitchData,
    "buffer": BufferData,
    "playback": PlaybackData,
    "live_latency": LiveLatencyData,
    "ladder": LadderData,
    "abr": AbrData,
    "abr_decision": AbrDecisionData,
    "error": ErrorData,
    "end": EndData,
}


# --- events: seq, t_ms, the type's name and its data ---


class BaseEvent(Strict):
    # What every event has; each type below narrows `type` to its name and `data` to its model.
    seq: Annotated[int, Field(ge=0, le=MAX_SEQ)]
    t_ms: Ms
    type: str
    data: Strict


class ManifestEvent(BaseEvent):
    type: Literal["manifest"]
    data: ManifestData


class StartupEvent(BaseEvent):
    type: Literal["startup"]
    data: StartupData


class SegmentEvent(BaseEvent):
    type: Literal["segment"]
    data: SegmentData


class StallStartEvent(BaseEvent):
    type: Literal["stall_start"]
    data: StallStartData


class StallEndEvent(BaseEvent):
    type: Literal["stall_end"]
    data: StallEndData


class QualitySwitchEvent(BaseEvent):
    type: Literal["quality_switch"]
    data: QualitySwitchData


class BufferEvent(BaseEvent):
    type: Literal["buffer"]
    data: BufferData


class PlaybackEvent(BaseEvent):
    type: Literal["playback"]
    data: PlaybackData


class LiveLatencyEvent(BaseEvent):
    type: Literal["live_latency"]
    data: LiveLatencyData


class LadderEvent(BaseEvent):
    type: Literal["ladder"]
    data: LadderData


class AbrEvent(BaseEvent):
    type: Literal["abr"]
    data: AbrData


class AbrDecisionEvent(BaseEvent):
    type: Literal["abr_decision"]
    data: AbrDecisionData


class ErrorEvent(BaseEvent):
    type: Literal["error"]
    data: ErrorData


class EndEvent(BaseEvent):
    type: Literal["end"]
    data: EndData


# In EVENT_DATA's order (tests/unit/test_event_schema.py checks that the two agree).
EVENT_MODELS: dict[str, type[BaseEvent]] = {
    "manifest": ManifestEvent,
    "startup": StartupEvent,
    "segment": SegmentEvent,
    "stall_start": StallStartEvent,
    "stall_end": StallEndEvent,
    "quality_switch": QualitySwitchEvent,
    "buffer": BufferEvent,
    "playback": PlaybackEvent,
    "live_latency": LiveLatencyEvent,
    "ladder": LadderEvent,
    "abr": AbrEvent,
    "abr_decision": AbrDecisionEvent,
    "error": ErrorEvent,
    "end": EndEvent,
}
# The union the OpenAPI document describes; parse_batch dispatches on `type` itself so that an
# unknown type gets its own clear message.
AnyEvent = Annotated[
    ManifestEvent
    | StartupEvent
    | SegmentEvent
    | StallStartEvent
    | StallEndEvent
    | QualitySwitchEvent
    | BufferEvent
    | PlaybackEvent
    | LiveLatencyEvent
    | LadderEvent
    | AbrEvent
    | AbrDecisionEvent
    | ErrorEvent
    | EndEvent,
    Field(discriminator="type"),
]
