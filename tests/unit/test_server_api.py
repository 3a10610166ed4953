"""The collector's API through Flask's test client on an SQLite file: every validation rule
with a rejected example, idempotent re-sends, filters, summaries, CSV, OpenAPI, injection."""

import copy
import csv
import io
import json
import re

import pytest

from mpstream.server import schemas
from mpstream.server.app import create_app

SESSION = {
    "id": "sess-1", "player": "dashjs", "player_version": "5.2.1", "protocol": "dash",
    "manifest": "/media/dash/manifest.mpd", "scenario": "balanced", "trial": 2,
    "transport": "mptcp", "user_agent": "Chromium", "started_at": "2026-11-22T02:00:00Z",
}  # fmt: skip

VALID_DATA = {
    "manifest": {"url": "/m.mpd", "t_request": 1, "t_done": 2, "bytes": 3},
    "startup": {"startup_delay_ms": 900, "manifest_ms": 40, "first_segment_ms": 300,
                "decode_ms": 20, "codec": "avc1.64001f", "width": 640, "height": 360,
                "bitrate": 800000},
    "segment": {"url": "/s.m4s", "kind": "video", "bitrate": 800000, "bytes": 200000,
                "t_request": 10, "t_first_byte": 20, "t_done": 110, "index": 1,
                "duration_s": 2.0},
    "stall_start": {"position": 3.5},
    "stall_end": {"position": 3.5, "duration_ms": 700},
    "quality_switch": {"from_bitrate": 800000, "to_bitrate": 1600000, "width": 1280,
                       "height": 720, "codec": "avc1.64001f"},
    "buffer": {"level_s": 8.0, "position": 4.0},
    "playback": {"position": 4.0, "dropped_frames": 0, "total_frames": 100},
    "live_latency": {"latency_s": 5.5, "target_s": 6.0, "playback_rate": 1.0},
    "ladder": {"representations": [
        {"bitrate": 800000, "width": 640, "height": 360, "codec": "avc1.64001e"},
        {"bitrate": 1600000, "width": 1280, "height": 720, "codec": "avc1.64001f"}]},
    "abr": {"name": "bola", "player_rules": ["bolaRule", "insufficientBufferRule"], "params": {}},
    "abr_decision": {"rule": "robustmpc", "index": 1, "bitrate": 1600000, "estimate_bps": 2.1e6,
                     "params": {"bufferTargetS": 30},
                     "inputs": {"ladder_bps": [800000, 1600000], "buffer_s": 6.5, "segment_s": 2,
                                "previous": 0, "past": [{"bytes": 500000, "t_request": 10,
                                                         "t_done": 900, "predicted_bps": None}]}},
    "error": {"message": "boom", "fatal": False, "code": None},
    "end": {"reason": "duration", "position": 30.0},
}  # fmt: skip


def event(seq, type_="buffer", **over):
    data = {**VALID_DATA[type_], **over}
    return {"seq": seq, "t_ms": 1000.0 + seq, "type": type_, "data": data}


@pytest.fixture
def client(tmp_path):
    app = create_app(f"sqlite:///{tmp_path / 'qoe.sqlite3'}", noop_endpoint=True)
    return app.test_client()


@pytest.fixture
def session(client):
    assert client.post("/api/v1/sessions", json=SESSION).status_code == 201
    return SESSION["id"]


def post_events(client, sid, events):
    return client.post(f"/api/v1/sessions/{sid}/events", json={"events": events})


def test_every_event_type_is_accepted_and_stored(client, session):
    events = [event(i, t) for i, t in enumerate(VALID_DATA)]
    r = post_events(client, session, events)
    assert r.status_code == 200 and r.json == {"stored": len(VALID_DATA), "duplicates": 0}
    got = client.get(f"/api/v1/sessions/{session}").json
    assert [e["type"] for e in got["events"]] == list(VALID_DATA)
    assert got["events"][2]["data"] == VALID_DATA["segment"]


