"""Sessions and events in SQL through SQLAlchemy Core: SQLite (WAL) by default, PostgreSQL when
DATABASE_URL names one. The same code and the same tests run on both.

Durability rule: a function that writes returns only after its transaction has committed, so
the API's 2xx means "on disk" (for SQLite in WAL mode with synchronous=NORMAL, a committed
transaction survives the process being killed; only a power cut could lose the last ones).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from mpstream.qoe.events import BaseEvent
from mpstream.server.schemas import SessionIn

metadata = sa.MetaData()

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("player", sa.String(16), nullable=False),
    sa.Column("player_version", sa.String(100), nullable=False),
    sa.Column("protocol", sa.String(8), nullable=False),
    sa.Column("manifest", sa.Text, nullable=False),
    sa.Column("scenario", sa.String(200)),
    sa.Column("trial", sa.Integer),
    sa.Column("transport", sa.String(16), nullable=False),
    sa.Column("user_agent", sa.String(500), nullable=False),
    sa.Column("started_at", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now()),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("session_id", sa.String(64), sa.ForeignKey("sessions.id"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("t_ms", sa.Float, nullable=False),
    sa.Column("type", sa.String(32), nullable=False),
    # JSON text, not jsonb: the stored text is exactly what was validated.
    sa.Column("data", sa.Text, nullable=False),
)

# The transport the server's kernel saw carry a session's requests (server/seen.py): MPTCP or
# TCP, and the most subflows seen. The session's own `transport` is what was asked for. No
# foreign key: the page may ask before its session record has arrived.
measured = sa.Table(
    "measured_transports",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("transport", sa.String(16), nullable=False),
    sa.Column("subflows", sa.Integer, nullable=False),
)
MEASURED_FIELDS = {"measured_transport": measured.c.transport,
                   "measured_subflows": measured.c.subflows}

# Sessions are listed in creation order; pages continue after the last id of the page before
# (keyset paging), which this index answers without scanning the table.
SESSION_ORDER = sa.Index("sessions_created_id", sessions.c.created_at, sessions.c.id)

SESSION_FIELDS = [c.name for c in sessions.columns if c.name != "created_at"]
FILTERS = ("scenario", "trial", "player", "transport", "protocol")
PAGE_DEFAULT = 100
PAGE_MAX = 1000
_IN_CHUNK = 500  # ids per IN (...) list: SQLite caps bound parameters


def sqlite_url(path: str) -> str:
    return f"sqlite:///{path}"


def _is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Let SQLAlchemy, not the driver, decide when transactions begin (see _on_begin).
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @sa.event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # Writers take the write lock up front: a deferred transaction that reads and then
            # writes can fail with SQLITE_BUSY without waiting when another worker wrote first.
            immediate = conn.get_execution_options().get("sqlite_immediate", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    else:
        engine = sa.create_engine(url, pool_pre_ping=True)
    return engine


def create_schema(engine: Engine) -> None:
    metadata.create_all(engine, checkfirst=True)
    # A database made before the index existed gets it too (create_all skips existing tables).
    SESSION_ORDER.create(engine, checkfirst=True)


def wait_for_database(url: str, timeout_s: float, interval_s: float = 0.5) -> None:
    """Return once the database at `url` accepts a connection; after `timeout_s` re-raise the
    last error. For a collector whose database starts beside it (a compose stack where the
    engine cannot wait on the database's health check) rather than before it."""
    engine = make_engine(url)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                with engine.connect():
                    return
            except sa.exc.OperationalError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(interval_s)
    finally:
        engine.dispose()


class _WriterLock:
    """One SQLite writer at a time across processes and threads, queued on a file lock.

    SQLite itself admits one writer and makes the others retry with growing sleeps (its busy
    handler), which costs throughput and gives long tail latencies when several gunicorn
    workers write at once; a blocking flock hands the turn over as soon as it is free.
    """

    def __init__(self, path: str):
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._threads = threading.Lock()

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._threads:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)


