"""The collector's HTTP API under /api/v1 (docs/qoe-events.md; the OpenAPI document in
openapi.py describes the same routes)."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, Response, current_app, jsonify, request
from sqlalchemy.engine import Engine

from mpstream.server import schemas, storage, summary
from mpstream.server.openapi import openapi_document

api = Blueprint("api", __name__)
_SESSION_ID = re.compile(schemas.SESSION_ID_PATTERN)


def engine() -> Engine:
    return current_app.extensions["mpstream_engine"]


def _body() -> Any:
    """The request body as JSON, whatever its content type (sendBeacon posts text/plain)."""
    raw = request.get_data(cache=False)
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise schemas.ValidationProblem("body", f"not valid JSON ({exc})", 400) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _checked_id(session_id: str) -> str:
    if not _SESSION_ID.fullmatch(session_id):
        raise schemas.ValidationProblem(
            "session_id", f"must match {schemas.SESSION_ID_PATTERN}", 400
        )
    return session_id


def _not_found(session_id: str) -> Response:
    resp = jsonify(
        error=f"session {session_id!r} does not exist: create it with POST /api/v1/sessions",
        field="session_id",
    )
    resp.status_code = 404
    return resp


def session_filters() -> dict[str, Any]:
    """The list filters from the query string; trial must be a non-negative integer."""
    out: dict[str, Any] = {}
    for name in storage.FILTERS:
        value = request.args.get(name)
        if value is None or value == "":
            continue
        if name == "trial":
            if not value.isdigit() or int(value) > schemas.MAX_SEQ:
                raise schemas.ValidationProblem("trial", "must be a non-negative integer", 400)
            out[name] = int(value)
        else:
            if len(value) > 500 or "\x00" in value:
                raise schemas.ValidationProblem(name, "at most 500 characters, no NUL", 400)
            out[name] = value
    return out


def summaries_for(filters: dict[str, Any]) -> list[dict[str, Any]]:
    found = storage.list_sessions(engine(), filters)
    by_id = storage.get_events(engine(), [s["id"] for s in found])
    return [summary.summarize(s, by_id[s["id"]]) for s in found]


@api.get("/health")
def health() -> Any:
    storage.count_events(engine())  # proves the database answers
    return jsonify(status="ok", database=engine().dialect.name)


@api.get("/openapi.json")
def openapi() -> Any:
    return jsonify(openapi_document(noop=current_app.config["NOOP_ENDPOINT"]))


@api.post("/sessions")
def create_session() -> Any:
    session = schemas.parse_session(_body())
    result = storage.create_session(engine(), session)
    if result.conflicts:
        return (
            jsonify(
                error=f"session {session.id!r} exists with a different "
                f"{', '.join(result.conflicts)}; use a new id",
                field=result.conflicts[0],
            ),
            409,
        )
    return jsonify(id=session.id, created=result.created), 201 if result.created else 200


@api.get("/sessions")
def list_sessions() -> Any:
    return jsonify(sessions=storage.list_sessions(engine(), session_filters()))


@api.get("/sessions/<session_id>")
def get_session(session_id: str) -> Any:
    found = storage.get_session(engine(), _checked_id(session_id))
    if found is None:
        return _not_found(session_id)
    found["events"] = storage.get_events(engine(), [session_id])[session_id]
    return jsonify(found)


@api.post("/sessions/<session_id>/events")
def post_events(session_id: str) -> Any:
    _checked_id(session_id)
    batch = schemas.parse_batch(_body())
    try:
        stored, duplicates = storage.add_events(engine(), session_id, batch)
    except sa.exc.IntegrityError:
        # The events' foreign key: the session was never created.
        return _not_found(session_id)
    return jsonify(stored=stored, duplicates=duplicates)


@api.get("/sessions/<session_id>/summary")
def session_summary(session_id: str) -> Any:
    found = storage.get_session(engine(), _checked_id(session_id))
    if found is None:
        return _not_found(session_id)
    evs = storage.get_events(engine(), [session_id])[session_id]
    return jsonify(summary.summarize(found, evs))


@api.get("/summaries/grouped")
def grouped_summaries() -> Any:
    by = [k for k in request.args.get("by", "scenario,transport").split(",") if k]
    bad = [k for k in by if k not in summary.GROUP_KEYS]
    if bad or not by:
        raise schemas.ValidationProblem(
            "by", f"comma-separated names from {', '.join(summary.GROUP_KEYS)}", 400
        )
    groups = summary.grouped(summaries_for(session_filters()), by)
    return jsonify(by=by, groups=groups)


def _csv_cell(value: Any) -> Any:
    # A spreadsheet runs a cell that starts with = + - @ as a formula: quote such text.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _csv_response(header: list[str], rows: list[list[Any]], name: str) -> Response:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([[_csv_cell(v) for v in row] for row in rows])
    return Response(
        buf.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@api.get("/export/events.csv")
def export_events() -> Any:
    found = storage.list_sessions(engine(), session_filters())
    by_id = storage.get_events(engine(), [s["id"] for s in found])
    rows = [
        [s["id"], ev["seq"], ev["t_ms"], ev["type"], json.dumps(ev["data"], sort_keys=True)]
        for s in found
        for ev in by_id[s["id"]]
    ]
    return _csv_response(["session", "seq", "t_ms", "type", "data"], rows, "events.csv")


@api.get("/export/summaries.csv")
def export_summaries() -> Any:
    header = [*summary.SCALAR_FIELDS, "segment_rates_bps"]
    rows = [
        [*(s[f] for f in summary.SCALAR_FIELDS), " ".join(map(str, s["segment_rates_bps"]))]
        for s in summaries_for(session_filters())
    ]
    return _csv_response(header, rows, "summaries.csv")


@api.post("/noop")
def noop() -> Any:
    if not current_app.config["NOOP_ENDPOINT"]:
        return jsonify(error="not found", field=None), 404
    _body()
    return jsonify(stored=0, duplicates=0)
