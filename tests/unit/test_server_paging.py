"""The collector's list and export endpoints page (limit, cursor) and stream their CSV; the
dashboard pages the same way."""

import csv
import io

import pytest

from mpstream.server.app import create_app

N = 23


def session(i):
    return {"id": f"s{i:03d}", "player": "dashjs", "player_version": "5.2.1", "protocol": "dash",
            "manifest": "/m.mpd", "scenario": "even" if i % 2 == 0 else "odd", "trial": i,
            "transport": "mptcp", "user_agent": "x", "started_at": "2026-11-22T02:00:00Z"}


def buffer_events(n):
    return [{"seq": k, "t_ms": 10.0 * k, "type": "buffer",
             "data": {"level_s": 1.0, "position": k / 10}} for k in range(n)]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    db = tmp_path_factory.mktemp("paging") / "qoe.sqlite3"
    c = create_app(f"sqlite:///{db}").test_client()
    for i in range(N):
        assert c.post("/api/v1/sessions", json=session(i)).status_code == 201
        events = {"events": buffer_events(i % 4)}
        assert c.post(f"/api/v1/sessions/s{i:03d}/events", json=events).status_code == 200
    return c


def all_pages(client, url):
    ids, cursor, pages = [], None, 0
    while True:
        r = client.get(url + (f"&cursor={cursor}" if cursor else ""))
        assert r.status_code == 200, r.json
        ids += [s["id"] for s in r.json["sessions"]]
        pages += 1
        cursor = r.json["next_cursor"]
        if cursor is None:
            return ids, pages


def test_pages_cover_every_session_once_in_creation_order(client):
    ids, pages = all_pages(client, "/api/v1/sessions?limit=5")
    assert ids == [f"s{i:03d}" for i in range(N)]
    assert pages == 5  # 5 + 5 + 5 + 5 + 3; the last page says there is no next
    first = client.get("/api/v1/sessions?limit=5").json["sessions"]
    assert [s["event_count"] for s in first] == [0, 1, 2, 3, 0]


def test_paging_with_a_filter(client):
    ids, _ = all_pages(client, "/api/v1/sessions?scenario=odd&limit=4")
    assert ids == [f"s{i:03d}" for i in range(1, N, 2)]


def test_default_page_and_limits(client):
    r = client.get("/api/v1/sessions").json
    assert len(r["sessions"]) == N and r["next_cursor"] is None  # default limit 100
    for bad in ("0", "1001", "x", "-1"):
        r = client.get(f"/api/v1/sessions?limit={bad}")
        assert r.status_code == 400 and r.json["field"] == "limit"
    r = client.get("/api/v1/sessions?cursor=nosuchsession")
    assert r.status_code == 400 and r.json["field"] == "cursor"
    assert "next_cursor" in r.json["error"]


def rows(resp):
    return list(csv.reader(io.StringIO(resp.get_data(as_text=True))))


def test_exports_stream_everything_or_a_page(client):
    r = client.get("/api/v1/export/events.csv")
    assert r.is_streamed and r.status_code == 200
    body = rows(r)
    assert body[0] == ["session", "seq", "t_ms", "type", "data"]
    assert len(body) - 1 == sum(i % 4 for i in range(N))
    assert "X-Next-Cursor" not in r.headers

    r = client.get("/api/v1/export/summaries.csv?limit=10")
    assert r.is_streamed and r.headers["X-Next-Cursor"] == "s009"
    page1 = [row[0] for row in rows(r)[1:]]
    r = client.get("/api/v1/export/summaries.csv?limit=10&cursor=s009")
    page2 = [row[0] for row in rows(r)[1:]]
    r = client.get("/api/v1/export/summaries.csv?cursor=s019")
    rest = [row[0] for row in rows(r)[1:]]
    assert page1 + page2 + rest == [f"s{i:03d}" for i in range(N)]


def test_dashboard_pages(client):
    html = client.get("/dashboard/?limit=10").get_data(as_text=True)
    assert "s009" in html and "s010" not in html
    assert 'id="next-page"' in html and "cursor=s009" in html
    last = client.get("/dashboard/?limit=10&cursor=s019").get_data(as_text=True)
    assert "s022" in last and 'id="next-page"' not in last and "first page" in last