def test_resending_a_batch_never_duplicates(client, session):
    batch = [event(i) for i in range(10)]
    assert post_events(client, session, batch).json == {"stored": 10, "duplicates": 0}
    assert post_events(client, session, batch).json == {"stored": 0, "duplicates": 10}
    # an overlapping batch stores only the new ones
    r = post_events(client, session, [event(i) for i in range(5, 15)])
    assert r.json == {"stored": 5, "duplicates": 5}
    assert len(client.get(f"/api/v1/sessions/{session}").json["events"]) == 15


def test_events_after_a_seq_are_those_not_seen_yet(client, session):
    post_events(client, session, [event(i) for i in (0, 1, 2, 5)])
    url = f"/api/v1/sessions/{session}/events"
    every = client.get(url).json["events"]
    assert every == client.get(f"/api/v1/sessions/{session}").json["events"]
    assert [e["seq"] for e in every] == [0, 1, 2, 5]
    assert [e["seq"] for e in client.get(url + "?after=1").json["events"]] == [2, 5]
    assert client.get(url + "?after=5").json == {"events": []}
    assert client.get(url + "?after=").json["events"] == every
    for bad in ("-1", "x", "1.5", str(schemas.MAX_SEQ + 1)):
        r = client.get(f"{url}?after={bad}")
        assert r.status_code == 400 and r.json["field"] == "after", bad
    assert client.get("/api/v1/sessions/nosuch/events").status_code == 404
    assert client.get("/api/v1/sessions/bad%20id/events").status_code == 400


def test_session_creation_is_idempotent_but_conflicts_are_named(client, session):
    assert client.post("/api/v1/sessions", json=SESSION).status_code == 200
    r = client.post("/api/v1/sessions", json={**SESSION, "transport": "tcp"})
    assert r.status_code == 409 and r.json["field"] == "transport"


# (where, change, field named in the error) — each a rejected example of one rule
SESSION_REJECTS = [
    ("id", "bad id!", "id"),
    ("id", "x" * 65, "id"),
    ("player", "vlc", "player"),
    ("protocol", "smooth", "protocol"),
    ("trial", -1, "trial"),
    ("trial", "3", "trial"),
    ("trial", 1.5, "trial"),
    ("scenario", "x" * 201, "scenario"),
    ("user_agent", "u" * 501, "user_agent"),
    ("transport", "QUIC over UDP", "transport"),
    ("started_at", "yesterday", "started_at"),
    ("manifest", 5, "manifest"),
    ("player_version", "a\x00b", "player_version"),
]


@pytest.mark.parametrize(("key", "value", "field"), SESSION_REJECTS)
def test_session_rule_rejections(client, key, value, field):
    r = client.post("/api/v1/sessions", json={**SESSION, key: value})
    assert r.status_code == 422, r.json
    assert r.json["field"] == field and field in r.json["error"]


def test_session_unknown_and_missing_fields(client):
    r = client.post("/api/v1/sessions", json={**SESSION, "colour": "red"})
    assert r.status_code == 422 and r.json["field"] == "colour"
    assert "unknown field" in r.json["error"]
    missing = {k: v for k, v in SESSION.items() if k != "scenario"}
    r = client.post("/api/v1/sessions", json=missing)
    assert r.status_code == 422 and r.json["field"] == "scenario"


EVENT_REJECTS = [
    (event(0) | {"type": "teleport"}, "events[0].type"),
    (event(0) | {"seq": -1}, "events[0].seq"),
    (event(0) | {"seq": "1"}, "events[0].seq"),
    (event(0) | {"t_ms": -5}, "events[0].t_ms"),
    (event(0) | {"extra": 1}, "events[0].extra"),
    ({k: v for k, v in event(0).items() if k != "data"}, "events[0].data"),
    (event(0, "buffer", level_s=-1), "events[0].data.level_s"),
    (event(0, "buffer", level_s="8"), "events[0].data.level_s"),
    (event(0, "buffer", colour="red"), "events[0].data.colour"),
    (event(0, "segment", kind="subtitle"), "events[0].data.kind"),
    (event(0, "segment", bytes=1.5), "events[0].data.bytes"),
    (event(0, "segment", bytes=-1), "events[0].data.bytes"),
    (event(0, "segment", url=""), "events[0].data.url"),
    (event(0, "segment", url="u" * 2049), "events[0].data.url"),
    (event(0, "startup", width=True), "events[0].data.width"),
    (event(0, "error", fatal=1), "events[0].data.fatal"),
    (event(0, "error", message="a\x00b"), "events[0].data.message"),
    (event(0, "end", reason="bored"), "events[0].data.reason"),
    (event(0, "playback", dropped_frames=None), "events[0].data.dropped_frames"),
    (event(0, "quality_switch", to_bitrate=None), "events[0].data.to_bitrate"),
    (event(0, "stall_end", duration_ms=2e12), "events[0].data.duration_ms"),
]


