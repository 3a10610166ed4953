"""The collector's HTTP API under /api/v1 (docs/qoe-events.md). Each view carries its OpenAPI
operation (@operation, openapi.py), from which GET /api/v1/openapi.json is generated."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import sqlalchemy as sa
from flask import Blueprint, Response, current_app, jsonify, request, stream_with_context
from sqlalchemy.engine import Engine

from mpstream.server import schemas, seen, storage, summary
from mpstream.server.openapi import (
    EventBatch,
    GroupedOut,
    SummaryOut,
    csv_reply,
    filter_params,
    ok,
    openapi_document,
    operation,
    paging_params,
    refused,
)

API_PREFIX = "/api/v1"
api = Blueprint("api", __name__)
# POST /noop, registered (under API_PREFIX) only when the app is made with noop_endpoint.
noop_api = Blueprint("noop", __name__)
SESSION_PATH = {"session_id": schemas.SessionId}
BAD_ID = refused("the session id does not match the pattern")
MISSING = refused("no such session")
BAD_PAGE = refused("bad filter, limit or cursor")
DEFAULT_GROUPING = "scenario,transport"
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


def page_args(default_limit: int | None = storage.PAGE_DEFAULT) -> tuple[int | None, str | None]:
    """`limit` (1 … PAGE_MAX; `default_limit` when absent) and `cursor` (the `next_cursor` of
    the previous page: the id of its last session) from the query string."""
    raw = request.args.get("limit") or ""
    limit = default_limit
    if raw:
        if not raw.isdigit() or not 1 <= int(raw) <= storage.PAGE_MAX:
            raise schemas.ValidationProblem(
                "limit", f"must be an integer from 1 to {storage.PAGE_MAX}", 400)
        limit = int(raw)
    cursor = request.args.get("cursor") or None
    if cursor is not None and (not _SESSION_ID.fullmatch(cursor)
                               or not storage.session_exists(engine(), cursor)):
        raise schemas.ValidationProblem(
            "cursor", "not a session of this collector: give the next_cursor of the page "
            "before (or no cursor for the first page)", 400)
    return limit, cursor


def sessions_page(filters: dict[str, Any], limit: int | None, cursor: str | None
                 ) -> tuple[list[dict[str, Any]], str | None]:
    """One page of sessions and the cursor of the next (None on the last page)."""
    if limit is None:
        return storage.list_sessions(engine(), filters, after=cursor), None
    found = storage.list_sessions(engine(), filters, limit=limit + 1, after=cursor)
    more = len(found) > limit
    found = found[:limit]
    return found, found[-1]["id"] if more and found else None


def summarize_sessions(found: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Summaries of the given sessions, their events read a page at a time."""
    for i in range(0, len(found), 200):
        chunk = found[i:i + 200]
        by_id = storage.get_events(engine(), [s["id"] for s in chunk])
        for s in chunk:
            yield summary.summarize(s, by_id[s["id"]])


def summaries_for(filters: dict[str, Any]) -> list[dict[str, Any]]:
    """Every matching session's summary (the grouped statistics need them all)."""
    return list(summarize_sessions(list(storage.iter_sessions(engine(), filters))))


@api.get("/health")
@operation("The collector and its database answer", responses={200: ok("healthy")})
def health() -> Any:
    storage.count_events(engine())  # proves the database answers
    return jsonify(status="ok", database=engine().dialect.name)


@api.get("/openapi.json")
@operation("This document", responses={200: ok("OpenAPI 3.1")})
def openapi() -> Any:
    return jsonify(openapi_document(current_app, API_PREFIX))


@api.post("/sessions")
@operation(
    "Create a session (repeating the same session is safe)",
    body=schemas.SessionIn,
    responses={
        201: ok("created"),
        200: ok("already there with the same fields"),
        400: refused("not JSON"),
        409: refused("the id exists with different fields"),
        413: refused("body too large"),
        422: refused("a field breaks its rule; `field` names it"),
    },
)
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
@operation(
    "List sessions, filtered, oldest first, a page at a time",
    query=[*filter_params(), *paging_params(storage.PAGE_DEFAULT)],
    responses={200: ok("{sessions, next_cursor}"), 400: BAD_PAGE},
)
def list_sessions() -> Any:
    found, next_cursor = sessions_page(session_filters(), *page_args())
    return jsonify(sessions=found, next_cursor=next_cursor)


@api.get("/sessions/<session_id>")
@operation(
    "One session with its events in seq order",
    path=SESSION_PATH,
    responses={200: ok("the session"), 400: BAD_ID, 404: MISSING},
)
def get_session(session_id: str) -> Any:
    found = storage.get_session(engine(), _checked_id(session_id))
    if found is None:
        return _not_found(session_id)
    found["events"] = storage.get_events(engine(), [session_id])[session_id]
    return jsonify(found)


