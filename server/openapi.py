"""The OpenAPI 3.1 document of the collector, generated from the app's own routes.

Each API view carries its operation: `@operation`, under the route decorator, gives its summary,
parameters, request body and responses, the bodies named by the pydantic models that validate
them (schemas.py) or describe them (below). `openapi_document` walks the app's URL map and writes
a path for every route under the API's prefix whose view has one. A path the app does not serve
cannot be described, and a route without `@operation` is missing from the document, which
tests/unit/test_server_api.py catches.

No library makes this here without changing the API's contract: flask-openapi3 and APIFlask
replace the Flask class and validate requests themselves, with their own error bodies, from the
models they document, where this API reads beacons sent as text/plain and answers every refusal
as {error, field}; spectree keeps one app and one document per module-level instance, where the
app factory makes many apps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from flask import Flask
from pydantic import BaseModel, ConfigDict, Field, RootModel, TypeAdapter, create_model

from mpstream.qoe.metrics import SessionMetrics
from mpstream.server import schemas, storage

REF = "#/components/schemas/{model}"
View = TypeVar("View", bound=Callable[..., Any])


class ScoreInputsOut(BaseModel):
    """What the QoE scores were computed from (docs/qoe.md)."""

    model_config = ConfigDict(extra="forbid")
    segments: int
    bitrates_kbps: list[float]
    top_bitrate_kbps: float
    startup_s: float
    stall_count: int
    stall_s: float
    played_s: float
    media_s: float
    rate_change_sum_kbps: float
    rate_changes: int
    yu_switching_mbps: float | None


class RungOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bitrate: float
    width: int
    height: int
    codec: str


class _SessionOut(BaseModel):
    """A summary's first fields: the session's identity."""

    session: str
    player: str
    transport: str  # what the session asked for (the page's `transport` parameter)
    measured_transport: str | None  # what the server saw carry it: mptcp or tcp (null: unseen)
    measured_subflows: int | None
    protocol: str
    scenario: str | None
    trial: int | None


class _ScoresOut(BaseModel):
    """A summary's last fields: the scores and what they were computed from."""

    qoe_yin: float | None
    qoe_clae: float | None
    qoe_duanmu: float | None
    qoe_yu: float | None
    score_inputs: ScoreInputsOut


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    return {name: (f.annotation, f) for name, f in model.model_fields.items()}


# The session's identity, every figure of mpstream.qoe's SessionMetrics (its ladder's rungs as
# the plain numbers the API sends), then the scores.
SummaryOut = create_model(
    "SummaryOut",
    __config__=ConfigDict(extra="forbid"),
    __doc__="GET /sessions/{id}/summary (definitions in docs/qoe.md).",
    **{**_fields(_SessionOut), **_fields(SessionMetrics),
       "ladder": (list[RungOut] | None, ...), **_fields(_ScoresOut)},
)


class StatsOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int
    mean: float | None
    sd: float | None
    ci95_low: float | None
    ci95_high: float | None


class GroupOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    group: dict[str, str | int | None]
    n: int
    metrics: dict[str, StatsOut]


class GroupedOut(BaseModel):
    """GET /summaries/grouped"""

    model_config = ConfigDict(extra="forbid")
    by: list[str]
    groups: list[GroupOut]


class Event(RootModel[schemas.AnyEvent]):
    """One QoE event, told apart by `type` (docs/qoe-events.md)."""


class EventBatch(BaseModel):
    """The body of POST /sessions/{id}/events, as schemas.parse_batch checks it."""

    model_config = ConfigDict(extra="forbid")
    events: list[Event] = Field(max_length=schemas.MAX_EVENTS_PER_BATCH)


class Error(BaseModel):
    """Every refusal of the API: what broke, and in which field (null when none)."""

    error: str
    field: str | None = None


# --- what a view declares ---


@dataclass(frozen=True)
class Reply:
    description: str
    schema: Any  # a pydantic model or type, or a JSON Schema as a dict
    media_type: str = "application/json"


def ok(description: str, model: Any = None) -> Reply:
    """A JSON reply: `model` when given, else any object."""
    return Reply(description, {"type": "object"} if model is None else model)


def refused(description: str) -> Reply:
    return Reply(description, Error)


def csv_reply(description: str) -> Reply:
    return Reply(description, str, "text/csv")


@dataclass(frozen=True)
class Operation:
    summary: str
    responses: Mapping[int, Reply]
    body: Any = None
    query: Sequence[Mapping[str, Any]] = ()
    path: Mapping[str, Any] = field(default_factory=dict)  # path parameter -> its type