@pytest.mark.parametrize(("bad", "field"), EVENT_REJECTS)
def test_event_rule_rejections(client, session, bad, field):
    r = post_events(client, session, [event(1), bad])  # the valid one is not stored either
    bad_index = field.replace("events[0]", "events[1]")
    assert r.status_code == 422, r.json
    assert r.json["field"] == bad_index and bad_index in r.json["error"]
    assert client.get(f"/api/v1/sessions/{session}").json["events"] == []


def test_missing_data_field_is_named(client, session):
    data = dict(VALID_DATA["segment"])
    del data["t_first_byte"]
    r = post_events(client, session, [{"seq": 0, "t_ms": 1, "type": "segment", "data": data}])
    assert r.status_code == 422 and r.json["field"] == "events[0].data.t_first_byte"
    assert "missing" in r.json["error"]


def test_batch_shape_rules(client, session):
    url = f"/api/v1/sessions/{session}/events"
    assert client.post(url, data="not json").status_code == 400
    assert client.post(url, data='{"events": [NaN]}').json["field"] == "body"
    assert client.post(url, json=[1]).status_code == 422
    assert client.post(url, json={"events": [], "more": 1}).json["field"] == "more"
    assert client.post(url, json={}).json["field"] == "events"
    assert client.post(url, json={"events": "x"}).json["field"] == "events"
    # a lone surrogate cannot be stored as UTF-8: refused, naming the field
    lone = '{"events": [{"seq": 0, "t_ms": 1, "type": "error", "data": {"message": "\\ud800",'
    r = client.post(url, data=lone + ' "fatal": false, "code": null}}]}')
    assert r.status_code == 422 and r.json["field"] == "events[0].data.message"
    r = client.post(url, json={"events": [event(1), event(1)]})
    assert r.status_code == 422 and r.json["field"] == "events[1].seq"
    too_many = [event(i) for i in range(schemas.MAX_EVENTS_PER_BATCH + 1)]
    r = client.post(url, json={"events": too_many})
    assert r.status_code == 422 and r.json["field"] == "events" and "500" in r.json["error"]


def test_body_size_limit(client, session):
    big = json.dumps({"events": [event(0, "error", message="x" * 2000)] * 600})
    assert len(big) > schemas.MAX_BODY_BYTES
    r = client.post(f"/api/v1/sessions/{session}/events", data=big)
    assert r.status_code == 413 and "body" in r.json["error"]


def test_unknown_and_malformed_session_ids(client):
    assert post_events(client, "nobody", [event(0)]).status_code == 404
    assert client.get("/api/v1/sessions/nobody/summary").status_code == 404
    r = client.get("/api/v1/sessions/bad%20id")
    assert r.status_code == 400 and r.json["field"] == "session_id"
    assert client.post("/api/v1/sessions/bad'id/events", json={"events": []}).status_code == 400


def test_list_filters(client):
    for i, (transport, trial) in enumerate([("mptcp", 0), ("tcp", 0), ("mptcp", 1)]):
        body = {**SESSION, "id": f"s{i}", "transport": transport, "trial": trial}
        assert client.post("/api/v1/sessions", json=body).status_code == 201
    ids = lambda q: [s["id"] for s in client.get("/api/v1/sessions" + q).json["sessions"]]  # noqa: E731
    assert ids("") == ["s0", "s1", "s2"]
    assert ids("?transport=mptcp") == ["s0", "s2"]
    assert ids("?transport=mptcp&trial=1") == ["s2"]
    assert ids("?player=hlsjs") == []
    r = client.get("/api/v1/sessions?trial=first")
    assert r.status_code == 400 and r.json["field"] == "trial"