AFTER_PARAM = {"name": "after", "in": "query", "required": False,
               "schema": {"type": "integer", "minimum": 0, "maximum": schemas.MAX_SEQ},
               "description": "only the events whose seq is above this one (default: all)"}


def _after_seq() -> int:
    """`after` from the query string: a reader that polls asks only for what it has not seen
    (-1 when absent: every event)."""
    raw = request.args.get("after", "")
    if raw == "":
        return -1
    if not raw.isdigit() or int(raw) > schemas.MAX_SEQ:
        raise schemas.ValidationProblem("after", "must be a non-negative integer", 400)
    return int(raw)


@api.get("/sessions/<session_id>/events")
@operation(
    "The session's events in seq order: every one, or those after a seq",
    path=SESSION_PATH,
    query=[AFTER_PARAM],
    responses={200: ok("{events}"), 400: refused("bad session id or `after`"), 404: MISSING},
)
def get_session_events(session_id: str) -> Any:
    _checked_id(session_id)
    after = _after_seq()
    if not storage.session_exists(engine(), session_id):
        return _not_found(session_id)
    found = storage.get_events(engine(), [session_id], after_seq=after)[session_id]
    return jsonify(events=found)


@api.post("/sessions/<session_id>/events")
@operation(
    "Store a batch of events; (session, seq) already stored is skipped",
    path=SESSION_PATH,
    body=EventBatch,
    responses={
        200: ok("committed: counts of stored and duplicate events"),
        400: refused("not JSON or bad session id"),
        404: MISSING,
        413: refused("body too large"),
        422: refused("an event breaks its schema; `field` names it"),
    },
)
def post_events(session_id: str) -> Any:
    _checked_id(session_id)
    batch = schemas.parse_batch(_body())
    try:
        stored, duplicates = storage.add_events(engine(), session_id, batch)
    except sa.exc.IntegrityError:
        # The events' foreign key: the session was never created.
        return _not_found(session_id)
    return jsonify(stored=stored, duplicates=duplicates)


# What nginx says of the connection a request came on (nginx.conf.j2, location /api/).
CONNECTION_HEADERS = ("X-Forwarded-For", "X-Client-Port", "X-Server-Addr", "X-Server-Port")


def _connection() -> tuple[tuple[str, int], tuple[str, int]] | str:
    """(server, client) addresses and ports of the connection this request came on, as nginx
    passed them, or why they are not known."""
    values = [request.headers.get(name, "") for name in CONNECTION_HEADERS]
    if not all(values):
        return ("the request did not come through mpstream's nginx, which names its "
                "connection (" + ", ".join(CONNECTION_HEADERS) + ")")
    client, client_port, server, server_port = values
    if not (client_port.isdigit() and server_port.isdigit()):
        return "nginx passed no port numbers for the connection"
    return (server, int(server_port)), (client.split(",")[0].strip(), int(client_port))


T = TypeVar("T")


class NotLookedUp(Exception):
    """The server's kernel could not be asked about this request's connection: the answer is
    {measured: false, reason} (200: the page goes on without the figure)."""


@api.errorhandler(NotLookedUp)
def _not_looked_up(exc: NotLookedUp) -> Response:
    return jsonify(measured=False, reason=str(exc))


def _looked_up(session_id: str, look: Callable[[tuple[str, int], tuple[str, int]], T]) -> T:
    """`look` (server/seen.py) of the connection this request came on, given as (server,
    client) addresses; NotLookedUp says why it could not be looked up."""
    _checked_id(session_id)
    found = _connection()
    if isinstance(found, str):
        raise NotLookedUp(found)
    try:
        return look(*found)
    except (seen.NotFound, ValueError, OSError) as exc:
        raise NotLookedUp(str(exc)) from exc


@api.post("/sessions/<session_id>/transport")
@operation(
    "Measure the transport of the connection this request came on (MPTCP with its subflows, "
    "or TCP) as the server's kernel sees it, keep it with the session and return it",
    path=SESSION_PATH,
    responses={200: ok("{measured, transport, subflows, label} or {measured: false, reason}"),
               400: BAD_ID},
)
def measure_transport(session_id: str) -> Any:
    result, client = _looked_up(session_id,
                                lambda server, client: (seen.connection(server, client), client))
    storage.record_measured(engine(), session_id, result.transport, result.subflows)
    return jsonify(measured=True, transport=result.transport, subflows=result.subflows,
                   label=result.describe(), client=f"{client[0]}:{client[1]}")


