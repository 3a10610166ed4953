"""The dashboard: server-rendered pages over the same storage as the API. A sessions table,
and per session a timeline (buffer level, bitrate, per-segment download rate, stall intervals)
drawn by uPlot, which is installed from npm into server/web/ and served from there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Blueprint, abort, render_template, send_from_directory, url_for

from mpstream.qoe.events import BufferEvent, QualitySwitchEvent, SegmentEvent, StartupEvent
from mpstream.qoe.metrics import VIDEO_KINDS, of_type, parse_events, segment_rate_bps, stalls
from mpstream.server import storage, summary
from mpstream.server.api import (
    _SESSION_ID,
    engine,
    page_args,
    session_filters,
    sessions_page,
    summarize_sessions,
)

WEB = Path(__file__).parent / "web"
UPLOT_DIST = WEB / "node_modules" / "uplot" / "dist"
VENDOR_FILES = {"uPlot.iife.min.js", "uPlot.min.css"}

dashboard = Blueprint(
    "dashboard",
    __name__,
    template_folder=str(WEB / "templates"),
    static_folder=str(WEB / "static"),
    static_url_path="/static",
)


@dashboard.get("/")
def index() -> Any:
    """A page of sessions (limit, cursor as in the API), oldest first, with a link onward."""
    filters = session_filters()
    limit, cursor = page_args()
    found, next_cursor = sessions_page(filters, limit, cursor)
    next_url = (url_for("dashboard.index", **filters, limit=limit, cursor=next_cursor)
                if next_cursor else None)
    return render_template("sessions.html", summaries=list(summarize_sessions(found)),
                           filters=filters, next_url=next_url, first_page=cursor is None,
                           first_url=url_for("dashboard.index", **filters, limit=limit))


def timeline(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the charts draw, times in seconds since the first event."""
    evs = parse_events(events)
    t0 = min((ev.t_ms for ev in evs), default=0.0)

    def sec(t_ms: float) -> float:
        return round((t_ms - t0) / 1000, 3)

    buffer = [[sec(e.t_ms), e.data.level_s] for e in of_type(evs, BufferEvent)]
    bitrate: list[list[float]] = []
    for e in evs:
        if isinstance(e, StartupEvent) and not bitrate:
            bitrate.append([sec(e.t_ms), e.data.bitrate])
        elif isinstance(e, QualitySwitchEvent):
            bitrate.append([sec(e.t_ms), e.data.to_bitrate])
    rates = []
    for seg in of_type(evs, SegmentEvent):
        if seg.data.kind in VIDEO_KINDS:
            rate = segment_rate_bps(seg.data)
            if rate is not None:
                rates.append([sec(seg.data.t_done), rate])
    halted = [[sec(s.start_ms), sec(s.end_ms)] for s in stalls(evs)]
    end = max((sec(e.t_ms) for e in evs), default=0.0)
    return {"buffer": buffer, "bitrate": bitrate, "rates": rates, "stalls": halted, "end": end}


@dashboard.get("/sessions/<session_id>")
def session_page(session_id: str) -> Any:
    if not _SESSION_ID.fullmatch(session_id):
        abort(404)
    found = storage.get_session(engine(), session_id)
    if found is None:
        abort(404)
    evs = storage.get_events(engine(), [session_id])[session_id]
    return render_template(
        "session.html",
        session=found,
        summary=summary.summarize(found, evs),
        timeline=timeline(evs),
        event_count=len(evs),
    )


@dashboard.get("/vendor/<name>")
def vendor(name: str) -> Any:
    if name not in VENDOR_FILES or not (UPLOT_DIST / name).is_file():
        abort(404)
    return send_from_directory(UPLOT_DIST, name, max_age=86400)