def test_injection_is_inert(client):
    evil = "'; DROP TABLE events; --<script>alert(1)</script>"
    assert client.post("/api/v1/sessions", json={**SESSION, "scenario": evil}).status_code == 201
    assert client.get("/api/v1/sessions?scenario=" + evil).json["sessions"][0]["scenario"] == evil
    post_events(client, SESSION["id"], [event(0, "error", message=evil)])
    page = client.get("/dashboard/").get_data(as_text=True)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    page = client.get(f"/dashboard/sessions/{SESSION['id']}").get_data(as_text=True)
    assert "<script>alert(1)</script>" not in page
    # a spreadsheet would run a cell starting with =: the CSV quotes it
    client.post("/api/v1/sessions", json={**SESSION, "id": "f", "scenario": "=1+1"})
    rows = list(csv.DictReader(io.StringIO(client.get("/api/v1/export/summaries.csv").text)))
    assert [r["scenario"] for r in rows if r["session"] == "f"] == ["'=1+1"]


def test_summary_grouped_and_csv(client, session):
    events = [
        event(0, "startup"),
        event(1, "segment"),  # 200 kB in 100 ms = 16 Mbit/s
        event(2, "end"),
    ]
    post_events(client, session, events)
    s = client.get(f"/api/v1/sessions/{session}/summary").json
    assert s["segment_rates_bps"] == [16_000_000.0] and s["startup_delay_ms"] == 900
    g = client.get("/api/v1/summaries/grouped?by=scenario,transport").json
    assert g["groups"][0]["group"] == {"scenario": "balanced", "transport": "mptcp"}
    assert g["groups"][0]["metrics"]["startup_delay_ms"]["mean"] == 900
    assert client.get("/api/v1/summaries/grouped?by=colour").status_code == 400
    rows = list(csv.DictReader(io.StringIO(client.get("/api/v1/export/events.csv").text)))
    assert [r["type"] for r in rows] == ["startup", "segment", "end"]
    assert json.loads(rows[1]["data"]) == VALID_DATA["segment"]
    rows = list(csv.DictReader(io.StringIO(client.get("/api/v1/export/summaries.csv").text)))
    assert rows[0]["session"] == session and float(rows[0]["startup_delay_ms"]) == 900


def served_operations(app) -> set[tuple[str, str]]:
    """(method, path) of every route the app serves under /api/v1, in OpenAPI's path syntax."""
    return {
        (method.lower(), re.sub(r"<(?:[^<>:]+:)?([^<>]+)>", r"{\1}",
                                rule.rule.removeprefix("/api/v1")))
        for rule in app.url_map.iter_rules() if rule.rule.startswith("/api/v1/")
        for method in rule.methods - {"HEAD", "OPTIONS"}
    }  # fmt: skip


def documented_operations(doc) -> set[tuple[str, str]]:
    return {(method, path) for path, item in doc["paths"].items() for method in item}


@pytest.mark.parametrize("noop", [True, False])
def test_openapi_document_has_every_route_and_no_other(tmp_path, noop):
    app = create_app(f"sqlite:///{tmp_path / 'qoe.sqlite3'}", noop_endpoint=noop)
    doc = app.test_client().get("/api/v1/openapi.json").json
    assert doc["openapi"].startswith("3.1") and doc["servers"] == [{"url": "/api/v1"}]
    served = served_operations(app)
    assert sorted(served - documented_operations(doc)) == [], "routes missing from the document"
    assert sorted(documented_operations(doc) - served) == [], "documented, not served"
    assert ("post", "/noop") in served if noop else ("post", "/noop") not in served
    assert {p for _, p in served} >= {
        "/health", "/openapi.json", "/sessions", "/sessions/{session_id}",
        "/sessions/{session_id}/events", "/sessions/{session_id}/summary",
        "/summaries/grouped", "/export/events.csv", "/export/summaries.csv",
    }  # fmt: skip
    assert ("get", "/sessions/{session_id}/events") in served


