"""Server benchmarks: QoE ingest (vs a no-op endpoint of the same app under the same gunicorn),
durability under kill -9, and nginx segment serving over MPTCP vs TCP on loopback.

    .venv/bin/python bench/bench_server.py [--seconds 8] [--clients 8]
        [--summary docs/data/bench-server-DATE.json]

Prints figures; not a pass/fail test. `--summary` writes them as a run summary for the docs
(scripts/docsfigures.py): each part's rounds, and the ratios printed. Runs as root (nginx
drops to www-data). The machine's CPU is shared: compare the ratios measured side by side,
not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests
import sqlalchemy as sa

from mpstream.paths import REPO_ROOT
from mpstream.runner.report.summary import BenchRecord
from mpstream.server import storage
from mpstream.server.stack import ServerStack

# The tests' real-server helpers (a tiny media tree); run from the repository root.
sys.path.insert(0, str(REPO_ROOT))
from tests.servers import make_tiny_media

IPPROTO_MPTCP = 262
BATCH = 50
ROUNDS = 3  # each part alternates its two sides this many times

Rounds = dict[str, list[dict[str, float]]]  # a part's side -> one figure dict per round


def session_body(sid: str) -> dict:
    return {
        "id": sid, "player": "hlsjs", "player_version": "bench", "protocol": "hls",
        "manifest": "/media/hls/master.m3u8", "scenario": "bench", "trial": 0,
        "transport": "unknown", "user_agent": "bench", "started_at": "2026-11-22T00:00:00Z",
    }  # fmt: skip


def batch(start: int) -> dict:
    events = []
    for seq in range(start, start + BATCH):
        if seq % 5 == 0:
            data = {"url": f"/media/hls/360p/seg_{seq:05d}.ts", "kind": "video",
                    "bitrate": 800000, "bytes": 200000, "t_request": seq * 10.0,
                    "t_first_byte": seq * 10.0 + 5, "t_done": seq * 10.0 + 80, "index": seq,
                    "duration_s": 2.0}  # fmt: skip
            events.append({"seq": seq, "t_ms": seq * 10.0, "type": "segment", "data": data})
        else:
            data = {"level_s": 4.0, "position": seq / 10}
            events.append({"seq": seq, "t_ms": seq * 10.0, "type": "buffer", "data": data})
    return {"events": events}


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


# ---------------------------------------------------------------------------------- ingest


def ingest(stack: ServerStack, path_for, clients: int, seconds: float) -> dict:
    """`clients` threads post batches of 50 for `seconds`; returns events/s and latencies."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(i: int) -> None:
        nonlocal errors
        sid = f"bench-{os.getpid()}-{random.randrange(1 << 30)}-{i}"
        http = requests.Session()
        http.post(stack.api_url + "/sessions", json=session_body(sid)).raise_for_status()
        seq, mine, bad = 0, [], 0
        body = batch(0)
        while time.monotonic() < stop_at:
            body = batch(seq)
            t0 = time.perf_counter()
            r = http.post(stack.api_url + path_for(sid), json=body)
            mine.append(time.perf_counter() - t0)
            bad += r.status_code != 200
            seq += BATCH
        with lock:
            latencies.extend(mine)
            errors += bad

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    return {
        "events_per_s": len(latencies) * BATCH / elapsed,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "requests": len(latencies),
        "errors": errors,
    }


def bench_ingest(media: Path, clients: int, seconds: float) -> tuple[Rounds, dict]:
    """Stored ingest against the no-op endpoint, alternated; each side's rounds and the ratio
    of their median rates."""
    print(f"== ingest: {clients} concurrent clients, batches of {BATCH} events, "
          f"{seconds:.0f} s per run, alternating store / no-op {ROUNDS} times")  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="mps-bench-") as tmp,
        ServerStack(media, port=free_port(), noop_endpoint=True, workdir=Path(tmp) / "w") as stack,
    ):
        runs: dict[str, list[dict]] = {"store": [], "noop": []}
        for _ in range(ROUNDS):
            runs["store"].append(
                ingest(stack, lambda sid: f"/sessions/{sid}/events", clients, seconds)
            )
            runs["noop"].append(ingest(stack, lambda sid: "/noop", clients, seconds))
        engine = storage.make_engine(stack.database_url)
        stored = storage.count_events(engine)
        engine.dispose()
    med = {kind: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
           for kind, rs in runs.items()}
    for kind, m in med.items():
        print(f"  {kind:5s}: {m['events_per_s']:8.0f} events/s  p50 {m['p50_ms']:6.1f} ms"
              f"  p99 {m['p99_ms']:6.1f} ms  (medians of {ROUNDS}; "
              f"{sum(r['errors'] for r in runs[kind])} errors)")  # fmt: skip
    ratio = med["store"]["events_per_s"] / med["noop"]["events_per_s"]
    print(f"  store / no-op throughput ratio: {ratio:.2f}   (events in the database: {stored})")
    return ({f"ingest-{kind}": rs for kind, rs in runs.items()},
            {"ingest-store": {"store_vs_noop": ratio}})