_writer_locks: dict[str, _WriterLock] = {}
_writer_locks_guard = threading.Lock()


def _writer_lock(engine: Engine) -> _WriterLock | None:
    database = engine.url.database
    if not _is_sqlite(engine) or not database or database == ":memory:":
        return None
    key = f"{os.getpid()}:{database}"  # a forked worker opens its own descriptor
    with _writer_locks_guard:
        if key not in _writer_locks:
            _writer_locks[key] = _WriterLock(database + "-writer.lock")
        return _writer_locks[key]


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    lock = _writer_lock(engine)
    with (
        lock.held() if lock else nullcontext(),
        engine.connect().execution_options(sqlite_immediate=True) as conn,
        conn.begin(),
    ):
        yield conn


def _insert(engine: Engine, table: sa.Table) -> Any:
    dialect = sqlite if _is_sqlite(engine) else postgresql
    return dialect.insert(table)


@dataclass(frozen=True)
class CreateResult:
    created: bool
    conflicts: list[str]  # fields that differ from the stored session (empty = same session)


def session_row(session: SessionIn) -> dict[str, Any]:
    return session.model_dump()


def create_session(engine: Engine, session: SessionIn) -> CreateResult:
    row = session_row(session)
    with write_transaction(engine) as conn:
        stmt = _insert(engine, sessions).values(**row).on_conflict_do_nothing()
        created = conn.execute(stmt.returning(sessions.c.id)).first() is not None
        if created:
            return CreateResult(True, [])
        stored = conn.execute(sa.select(sessions).where(sessions.c.id == session.id)).one()
    conflicts = [f for f in SESSION_FIELDS if getattr(stored, f) != row[f]]
    return CreateResult(False, conflicts)


def session_exists(engine: Engine, session_id: str) -> bool:
    with engine.connect() as conn:
        found = conn.execute(sa.select(sessions.c.id).where(sessions.c.id == session_id)).first()
    return found is not None