def test_a_route_without_an_operation_is_missing_from_the_document(tmp_path):
    app = create_app(f"sqlite:///{tmp_path / 'qoe.sqlite3'}")
    app.add_url_rule("/api/v1/undocumented", "undocumented", lambda: "")
    doc = app.test_client().get("/api/v1/openapi.json").json
    assert served_operations(app) - documented_operations(doc) == {("get", "/undocumented")}


def test_openapi_document_describes_the_models(client):
    doc = client.get("/api/v1/openapi.json").json
    components = doc["components"]["schemas"]
    assert len(components["Event"]["oneOf"]) == len(VALID_DATA)
    assert components["SegmentData"]["additionalProperties"] is False
    batch = doc["paths"]["/sessions/{session_id}/events"]["post"]["requestBody"]
    assert batch["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/EventBatch"}
    assert components["EventBatch"]["properties"]["events"]["maxItems"] == (
        schemas.MAX_EVENTS_PER_BATCH)
    (param,) = doc["paths"]["/sessions/{session_id}"]["get"]["parameters"]
    assert param["schema"]["pattern"] == schemas.SESSION_ID_PATTERN


def test_responses_match_their_documented_schemas(client, session):
    from mpstream.server.openapi import GroupedOut, SummaryOut

    post_events(client, session, [event(i, t) for i, t in enumerate(VALID_DATA)])
    SummaryOut.model_validate(client.get(f"/api/v1/sessions/{session}/summary").json)
    GroupedOut.model_validate(client.get("/api/v1/summaries/grouped?by=transport,trial").json)


def test_noop_endpoint_only_when_enabled(tmp_path):
    off = create_app(f"sqlite:///{tmp_path / 'a.sqlite3'}", noop_endpoint=False).test_client()
    assert off.post("/api/v1/noop", json={"events": []}).status_code == 404


def test_payload_copy_is_not_mutated():
    before = copy.deepcopy(VALID_DATA)
    schemas.parse_batch({"events": [event(i, t) for i, t in enumerate(VALID_DATA)]})
    assert before == VALID_DATA


def test_a_multipath_decision_keeps_the_paths_it_was_given(client, session):
    paths = [{"address": "10.1.0.2", "bps": 1.9e6, "held": False, "spared": False, "live": True},
             {"address": "10.1.1.2", "bps": 0.0, "held": True, "spared": True, "live": False}]
    inputs = {**VALID_DATA["abr_decision"]["inputs"], "paths": paths}
    ok = post_events(client, session, [event(0, "abr_decision", rule="multipath", inputs=inputs),
                                       event(1, "abr_decision", rule="multipath",
                                             inputs={**inputs, "paths": None})])
    assert ok.status_code == 200, ok.json
    stored = client.get(f"/api/v1/sessions/{session}").json["events"]
    assert stored[0]["data"]["inputs"]["paths"] == paths
    bad = [{**paths[0], "bps": -1.0}]
    r = post_events(client, session, [event(2, "abr_decision", rule="multipath",
                                            inputs={**inputs, "paths": bad})])
    assert r.status_code == 422 and r.json["field"] == "events[0].data.inputs.paths[0].bps"


def test_the_paths_of_a_request_not_through_nginx_say_why_they_are_unknown(client, session):
    r = client.get(f"/api/v1/sessions/{session}/paths")
    assert r.status_code == 200
    assert r.json["measured"] is False and "X-Forwarded-For" in r.json["reason"]
    assert client.get("/api/v1/sessions/bad id/paths").status_code == 400


def test_the_paths_of_a_connection_the_kernel_does_not_have_say_so(client, session):
    # Named as nginx names it, but no such TCP connection exists in this namespace.
    headers = {"X-Forwarded-For": "127.0.0.1", "X-Client-Port": "1", "X-Server-Addr": "127.0.0.1",
               "X-Server-Port": "9"}
    for path in ("paths", "transport"):
        call = client.get if path == "paths" else client.post
        r = call(f"/api/v1/sessions/{session}/{path}", headers=headers)
        assert r.status_code == 200, (path, r.json)
        assert r.json["measured"] is False
        assert "no TCP connection from 127.0.0.1:1" in r.json["reason"]
