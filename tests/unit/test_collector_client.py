"""The collector's client (mpstream/qoe/collector.py) against the collector's own app, served in
this process by werkzeug over a unix socket and over HTTP: sessions listed, a summary, events
after a seq as typed events, typed events posted as the probe posts them, refusals and a
collector that does not answer. tests/integration/test_server_stack.py runs it against gunicorn
behind nginx."""

import re
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from mpstream.qoe.collector import CollectorClient, CollectorRefused
from mpstream.qoe.events import (
    BufferData,
    BufferEvent,
    EndData,
    EndEvent,
    ErrorData,
    ErrorEvent,
)
from mpstream.server.app import create_app

SESSION = {
    "id": "sess-1", "player": "dashjs", "player_version": "5.2.1", "protocol": "dash",
    "manifest": "/media/dash/manifest.mpd", "scenario": "balanced", "trial": 2,
    "transport": "mptcp", "user_agent": "Chromium", "started_at": "2026-11-22T02:00:00Z",
}  # fmt: skip


def _buffer(seq: int, level_s: float) -> BufferEvent:
    return BufferEvent(seq=seq, t_ms=100.0 * seq, type="buffer",
                       data=BufferData(level_s=level_s, position=1.0))


@pytest.fixture
def folder():
    # Short: a unix socket's path must fit in 107 bytes, and pytest's tmp_path may not.
    path = Path(tempfile.mkdtemp(prefix="mps-client-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["socket", "http"])
def served(request, folder):
    """(the collector's Flask app, a client of it) while werkzeug serves the app."""
    app = create_app(f"sqlite:///{folder / 'qoe.sqlite3'}")
    sock = folder / "collector.sock"
    host = f"unix://{sock}" if request.param == "socket" else "127.0.0.1"
    server = make_server(host, 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        if request.param == "socket":
            yield app, CollectorClient.over_socket(sock)
        else:
            yield app, CollectorClient.at(f"http://127.0.0.1:{server.port}/api/v1/")
    finally:
        server.shutdown()
        thread.join(timeout=10)


def _create(app, **fields):
    reply = app.test_client().post("/api/v1/sessions", json={**SESSION, **fields})
    assert reply.status_code == 201, reply.json


def test_posted_events_come_back_typed_and_only_after_the_seq_asked(served):
    app, client = served
    _create(app)
    assert client.health()["status"] == "ok"
    assert client.post_events("sess-1", [_buffer(0, 8.0), _buffer(1, 6.5)]) == {
        "stored": 2, "duplicates": 0}
    assert client.post_events("sess-1", [_buffer(1, 6.5), _buffer(2, 4.0)]) == {
        "stored": 1, "duplicates": 1}
    assert [e.seq for e in client.events_since("sess-1")] == [0, 1, 2]
    later = client.events_since("sess-1", after=0)
    assert later == [_buffer(1, 6.5), _buffer(2, 4.0)]
    assert client.events_since("sess-1", after=2) == []
    assert [e["seq"] for e in client.session("sess-1")["events"]] == [0, 1, 2]
    assert client.summary("sess-1")["session"] == "sess-1"


def test_typed_events_are_stored_as_the_page_sends_them(served):
    """What the collector keeps of posted models is what it kept of the same events as JSON
    (the browser's error and end: tests/e2e/test_player_firefox.py)."""
    app, client = served
    _create(app)
    client.post_events("sess-1", [
        ErrorEvent(seq=0, t_ms=0, type="error",
                   data=ErrorData(message="chromium: gone", fatal=True, code="browser_exited")),
        EndEvent(seq=1, t_ms=0, type="end", data=EndData(reason="error", position=0)),
    ])
    _create(app, id="sess-2")
    sent = [{"seq": 0, "t_ms": 0, "type": "error",
             "data": {"message": "chromium: gone", "fatal": True, "code": "browser_exited"}},
            {"seq": 1, "t_ms": 0, "type": "end", "data": {"reason": "error", "position": 0}}]
    assert app.test_client().post("/api/v1/sessions/sess-2/events",
                                  json={"events": sent}).status_code == 200
    one, two = (app.test_client().get(f"/api/v1/sessions/{sid}").data
                for sid in ("sess-1", "sess-2"))
    assert one.replace(b"sess-1", b"sess-2") == two
    assert client.session("sess-1")["events"] == client.session("sess-2")["events"]


def test_sessions_are_listed_by_filter_across_pages(served, monkeypatch):
    app, client = served
    for i in range(5):
        _create(app, id=f"s-{i}", trial=i % 2)
    monkeypatch.setattr("mpstream.qoe.collector.SESSIONS_PAGE", 2)
    assert [s["id"] for s in client.sessions()] == [f"s-{i}" for i in range(5)]
    assert [s["id"] for s in client.sessions(trial=1)] == ["s-1", "s-3"]
    assert list(client.sessions(scenario="nosuch")) == []


def test_a_session_it_does_not_have_is_refused_with_its_status(served):
    _, client = served
    with pytest.raises(CollectorRefused) as refused:
        client.events_since("nosuch")
    assert refused.value.status == 404
    with pytest.raises(CollectorRefused) as refused:
        client.post_events("nosuch", [_buffer(0, 1.0)])
    assert refused.value.status == 404
    with pytest.raises(CollectorRefused) as refused:
        client.summary("bad id")
    assert refused.value.status == 400


def test_a_collector_that_does_not_answer_is_an_oserror_saying_where(folder):
    gone = folder / "gone.sock"
    with pytest.raises(OSError, match=re.escape(f"{gone}: ") + ".*No such file"):
        CollectorClient.over_socket(gone).health()
    with pytest.raises(OSError, match=re.escape("127.0.0.1:9/api/v1: ") + ".*refused"):
        CollectorClient.at("http://127.0.0.1:9/api/v1", timeout_s=2).health()