# ------------------------------------------------------------------------------ durability


def gunicorn_workers(master: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == master and fields[0] != "Z":
                out.append(int(stat.parent.name))
    return out


def bench_durability(media: Path, clients: int, seconds: float) -> Rounds:
    """Ingest while the collector's workers, then its master, are killed; then a new collector
    on the same database takes what was not acknowledged again. Its one round's counts."""
    print("== durability: kill -9 the collector's workers, then its master, during ingest")
    with tempfile.TemporaryDirectory(prefix="mps-bench-") as tmp:
        db = storage.sqlite_url(str(Path(tmp) / "durable.sqlite3"))
        acked: dict[str, set[int]] = {}
        sent: dict[str, set[int]] = {}
        lock = threading.Lock()
        stop = threading.Event()
        with ServerStack(media, port=free_port(), database_url=db,
                         workdir=Path(tmp) / "w1") as stack:  # fmt: skip

            def client(i: int) -> None:
                sid = f"durable-{i}"
                http = requests.Session()
                http.post(stack.api_url + "/sessions", json=session_body(sid)).raise_for_status()
                seq = 0
                while not stop.is_set():
                    with lock:
                        sent.setdefault(sid, set()).update(range(seq, seq + BATCH))
                    try:
                        r = http.post(f"{stack.api_url}/sessions/{sid}/events", json=batch(seq),
                                      timeout=10)  # fmt: skip
                        if r.status_code == 200:
                            with lock:
                                acked.setdefault(sid, set()).update(range(seq, seq + BATCH))
                    except requests.RequestException:
                        pass
                    seq += BATCH

            threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
            for t in threads:
                t.start()
            time.sleep(seconds / 3)
            workers = gunicorn_workers(stack.collector.pid)
            for pid in workers:
                os.kill(pid, signal.SIGKILL)
            print(f"  killed {len(workers)} workers (kill -9); the master starts new ones")
            time.sleep(seconds / 3)
            os.kill(stack.collector.pid, signal.SIGKILL)
            print("  killed the gunicorn master (kill -9)")
            time.sleep(seconds / 3)
            stop.set()
            for t in threads:
                t.join()
        engine = storage.make_engine(db)
        with engine.connect() as conn:
            rows = conn.execute(sa.select(storage.events.c.session_id, storage.events.c.seq))
            stored: dict[str, set[int]] = {}
            for sid, seq in rows:
                stored.setdefault(sid, set()).add(seq)
        engine.dispose()
        n_acked = sum(len(v) for v in acked.values())
        n_stored = sum(len(v) for v in stored.values())
        lost = sum(len(acked[s] - stored.get(s, set())) for s in acked)
        unacked_stored = sum(len(stored[s] - acked.get(s, set())) for s in stored)
        print(f"  acked {n_acked}, stored {n_stored}, lost {lost} "
              f"(committed but unacknowledged: {unacked_stored})")  # fmt: skip
        # Recovery: a new collector on the same database; clients re-send what was not acked.
        with ServerStack(media, port=free_port(), database_url=db,
                         workdir=Path(tmp) / "w2") as stack:  # fmt: skip
            resent = dupes = 0
            for sid, seqs in sent.items():
                missing = sorted(seqs - acked.get(sid, set()))
                for start in sorted({s - s % BATCH for s in missing}):
                    r = requests.post(f"{stack.api_url}/sessions/{sid}/events",
                                      json=batch(start), timeout=10)  # fmt: skip
                    r.raise_for_status()
                    resent += BATCH
                    dupes += r.json()["duplicates"]
        engine = storage.make_engine(db)
        total = storage.count_events(engine)
        engine.dispose()
        n_sent = sum(len(v) for v in sent.values())
        print(f"  after a restart and re-sending the {resent} unacknowledged events: "
              f"stored {total} of {n_sent} sent, {dupes} recognised as duplicates")  # fmt: skip
    return {"durability": [{
        "acked": n_acked, "stored": n_stored, "lost": lost, "unacked_stored": unacked_stored,
        "resent": resent, "sent": n_sent, "stored_after_resend": total, "duplicates": dupes}]}


# ----------------------------------------------------------------------------------- nginx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(sock: socket.socket, host: str, path: str, buf: bytearray) -> tuple[int, float]:
    """One keep-alive GET; returns (body bytes, seconds to the first response byte)."""
    t0 = time.perf_counter()
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    head = b""
    ttfb = None
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        if ttfb is None:
            ttfb = time.perf_counter() - t0
        head += chunk
    header, _, body = head.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in header.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))  # fmt: skip
    got = len(body)
    view = memoryview(buf)
    while got < length:
        n = sock.recv_into(view, min(len(buf), length - got))
        if n == 0:
            raise ConnectionError("closed")
        got += n
    return got, ttfb