@api.get("/sessions/<session_id>/paths")
@operation(
    "What each path of the asking client's connections carries, as the server's sender sees "
    "it (server/seen.py: PathFigure), for the page's multipath-aware adaptation rule; nothing "
    "is kept",
    path=SESSION_PATH,
    responses={200: ok("{measured, paths: [{address, subflows, delivery_bps, app_limited, "
                       "rtt_ms, bytes_acked, backup, waiting_ms}]} or {measured: false, reason}"),
               400: BAD_ID},
)
def path_figures(session_id: str) -> Any:
    found = _looked_up(session_id, seen.paths)
    return jsonify(measured=True, paths=[f.as_json() for f in found])


@api.get("/sessions/<session_id>/summary")
@operation(
    "The session's QoE summary (docs/qoe-events.md)",
    path=SESSION_PATH,
    responses={200: ok("summary", SummaryOut), 400: BAD_ID, 404: MISSING},
)
def session_summary(session_id: str) -> Any:
    found = storage.get_session(engine(), _checked_id(session_id))
    if found is None:
        return _not_found(session_id)
    evs = storage.get_events(engine(), [session_id])[session_id]
    return jsonify(summary.summarize(found, evs))


@api.get("/summaries/grouped")
@operation(
    "Mean, sd, 95 % CI and n of each metric per group",
    query=[{"name": "by", "in": "query", "required": False,
            "schema": {"type": "string", "default": DEFAULT_GROUPING}},
           *filter_params()],
    responses={200: ok("groups", GroupedOut), 400: refused("bad grouping")},
)  # fmt: skip
def grouped_summaries() -> Any:
    by = [k for k in request.args.get("by", DEFAULT_GROUPING).split(",") if k]
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


def _csv_stream(header: list[str], rows: Iterable[list[Any]], name: str,
                next_cursor: str | None) -> Response:
    """CSV written as it is produced: a large export never sits in memory whole."""

    def lines() -> Iterator[str]:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([_csv_cell(v) for v in row])
            if buf.tell() > 64 * 1024:
                yield buf.getvalue()
                buf.seek(0)
                buf.truncate()
        yield buf.getvalue()

    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    if next_cursor is not None:
        headers["X-Next-Cursor"] = next_cursor
    return Response(stream_with_context(lines()), mimetype="text/csv", headers=headers)


def _export_sessions() -> tuple[Iterable[dict[str, Any]], str | None]:
    """The sessions an export covers: with `limit`, one page (and the next cursor); without,
    every matching session after `cursor`, read a page at a time while the CSV streams."""
    filters = session_filters()
    limit, cursor = page_args(default_limit=None)
    if limit is not None:
        return sessions_page(filters, limit, cursor)
    return storage.iter_sessions(engine(), filters, after=cursor), None


def _chunks(found: Iterable[dict[str, Any]], size: int = 200) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for s in found:
        chunk.append(s)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@api.get("/export/events.csv")
@operation(
    "Every event as CSV, streamed",
    query=[*filter_params(), *paging_params(None)],
    responses={200: csv_reply("CSV"), 400: BAD_PAGE},
)
def export_events() -> Any:
    found, next_cursor = _export_sessions()

    def rows() -> Iterator[list[Any]]:
        for chunk in _chunks(found):
            by_id = storage.get_events(engine(), [s["id"] for s in chunk])
            for s in chunk:
                for ev in by_id[s["id"]]:
                    yield [s["id"], ev["seq"], ev["t_ms"], ev["type"],
                           json.dumps(ev["data"], sort_keys=True)]

    return _csv_stream(["session", "seq", "t_ms", "type", "data"], rows(), "events.csv",
                       next_cursor)


@api.get("/export/summaries.csv")
@operation(
    "One summary row per session as CSV, streamed",
    query=[*filter_params(), *paging_params(None)],
    responses={200: csv_reply("CSV"), 400: BAD_PAGE},
)
def export_summaries() -> Any:
    found, next_cursor = _export_sessions()
    header = [*summary.SCALAR_FIELDS, "segment_rates_bps"]

    def rows() -> Iterator[list[Any]]:
        for chunk in _chunks(found):
            for s in summarize_sessions(chunk):
                yield [*(s[f] for f in summary.SCALAR_FIELDS),
                       " ".join(map(str, s["segment_rates_bps"]))]

    return _csv_stream(header, rows(), "summaries.csv", next_cursor)


@noop_api.post("/noop")
@operation(
    "Reads the body and stores nothing (benchmark baseline)",
    body=EventBatch,
    responses={200: ok("read"), 400: refused("not JSON")},
)
def noop() -> Any:
    _body()
    return jsonify(stored=0, duplicates=0)
