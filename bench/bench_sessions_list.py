"""The collector's sessions list with 100 000 sessions: latency of a page (limit 100) at the
start, deep inside (a cursor far in) and with a filter, against listing every session at once
as the API did before paging.

    .venv/bin/python bench/bench_sessions_list.py [--sessions 100000] [--events 10] [--requests 300]

Each session has --events stored events (1 Hz `buffer` and `playback` samples, as a player
sends them). The requests go through the Flask app (routing, validation, SQLAlchemy, SQLite in
WAL mode, JSON) in this process; gunicorn and nginx add the same constant to every figure.
Prints figures; not a pass/fail test. The machine's CPU is shared: compare the ratios measured
side by side, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from mpstream.server import storage
from mpstream.server.app import create_app


def fill(db: Path, n_sessions: int, n_events: int) -> float:
    """Writes the sessions and their events straight into the tables; returns seconds taken."""
    t0 = time.perf_counter()
    engine = storage.make_engine(storage.sqlite_url(str(db)))
    storage.create_schema(engine)
    scenarios = ("balanced", "unbalanced", "single", "loss", "latency")
    with engine.begin() as conn:
        for start in range(0, n_sessions, 5000):
            ids = range(start, min(n_sessions, start + 5000))
            conn.execute(storage.sessions.insert(), [{
                "id": f"bench-{i:06d}", "player": "dashjs", "player_version": "5.2.1",
                "protocol": "dash", "manifest": "/media/dash/manifest.mpd",
                "scenario": scenarios[i % len(scenarios)], "trial": i % 10,
                "transport": "mptcp" if i % 3 else "tcp", "user_agent": "bench",
                "started_at": "2026-11-22T00:00:00Z",
            } for i in ids])  # fmt: skip
            rows = []
            for i in ids:
                for k in range(n_events):
                    kind = "buffer" if k % 2 == 0 else "playback"
                    data = ({"level_s": 10.0, "position": k / 2} if kind == "buffer" else
                            {"position": k / 2, "dropped_frames": 0, "total_frames": 25 * k})
                    rows.append({"session_id": f"bench-{i:06d}", "seq": k, "t_ms": 500.0 * k,
                                 "type": kind, "data": json.dumps(data)})
            conn.execute(storage.events.insert(), rows)
    engine.dispose()
    return time.perf_counter() - t0


def timed(client, urls: list[str]) -> list[float]:
    out = []
    for url in urls:
        t0 = time.perf_counter()
        r = client.get(url)
        out.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, (url, r.status_code, r.get_data(as_text=True)[:200])
    return out


def p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[98]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=10, help="stored events per session")
    ap.add_argument("--requests", type=int, default=300, help="requests per case")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mps-bench-list-") as tmp:
        db = Path(tmp) / "qoe.sqlite3"
        took = fill(db, args.sessions, args.events)
        print(f"stored {args.sessions} sessions x {args.events} events "
              f"({args.sessions * args.events} rows) in {took:.1f} s")
        client = create_app(storage.sqlite_url(str(db))).test_client()
        rng = random.Random(1)
        cursors = [f"bench-{rng.randrange(args.sessions - 200):06d}" for _ in range(args.requests)]
        client.get("/api/v1/sessions?limit=100")  # warm the page cache
        cases = {
            "first page (limit=100)": ["/api/v1/sessions?limit=100"] * args.requests,
            "random deep page (cursor)": [f"/api/v1/sessions?limit=100&cursor={c}"
                                          for c in cursors],
            "filtered (scenario, transport)": [
                f"/api/v1/sessions?limit=100&scenario=loss&transport=tcp&cursor={c}"
                for c in cursors],
        }
        print(f"{'case':34} {'n':>5} {'p50 ms':>8} {'p99 ms':>8}")
        figures = {}
        for name, urls in cases.items():
            ms = timed(client, urls)
            figures[name] = ms
            print(f"{name:34} {len(ms):5d} {statistics.median(ms):8.2f} {p99(ms):8.2f}")
        # Before paging, GET /sessions answered every session with its event count at once.
        engine = storage.make_engine(storage.sqlite_url(str(db)))
        t0 = time.perf_counter()
        with engine.connect() as conn:
            counts = (sa.select(storage.events.c.session_id, sa.func.count().label("n"))
                      .group_by(storage.events.c.session_id).subquery())
            q = (sa.select(storage.sessions, counts.c.n)
                 .select_from(storage.sessions.outerjoin(
                     counts, counts.c.session_id == storage.sessions.c.id))
                 .order_by(storage.sessions.c.created_at, storage.sessions.c.id))
            listed = len(conn.execute(q).all())
        unpaged_ms = (time.perf_counter() - t0) * 1000
        print(f"unpaged list of all {listed} sessions (the query before paging, no JSON): "
              f"{unpaged_ms:.0f} ms, {unpaged_ms / p99(figures['random deep page (cursor)']):.0f}x "
              "the p99 of a deep page")
        worst = max(p99(ms) for ms in figures.values())
        print(f"p99 of a sessions-list page with {args.sessions} sessions: {worst:.1f} ms "
              f"(target < 100 ms)")


if __name__ == "__main__":
    main()