def connect(addr: tuple[str, int], proto: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.connect(addr)
    return s


def request_rate(addr, path: str, proto: int, conns: int, seconds: float) -> float:
    count = 0
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def worker() -> None:
        nonlocal count
        buf = bytearray(1 << 20)
        s = connect(addr, proto)
        n = 0
        while time.monotonic() < stop_at:
            try:
                http_get(s, addr[0], path, buf)
            except (ConnectionError, OSError):
                # nginx closes a connection after keepalive_requests; open the next one
                s.close()
                s = connect(addr, proto)
                continue
            n += 1
        s.close()
        with lock:
            count += n

    threads = [threading.Thread(target=worker) for _ in range(conns)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return count / (time.monotonic() - t0)


def ttfb(addr, path: str, proto: int, n: int) -> tuple[float, float]:
    """Median TTFB (ms) on a new connection (connect included) and on a warm one."""
    buf = bytearray(1 << 20)
    cold, warm = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        s = connect(addr, proto)
        t_conn = time.perf_counter() - t0
        _, first = http_get(s, addr[0], path, buf)
        cold.append((t_conn + first) * 1000)
        _, first = http_get(s, addr[0], path, buf)
        warm.append(first * 1000)
        s.close()
    return statistics.median(cold), statistics.median(warm)


def bench_nginx(media: Path, seconds: float) -> tuple[Rounds, dict]:
    """Segment requests over MPTCP and TCP against one listener, alternated; each side's
    rounds, and its time to first byte and the MPTCP / TCP ratio of the median rates."""
    seg = "/media/hls/360p/seg_001.ts"
    size = (media / "hls/360p/seg_001.ts").stat().st_size
    print(f"== nginx over loopback: 2 s segment of {size} bytes, 4 keep-alive connections, "
          f"MPTCP and TCP clients on the same MPTCP listener, alternating 3 times")  # fmt: skip
    port = free_port()
    with ServerStack(media, port=port) as stack:
        addr = ("127.0.0.1", port)
        rates: dict[str, list[float]] = {"mptcp": [], "tcp": []}
        for _ in range(ROUNDS):
            rates["mptcp"].append(request_rate(addr, seg, IPPROTO_MPTCP, 4, seconds / 2))
            rates["tcp"].append(request_rate(addr, seg, socket.IPPROTO_TCP, 4, seconds / 2))
        times = {
            "mptcp": ttfb(addr, seg, IPPROTO_MPTCP, 100),
            "tcp": ttfb(addr, seg, socket.IPPROTO_TCP, 100),
        }
        print(f"  listener: {stack.mptcp_method}")
    derived = {}
    for kind in ("mptcp", "tcp"):
        r = statistics.median(rates[kind])
        cold, warm = times[kind]
        print(f"  {kind:5s}: {r:7.0f} segment requests/s ({r * size * 8 / 1e9:5.2f} Gbit/s)  "
              f"TTFB new connection {cold:5.2f} ms, kept-alive {warm:5.2f} ms")  # fmt: skip
        derived[f"nginx-{kind}"] = {"ttfb_new_ms": cold, "ttfb_kept_ms": warm}
    ratio = statistics.median(rates["mptcp"]) / statistics.median(rates["tcp"])
    print(f"  MPTCP / TCP request-rate ratio: {ratio:.2f}")
    derived["nginx-mptcp"]["mptcp_vs_tcp"] = ratio
    return ({f"nginx-{kind}": [{"requests_per_s": r, "gbit_s": r * size * 8 / 1e9} for r in rs]
             for kind, rs in rates.items()}, derived)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--only", choices=["ingest", "durability", "nginx"])
    parser.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = parser.parse_args()
    record = BenchRecord()
    rounds: Rounds = {}
    derived: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="mps-bench-media-") as tmp:
        media = make_tiny_media(Path(tmp), seconds=4)
        os.chmod(tmp, 0o755)
        if args.only in (None, "ingest"):
            part, ratios = bench_ingest(media, args.clients, args.seconds)
            rounds |= part
            derived |= ratios
        if args.only in (None, "durability"):
            rounds |= bench_durability(media, args.clients, args.seconds)
        if args.only in (None, "nginx"):
            part, ratios = bench_nginx(media, args.seconds)
            rounds |= part
            derived |= ratios
    if args.summary:
        out = record.write(args.summary, sys.argv, rounds, UNITS, derived)
        print(f"summary: {out}")


UNITS = {"events_per_s": "events/s", "p50_ms": "ms", "p99_ms": "ms", "errors": "",
         "requests": "", "store_vs_noop": "", "acked": "events", "stored": "events",
         "lost": "events", "unacked_stored": "events", "resent": "events", "sent": "events",
         "stored_after_resend": "events", "duplicates": "events", "requests_per_s": "req/s",
         "gbit_s": "Gbit/s", "ttfb_new_ms": "ms", "ttfb_kept_ms": "ms", "mptcp_vs_tcp": ""}


if __name__ == "__main__":
    main()
