"""What the collector takes in: a session record, and batches of QoE events (the events' models
are mpstream/qoe/events.py, the vocabulary the collector and every QoE figure share), validated
strictly; a refusal names the field and the rule it broke (docs/qoe-events.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)

from mpstream.qoe.events import (
    EVENT_MODELS,
    MAX_SEQ,
    AnyEvent,
    BaseEvent,
    NonEmptyText100,
    Strict,
    Text200,
    Text500,
    Url,
)
from mpstream.transports.base import NAME_PATTERN

MAX_EVENTS_PER_BATCH = 500
MAX_BODY_BYTES = 1024 * 1024
SESSION_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


def _iso8601(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO 8601 date and time, e.g. 2026-01-31T12:00:00Z") from None
    return parsed.isoformat()


IsoDateTime = Annotated[
    str,
    StringConstraints(min_length=10, max_length=64),
    AfterValidator(_iso8601),
    WithJsonSchema({"type": "string", "format": "date-time", "maxLength": 64}),
]

SessionId = Annotated[str, StringConstraints(pattern=SESSION_ID_PATTERN)]
# A transport's registered name (mpstream.transports: mptcp, tcp, …) or "unknown"; a name, not a
# closed list, so that a new transport's sessions are taken without a change here.
TransportName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


class SessionIn(Strict):
    id: SessionId
    player: Literal["hlsjs", "dashjs"]
    player_version: NonEmptyText100
    protocol: Literal["hls", "dash"]
    manifest: Url
    scenario: Text200 | None
    trial: Annotated[int, Field(ge=0, le=MAX_SEQ)] | None
    transport: TransportName
    user_agent: Text500
    started_at: IsoDateTime


class ValidationProblem(Exception):
    """Bad input: `field` is a dotted path into the body, `message` says which rule broke."""

    def __init__(self, field: str, message: str, status: int = 422):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.status = status


def _field_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path or "body"


def _first_problem(exc: ValidationError, prefix: tuple[Any, ...] = ()) -> ValidationProblem:
    err = exc.errors(include_url=False)[0]
    loc = prefix + tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        return ValidationProblem(_field_path(loc), "unknown field")
    if err["type"] == "missing":
        return ValidationProblem(_field_path(loc), "required field is missing")
    return ValidationProblem(_field_path(loc), err["msg"])


_SESSION: TypeAdapter[SessionIn] = TypeAdapter(SessionIn)
_BATCH: TypeAdapter[list[BaseEvent]] = TypeAdapter(list[AnyEvent])


def parse_session(body: Any) -> SessionIn:
    if not isinstance(body, dict):
        raise ValidationProblem("body", "must be a JSON object")
    try:
        return _SESSION.validate_python(body)
    except ValidationError as exc:
        raise _first_problem(exc) from None


def parse_batch(body: Any) -> list[BaseEvent]:
    """Validate an events batch; the first problem found is raised, naming its field."""
    if not isinstance(body, dict):
        raise ValidationProblem("body", "must be a JSON object with an `events` list")
    extra = sorted(set(body) - {"events"})
    if extra:
        raise ValidationProblem(extra[0], "unknown field")
    events = body.get("events")
    if events is None:
        raise ValidationProblem("events", "required field is missing")
    if not isinstance(events, list):
        raise ValidationProblem("events", "must be a list")
    if len(events) > MAX_EVENTS_PER_BATCH:
        raise ValidationProblem("events", f"at most {MAX_EVENTS_PER_BATCH} events per batch")
    try:
        # Fast path: the whole batch in one call into pydantic-core.
        batch = _BATCH.validate_python(events)
    except ValidationError:
        pass
    else:
        seqs = [ev.seq for ev in batch]
        if len(set(seqs)) == len(seqs):
            return batch
    # Slow path, event by event, to name the first field that breaks a rule.
    parsed: list[BaseEvent] = []
    seen: set[int] = set()
    for i, raw in enumerate(events):
        if not isinstance(raw, dict):
            raise ValidationProblem(f"events[{i}]", "must be a JSON object")
        type_name = raw.get("type")
        model = EVENT_MODELS.get(type_name) if isinstance(type_name, str) else None
        if model is None:
            allowed = ", ".join(EVENT_MODELS)
            raise ValidationProblem(
                f"events[{i}].type", f"unknown event type {type_name!r}; expected one of {allowed}"
            )
        try:
            event = model.model_validate(raw)
        except ValidationError as exc:
            raise _first_problem(exc, ("events", i)) from None
        if event.seq in seen:
            raise ValidationProblem(f"events[{i}].seq", f"seq {event.seq} is twice in the batch")
        seen.add(event.seq)
        parsed.append(event)
    return parsed