_EVENT_COLUMNS = ("session_id", "seq", "t_ms", "type", "data")
_SQLITE_INSERT_EVENTS = (
    f"INSERT INTO events ({', '.join(_EVENT_COLUMNS)}) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)


def add_events(engine: Engine, session_id: str, batch: list[BaseEvent]) -> tuple[int, int]:
    """Store a validated batch; events whose (session, seq) exist are skipped.

    Returns (stored now, already stored). Commits before returning.
    """
    if not batch:
        return 0, 0
    rows = [
        {
            "session_id": session_id,
            "seq": ev.seq,
            "t_ms": ev.t_ms,
            "type": ev.type,
            # As sent: an optional field the page left out stays out (a segment's `part`).
            "data": ev.data.model_dump_json(exclude_unset=True),
        }
        for ev in batch
    ]
    stmt = _insert(engine, events).on_conflict_do_nothing()
    with write_transaction(engine) as conn:
        if _is_sqlite(engine):
            # Straight to the driver: sqlite3's executemany rowcount counts inserted rows only
            # (conflicts are skipped), much cheaper than compiling and RETURNING every row.
            stored = conn.exec_driver_sql(
                _SQLITE_INSERT_EVENTS, [tuple(r[c] for c in _EVENT_COLUMNS) for r in rows]
            ).rowcount
        else:
            # psycopg batches the rows into multi-row statements whose rowcount is not summed.
            stored = len(conn.execute(stmt.returning(events.c.seq), rows).all())
    return stored, len(rows) - stored


def record_measured(engine: Engine, session_id: str, transport: str, subflows: int) -> None:
    """Keep what the server saw of a session's connection: its latest transport, and the most
    subflows seen while it stayed that transport."""
    stmt = _insert(engine, measured).values(session_id=session_id, transport=transport,
                                             subflows=subflows)
    new = stmt.excluded
    stmt = stmt.on_conflict_do_update(index_elements=[measured.c.session_id], set_={
        "transport": new.transport,
        "subflows": sa.case((sa.and_(measured.c.transport == new.transport,
                                     measured.c.subflows > new.subflows), measured.c.subflows),
                            else_=new.subflows),
    })
    with write_transaction(engine) as conn:
        conn.execute(stmt)


def _with_measured() -> sa.Select:
    """Sessions, each with the transport the server measured (None where it measured none)."""
    return sa.select(sessions, *(c.label(name) for name, c in MEASURED_FIELDS.items())) \
        .select_from(sessions.outerjoin(measured, measured.c.session_id == sessions.c.id))


def _filtered(query: sa.Select, filters: dict[str, Any]) -> sa.Select:
    for name, value in filters.items():
        if value is not None:
            query = query.where(sessions.c[name] == value)
    return query


def list_sessions(
    engine: Engine,
    filters: dict[str, Any] | None = None,
    *,
    limit: int | None = None,
    after: str | None = None,
) -> list[dict[str, Any]]:
    """Sessions in creation order, each with its event_count. `after`: the id of the last
    session of the previous page; `limit`: at most this many (all when None)."""
    query = _with_measured().order_by(sessions.c.created_at, sessions.c.id)
    query = _filtered(query, filters or {})
    if after is not None:
        anchor = sa.select(sessions.c.created_at).where(sessions.c.id == after).scalar_subquery()
        query = query.where(sa.or_(
            sessions.c.created_at > anchor,
            sa.and_(sessions.c.created_at == anchor, sessions.c.id > after),
        ))
    if limit is not None:
        query = query.limit(limit)
    with engine.connect() as conn:
        rows = [_session_dict(r._mapping) for r in conn.execute(query)]
        counts = _event_counts(conn, [r["id"] for r in rows])
    for row in rows:
        row["event_count"] = counts.get(row["id"], 0)
    return rows


def iter_sessions(engine: Engine, filters: dict[str, Any] | None = None, *,
                  after: str | None = None, limit: int | None = None,
                  page: int = PAGE_MAX) -> Iterator[dict[str, Any]]:
    """Every session (or `limit` of them) after `after`, fetched a page at a time, so a
    caller can stream them without holding all in memory."""
    left = limit
    while left is None or left > 0:
        size = page if left is None else min(page, left)
        rows = list_sessions(engine, filters, limit=size, after=after)
        yield from rows
        if len(rows) < size:
            return
        after = rows[-1]["id"]
        if left is not None:
            left -= len(rows)


def _event_counts(conn: Connection, ids: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in range(0, len(ids), _IN_CHUNK):
        query = (
            sa.select(events.c.session_id, sa.func.count())
            .where(events.c.session_id.in_(ids[i:i + _IN_CHUNK]))
            .group_by(events.c.session_id)
        )
        for row in conn.execute(query):
            out[row[0]] = row[1]
    return out


def _session_dict(mapping: Any) -> dict[str, Any]:
    out = dict(mapping)
    created = out.get("created_at")
    if created is not None and not isinstance(created, str):
        out["created_at"] = created.isoformat()
    return out


def get_session(engine: Engine, session_id: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(_with_measured().where(sessions.c.id == session_id)).first()
    return None if row is None else _session_dict(row._mapping)


def get_events(engine: Engine, session_ids: Iterable[str], *, after_seq: int = -1
               ) -> dict[str, list[dict[str, Any]]]:
    """Events of each session, in seq order; only those whose seq is above `after_seq`."""
    ids = list(session_ids)
    out: dict[str, list[dict[str, Any]]] = {sid: [] for sid in ids}
    if not ids:
        return out
    with engine.connect() as conn:
        for i in range(0, len(ids), _IN_CHUNK):
            query = (
                sa.select(events)
                .where(events.c.session_id.in_(ids[i:i + _IN_CHUNK]), events.c.seq > after_seq)
                .order_by(events.c.session_id, events.c.seq)
            )
            for r in conn.execute(query):
                out[r.session_id].append(
                    {"seq": r.seq, "t_ms": r.t_ms, "type": r.type, "data": json.loads(r.data)}
                )
    return out


def count_events(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(events)).scalar_one()
