"""The same storage tests on SQLite and on a real PostgreSQL server (a throwaway cluster
started for this module and stopped after it)."""

import threading

import pytest
import sqlalchemy as sa

from mpstream.server import schemas, storage, summary
from mpstream.server.app import ensure_schema
from tests.servers import throwaway_postgres
from tests.unit.test_server_summary import EVENTS

SESSION = {
    "id": "st-1", "player": "hlsjs", "player_version": "1.7.4", "protocol": "hls",
    "manifest": "/m.m3u8", "scenario": "bw", "trial": 0, "transport": "mptcp",
    "user_agent": "pytest", "started_at": "2026-11-22T02:00:00+00:00",
}  # fmt: skip


@pytest.fixture(scope="module")
def postgres_url():
    with throwaway_postgres() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    if request.param == "sqlite":
        url = storage.sqlite_url(str(tmp_path / "qoe.sqlite3"))
    else:
        url = request.getfixturevalue("postgres_url")
    eng = storage.make_engine(url)
    ensure_schema(eng)
    yield eng
    storage.metadata.drop_all(eng)
    eng.dispose()


def batch(events):
    return schemas.parse_batch({"events": events})


def new_session(engine, **over):
    return storage.create_session(engine, schemas.parse_session({**SESSION, **over}))


def test_sqlite_runs_in_wal_mode(tmp_path):
    eng = storage.make_engine(storage.sqlite_url(str(tmp_path / "w.sqlite3")))
    with eng.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    eng.dispose()


def test_sessions_create_repeat_and_conflict(engine):
    assert new_session(engine).created
    again = new_session(engine)
    assert not again.created and again.conflicts == []
    assert new_session(engine, trial=3, scenario="x").conflicts == ["scenario", "trial"]
    assert storage.get_session(engine, "st-1")["trial"] == 0


def test_events_are_idempotent_and_ordered(engine):
    new_session(engine)
    assert storage.add_events(engine, "st-1", batch(EVENTS[5:])) == (len(EVENTS) - 5, 0)
    assert storage.add_events(engine, "st-1", batch(EVENTS)) == (5, len(EVENTS) - 5)
    stored = storage.get_events(engine, ["st-1"])["st-1"]
    assert [e["seq"] for e in stored] == list(range(len(EVENTS)))
    assert stored == EVENTS  # the very values sent, types included
    # the summary computed from storage equals the hand-checked one
    assert summary.summarize(storage.get_session(engine, "st-1"), stored) == summary.summarize(
        SESSION, EVENTS
    )


def test_filters_and_counts(engine):
    new_session(engine, id="a", transport="tcp", trial=1)
    new_session(engine, id="b", transport="mptcp", trial=1)
    new_session(engine, id="c", transport="mptcp", trial=2, player="dashjs")
    storage.add_events(engine, "b", batch(EVENTS[:3]))
    ids = lambda **f: [s["id"] for s in storage.list_sessions(engine, f)]  # noqa: E731
    assert ids() == ["a", "b", "c"]
    assert ids(transport="mptcp") == ["b", "c"]
    assert ids(trial=1, transport="mptcp") == ["b"]
    assert ids(player="dashjs") == ["c"]
    counts = {s["id"]: s["event_count"] for s in storage.list_sessions(engine)}
    assert counts == {"a": 0, "b": 3, "c": 0}


def test_events_of_an_unknown_session_are_refused_by_the_database(engine):
    with pytest.raises(sa.exc.IntegrityError):
        storage.add_events(engine, "ghost", batch(EVENTS[:1]))


def test_concurrent_overlapping_writers_store_each_event_once(engine):
    new_session(engine)
    events = [
        {"seq": i, "t_ms": float(i), "type": "buffer", "data": {"level_s": 1.0, "position": 1.0}}
        for i in range(400)
    ]
    results, errors = [], []

    def writer(offset):
        try:
            for start in range(offset, 400, 50):
                results.append(storage.add_events(engine, "st-1", batch(events[start:start + 50])))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    # four writers, two of them re-sending what the other two send
    threads = [threading.Thread(target=writer, args=(o,)) for o in (0, 25, 0, 25)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(r[0] for r in results) == 400  # each stored once, by whichever writer came first
    assert sum(r[0] + r[1] for r in results) == 2 * 400 + 2 * 375  # everything acknowledged
    assert storage.count_events(engine) == 400


def test_the_measured_transport_keeps_the_most_subflows_of_its_latest_transport(engine):
    new_session(engine, id="seen")
    storage.record_measured(engine, "seen", "mptcp", 1)
    storage.record_measured(engine, "seen", "mptcp", 2)
    storage.record_measured(engine, "seen", "mptcp", 1)  # a subflow closed: the most is kept
    found = storage.get_session(engine, "seen")
    assert (found["measured_transport"], found["measured_subflows"]) == ("mptcp", 2)
    storage.record_measured(engine, "seen", "tcp", 1)  # a new connection, plain TCP
    listed = {s["id"]: s for s in storage.list_sessions(engine)}
    assert (listed["seen"]["measured_transport"], listed["seen"]["measured_subflows"]) == \
        ("tcp", 1)
    # Measured before its session arrived, and a session never measured.
    storage.record_measured(engine, "early", "mptcp", 2)
    new_session(engine, id="early")
    new_session(engine, id="unseen")
    assert storage.get_session(engine, "early")["measured_subflows"] == 2
    assert storage.get_session(engine, "unseen")["measured_transport"] is None