def operation(summary: str, *, responses: Mapping[int, Reply], body: Any = None,
              query: Sequence[Mapping[str, Any]] = (),
              path: Mapping[str, Any] | None = None) -> Callable[[View], View]:
    """Describe the view for the OpenAPI document; apply it below the route decorator."""

    def describe(view: View) -> View:
        view.openapi = Operation(summary, responses, body, tuple(query), path or {})  # type: ignore[attr-defined]
        return view

    return describe


def filter_params() -> list[dict[str, Any]]:
    """The session filters (api.session_filters) as query parameters."""
    out = []
    for name in storage.FILTERS:
        schema: dict[str, Any] = {"type": "string"}
        if name == "trial":
            schema = {"type": "integer", "minimum": 0, "maximum": schemas.MAX_SEQ}
        out.append({"name": name, "in": "query", "required": False, "schema": schema})
    return out


def paging_params(default_limit: int | None) -> list[dict[str, Any]]:
    """`limit` and `cursor` (api.page_args) as query parameters."""
    limit: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": storage.PAGE_MAX}
    if default_limit is not None:
        limit["default"] = default_limit
    return [
        {"name": "limit", "in": "query", "required": False, "schema": limit,
         "description": "at most this many sessions" + ("" if default_limit else
                                                        " (default: all, streamed)")},
        {"name": "cursor", "in": "query", "required": False,
         "schema": {"type": "string", "pattern": schemas.SESSION_ID_PATTERN},
         "description": "next_cursor of the page before (X-Next-Cursor for CSV)"},
    ]  # fmt: skip


# --- the document ---

_ARGUMENT = re.compile(r"<(?:[^<>:]+:)?([^<>]+)>")


class _Components:
    """The document's named schemas, each model's added the first time it is referred to."""

    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {}

    def schema(self, tp: Any) -> dict[str, Any]:
        if isinstance(tp, dict):
            return tp
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            name = tp.__name__
            if name not in self.schemas:
                self.schemas[name] = self._inline(tp)
            return {"$ref": REF.format(model=name)}
        return self._inline(tp)

    def _inline(self, tp: Any) -> dict[str, Any]:
        schema = TypeAdapter(tp).json_schema(ref_template=REF)
        self.schemas.update(schema.pop("$defs", {}))
        return schema


def _operation(op: Operation, rule: str, components: _Components) -> dict[str, Any]:
    params: list[Mapping[str, Any]] = []
    for name in _ARGUMENT.findall(rule):
        if name not in op.path:
            raise LookupError(f"{rule}: give the path parameter {name!r} a type "
                              f"in @operation(path=...)")
        params.append({"name": name, "in": "path", "required": True,
                       "schema": components.schema(op.path[name])})
    params.extend(op.query)
    out: dict[str, Any] = {"summary": op.summary}
    if params:
        out["parameters"] = params
    if op.body is not None:
        out["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": components.schema(op.body)}}}
    out["responses"] = {
        str(status): {"description": reply.description,
                      "content": {reply.media_type: {"schema": components.schema(reply.schema)}}}
        for status, reply in op.responses.items()
    }
    return out


def build_document(app: Flask, prefix: str) -> dict[str, Any]:
    """The document of the routes that carry an @operation: those under `prefix` relative to
    it, any other (an app that adds its own, such as the run pages' /api/runs) relative to its
    first folder, named as the path's own server."""
    components = _Components()
    paths: dict[str, dict[str, Any]] = {}
    for rule in app.url_map.iter_rules():
        op = getattr(app.view_functions[rule.endpoint], "openapi", None)
        if op is None:
            continue
        base = prefix if rule.rule.startswith(prefix + "/") else "/" + rule.rule.split("/")[1]
        path = _ARGUMENT.sub(r"{\1}", rule.rule.removeprefix(base))
        item = paths.setdefault(path, {})
        if base != prefix:
            item["servers"] = [{"url": base}]
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            item[method.lower()] = _operation(op, rule.rule, components)
    return {
        "openapi": "3.1.0",
        "info": {"title": "mpstream QoE collector", "version": "1"},
        "servers": [{"url": prefix}],
        "paths": paths,
        "components": {"schemas": dict(sorted(components.schemas.items()))},
    }


def openapi_document(app: Flask, prefix: str) -> dict[str, Any]:
    """build_document, made once per app."""
    key = "mpstream_openapi"
    if key not in app.extensions:
        app.extensions[key] = build_document(app, prefix)
    return app.extensions[key]
