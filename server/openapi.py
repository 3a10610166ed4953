"""The OpenAPI 3.1 document of the collector, built from the same pydantic models that validate
requests, so the document cannot drift from the checks."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter

from mpstream.server import schemas, storage

REF = "#/components/schemas/{model}"


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


class SummaryOut(BaseModel):
    """GET /sessions/{id}/summary (definitions in docs/qoe.md)."""

    model_config = ConfigDict(extra="forbid")
    session: str
    player: str
    transport: str
    protocol: str
    scenario: str | None
    trial: int | None
    codec: str | None
    startup_delay_ms: float | None
    manifest_ms: float | None
    first_segment_ms: float | None
    decode_ms: float | None
    stall_count: int
    stall_ms: float
    longest_stall_ms: float
    rebuffer_ratio: float | None
    played_s: float
    switches: int
    mean_bitrate_bps: float | None
    segments: int
    downloads: int
    mean_download_rate_bps: float | None
    download_share: float | None
    segment_rates_bps: list[float]
    dropped_frames: int
    total_frames: int
    errors: int
    end_reason: str | None
    live_latency_mean_s: float | None  # null for on-demand media
    live_latency_p95_s: float | None
    live_latency_samples: int
    qoe_yin: float | None
    qoe_clae: float | None
    qoe_duanmu: float | None
    qoe_yu: float | None
    score_inputs: ScoreInputsOut


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
FILTER_NAMES = ("scenario", "trial", "player", "transport", "protocol")


def _schema_of(tp: Any, components: dict[str, Any]) -> dict[str, Any]:
    schema = TypeAdapter(tp).json_schema(ref_template=REF)
    components.update(schema.pop("$defs", {}))
    return schema


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json({"$ref": REF.format(model="Error")}, description)


def _csv(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"text/csv": {"schema": {"type": "string"}}}}


_SESSION_ID_PARAM = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": schemas.SESSION_ID_PATTERN},
}


def _paging(default_limit: int | None) -> list[dict[str, Any]]:
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
    ]


def _filters() -> list[dict[str, Any]]:
    out = []
    for name in FILTER_NAMES:
        schema: dict[str, Any] = {"type": "string"}
        if name == "trial":
            schema = {"type": "integer", "minimum": 0, "maximum": schemas.MAX_SEQ}
        out.append({"name": name, "in": "query", "required": False, "schema": schema})
    return out


@cache
def openapi_document(noop: bool = False) -> dict[str, Any]:
    components: dict[str, Any] = {}
    session = _schema_of(schemas.SessionIn, components)
    components["SessionIn"] = session
    components["Event"] = _schema_of(schemas.AnyEvent, components)
    components["EventBatch"] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["events"],
        "properties": {
            "events": {
                "type": "array",
                "maxItems": schemas.MAX_EVENTS_PER_BATCH,
                "items": {"$ref": REF.format(model="Event")},
            }
        },
    }
    components["SummaryOut"] = _schema_of(SummaryOut, components)
    components["GroupedOut"] = _schema_of(GroupedOut, components)
    components["Error"] = {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string"}, "field": {"type": ["string", "null"]}},
    }
    ok = {"type": "object"}
    bad_id = _error("the session id does not match the pattern")
    missing = _error("no such session")
    paths: dict[str, Any] = {
        "/health": {"get": {"summary": "The collector and its database answer",
                            "responses": {"200": _json(ok, "healthy")}}},
        "/openapi.json": {"get": {"summary": "This document",
                                  "responses": {"200": _json(ok, "OpenAPI 3.1")}}},
        "/sessions": {
            "post": {
                "summary": "Create a session (repeating the same session is safe)",
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": REF.format(model="SessionIn")}}}},
                "responses": {
                    "201": _json(ok, "created"),
                    "200": _json(ok, "already there with the same fields"),
                    "400": _error("not JSON"),
                    "409": _error("the id exists with different fields"),
                    "413": _error("body too large"),
                    "422": _error("a field breaks its rule; `field` names it"),
                },
            },
            "get": {
                "summary": "List sessions, filtered, oldest first, a page at a time",
                "parameters": [*_filters(), *_paging(storage.PAGE_DEFAULT)],
                "responses": {"200": _json(ok, "{sessions, next_cursor}"),
                              "400": _error("bad filter, limit or cursor")},
            },
        },
        "/sessions/{session_id}": {
            "get": {
                "summary": "One session with its events in seq order",
                "parameters": [_SESSION_ID_PARAM],
                "responses": {"200": _json(ok, "the session"), "400": bad_id, "404": missing},
            }
        },
        "/sessions/{session_id}/events": {
            "post": {
                "summary": "Store a batch of events; (session, seq) already stored is skipped",
                "parameters": [_SESSION_ID_PARAM],
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": REF.format(model="EventBatch")}}}},
                "responses": {
                    "200": _json(ok, "committed: counts of stored and duplicate events"),
                    "400": _error("not JSON or bad session id"),
                    "404": missing,
                    "413": _error("body too large"),
                    "422": _error("an event breaks its schema; `field` names it"),
                },
            }
        },
        "/sessions/{session_id}/summary": {
            "get": {
                "summary": "The session's QoE summary (docs/qoe-events.md)",
                "parameters": [_SESSION_ID_PARAM],
                "responses": {"200": _json({"$ref": REF.format(model="SummaryOut")}, "summary"),
                              "400": bad_id, "404": missing},
            }
        },
        "/summaries/grouped": {
            "get": {
                "summary": "Mean, sd, 95 % CI and n of each metric per group",
                "parameters": [
                    {"name": "by", "in": "query", "required": False,
                     "schema": {"type": "string", "default": "scenario,transport"}},
                    *_filters(),
                ],
                "responses": {"200": _json({"$ref": REF.format(model="GroupedOut")}, "groups"),
                              "400": _error("bad grouping")},
            }
        },
        "/export/events.csv": {
            "get": {"summary": "Every event as CSV, streamed",
                    "parameters": [*_filters(), *_paging(None)],
                    "responses": {"200": _csv("CSV"), "400": _error("bad filter, limit or cursor")}}
        },
        "/export/summaries.csv": {
            "get": {"summary": "One summary row per session as CSV, streamed",
                    "parameters": [*_filters(), *_paging(None)],
                    "responses": {"200": _csv("CSV"), "400": _error("bad filter, limit or cursor")}}
        },
    }  # fmt: skip
    if noop:
        paths["/noop"] = {
            "post": {
                "summary": "Reads the body and stores nothing (benchmark baseline)",
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": REF.format(model="EventBatch")}}}},
                "responses": {"200": _json(ok, "read"), "400": _error("not JSON")},
            }
        }  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {"title": "mpstream QoE collector", "version": "1"},
        "servers": [{"url": "/api/v1"}],
        "paths": paths,
        "components": {"schemas": components},
    }
