"""The low-latency origin (server/origin/): its CPU with no viewer, the delay it adds to a part
over nginx's own delivery of the same bytes as a finished file, side by side in one run, and
many concurrent viewers following the live edge part by part.

    .venv/bin/python bench/bench_origin.py [--part-duration 0.5] [--idle-s 30] [--samples 40]
        [--viewers 50] [--rounds 10] [--rendition NAME] [--summary FILE]
        (--out FILE is the same as --summary FILE)

Starts `mpstream live synthetic --ladder tiny --segment-duration 2 --low-latency
--part-duration P` in a temporary folder and a ServerStack (nginx, the origin behind it, the
collector) serving it on a free port of 127.0.0.1; all of it is stopped on the way out, also
after an error, Ctrl-C or SIGTERM. Runs as root (nginx drops to www-data).

Idle: the origin's CPU time (user + system, /proc/PID/stat) over --idle-s seconds while the
stream is written and nobody asks for anything, as a share of one core. The origin looks at the
tree only when inotify reports a write (server/origin/watch.py), so this is its cost per write
of ffmpeg's, not a timer's.

When a part is written: a process of this bench holds the segment being written
(`NAME.m4s.tmp`) open and, woken by inotify on each write ffmpeg makes into dash/, fstat()s it
and parses what was added into CMAF chunks (manifests/cmaf.py, as the origin's index does); a
part is written when the check after ffmpeg's write finds its `mdat` complete. That moment is
late by the process's wake-up (tens of microseconds on an idle machine, more on a busy one),
which flatters the origin by as much (a sample of the origin's delivery can come out below
the file's, or below zero): the origin is woken by the same write.

Part delivery, one sample per part of the rendition, in turn:
- `origin`: the next part, not written yet (the playlist's EXT-X-PRELOAD-HINT, as an LL-HLS
  player asks for it), requested through nginx, which hands it to the origin (404 -> @origin),
  which holds it until the part is written: from the moment the part was written to the last
  byte of the answer. A sample whose part was already written when its request was sent is
  dropped.
- `nginx-file`: the very bytes of that part written as a finished file into the tree
  (`/media/bench-ref/`), fetched from nginx, which sends it from the page cache: from sending
  the request to the last byte. It is fetched REF_AFTER part targets after the part, when the
  origin's own work for that part is done.
- `added` = origin - nginx-file: what the part's delivery takes beyond what the best a static
  server can do with it takes (a finished file, asked for the moment it was written): the
  origin's wake-up by inotify, reading the part and answering, and nginx relaying the answer
  unbuffered. The request's own trip to nginx is in nginx-file and not in origin, so `added`
  is short by that much (tens of microseconds on loopback). Each client keeps its connection
  (keep-alive), as a player does.

Viewers: --viewers concurrent viewers (one asyncio loop, aiohttp, their own keep-alive
connections, opened by a first round that is not counted), each round all of them asking at
once, as an LL-HLS player does, for the next
part's playlist (`?_HLS_msn=M&_HLS_part=P`, a blocking reload) and for the part itself (its
preload hint), both held until it is written. A part is late when the viewer's part request
fails or its last byte arrives more than one part duration (--part-duration) after the part was
written; a reload is late when it fails, does not list the part, or arrives more than one
PART-TARGET after it. The viewers share this process, which reads their answers one after
another, so their arrival times include that; `at nginx` counts from the times nginx logged
the answers as sent (its access log, to the millisecond), without it: `parts late at nginx`,
and `spread`, the last answer's time minus the first's.

Prints figures; not a pass/fail test. `--summary` writes them as a run summary
(scripts/docsfigures.py). The machine's CPU is shared with ffmpeg, nginx and the origin: the
difference measured side by side is the figure, not either delivery alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import http.client
import json
import math
import multiprocessing
import os
import resource
import select
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import aiohttp

from mpstream.encoder.live import LiveConfig, live_in_background
from mpstream.encoder.lowlatency import LowLatency
from mpstream.manifests.cmaf import read_chunks
from mpstream.manifests.llhls import MediaPlaylist
from mpstream.manifests.lltree import LowLatencyTree, read_low_latency
from mpstream.proc import signals_interrupt
from mpstream.runner.report.summary import BenchRecord
from mpstream.server.stack import ServerStack

SEGMENT_S = 2.0
IDLE_S = 0.005  # the part clock checks at least this often without an inotify event
_IN_MODIFY, _IN_MOVED_TO, _IN_CREATE = 0x2, 0x80, 0x100
REF_AFTER = 0.25  # part targets after a part is written, its finished copy is fetched
HOST = "127.0.0.1"

Part = tuple[int, int]  # (segment number, part)


class PartClock:
    """When each part of one DASH representation is complete on disk: (the check before that
    did not find it, the first that did), on time.monotonic(), which every process shares. The
    checks run in a process of their own (`_Follower`), so that no thread of this one (the
    viewers') delays them; a thread here collects what it finds."""

    def __init__(self, dash: Path, tree: LowLatencyTree, rep: str):
        self.rep = rep
        self.written: dict[Part, tuple[float, float]] = {}
        self.sizes: dict[Part, int] = {}
        self.changed = threading.Condition()
        self.error: str | None = None
        ctx = multiprocessing.get_context("fork")
        self._halt = ctx.Event()
        self._found, found = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_Follower(dash, tree, rep, found, self._halt).run,
                                 name="part-clock", daemon=True)
        self._collector = threading.Thread(target=self._collect, name="part-clock", daemon=True)

    def __enter__(self) -> PartClock:
        self._proc.start()
        self._collector.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self._proc.join(timeout=5)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._collector.join(timeout=5)

    def wait(self, part: Part, timeout: float) -> tuple[float, float] | None:
        with self.changed:
            self.changed.wait_for(lambda: part in self.written or self.error is not None,
                                  timeout)
            return self.written.get(part)

    def _collect(self) -> None:
        while True:
            try:
                found = self._found.recv()
            except (EOFError, OSError):
                found = "the part clock stopped"
            with self.changed:
                if isinstance(found, str):
                    self.error = found
                else:
                    number, k, before, seen, size = found
                    self.written[(number, k)] = (before, seen)
                    self.sizes[(number, k)] = size
                self.changed.notify_all()
            if isinstance(found, str):
                return


class _Follower:
    """PartClock's process: follows the representation's segment being written, checking it
    after each write ffmpeg makes into the folder (inotify) and at least every IDLE_S; sends
    (segment, part, last check without it, first check with it, its size) for each part."""

    def __init__(self, dash: Path, tree: LowLatencyTree, rep: str, found: Connection,
                 halt: EventType):
        self.dash, self.tree, self.rep, self.found, self.halt = dash, tree, rep, found, halt
        self.number = 0  # the segment followed: its descriptor, bytes parsed, parts found
        self.fd: int | None = None
        self.parsed = self.count = 0
        self.following: int | None = None  # the next segment's descriptor, once it exists
        self.last = 0.0

    def run(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # stopped by its parent, in order
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            with _watching(self.dash) as events:
                self.number = self._growing_number()
                self.fd, self.last = self._open(self.number), time.monotonic()
                while not self.halt.is_set():
                    if select.select([events], [], [], IDLE_S)[0]:
                        os.read(events, 65536)
                    self._check()
            self.found.send("the part clock stopped")
        except Exception as exc:
            self.found.send(f"the part clock failed: {exc!r}")

    def _check(self) -> None:
        if self.fd is None:
            self.fd = self._open(self.number)
            return
        size = os.fstat(self.fd).st_size
        now = time.monotonic()
        if size > self.parsed:
            chunks, rest = read_chunks(os.pread(self.fd, size - self.parsed, self.parsed))
            self.parsed += rest
            for chunk in chunks:
                self.found.send((self.number, self.count, self.last, now, chunk.size))
                self.count += 1
        self.last = now
        if self.following is None:
            self.following = self._open(self.number + 1)
        elif size <= self.parsed:  # the next segment began: this one has all its parts
            os.close(self.fd)
            self.fd, self.following = self.following, None
            self.number, self.parsed, self.count = self.number + 1, 0, 0
            self._check()

    def _open(self, number: int) -> int | None:
        name = self.tree.segment_name(self.rep, number)
        for path in (self.dash / f"{name}.tmp", self.dash / name):
            with contextlib.suppress(FileNotFoundError):
                return os.open(path, os.O_RDONLY)
        return None

    def _growing_number(self) -> int:
        prefix = f"{self.tree.stamp}-{self.rep}-"
        numbers = [int(n[len(prefix):len(prefix) + 5]) for n in os.listdir(self.dash)
                   if n.startswith(prefix) and n.endswith(".m4s.tmp")]
        if not numbers:
            raise RuntimeError(f"no segment of representation {self.rep} is being written")
        return max(numbers)


@contextlib.contextmanager
def _watching(folder: Path) -> Iterator[int]:
    """An inotify descriptor that becomes readable on each write, creation or rename of a file
    in `folder` (Linux; through libc, which the standard library does not wrap)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    try:
        if libc.inotify_add_watch(fd, os.fsencode(folder), _IN_MODIFY | _IN_CREATE
                                  | _IN_MOVED_TO) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")
        yield fd
    finally:
        os.close(fd)


class Client:
    """One keep-alive HTTP/1.1 connection to nginx."""

    def __init__(self, port: int, timeout: float = 30.0):
        self.conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
        self.conn.connect()  # before the first request, whose time then has no handshake

    def get(self, path: str) -> tuple[int, bytes, float, float]:
        """(status, body, when the request was sent, when its last byte arrived)."""
        sent = time.monotonic()
        self.conn.request("GET", path)
        resp = self.conn.getresponse()
        body = resp.read()
        return resp.status, body, sent, time.monotonic()

    def close(self) -> None:
        self.conn.close()


def next_part(client: Client, playlist: str, tree: LowLatencyTree) -> tuple[Part, str]:
    """The part the playlist hints at (EXT-X-PRELOAD-HINT): the next one, not written yet, and
    its path under /media/."""
    status, body, _, _ = client.get(playlist)
    hint = MediaPlaylist.parse(body.decode()).preload_hint if status == 200 else None
    if hint is None:
        raise RuntimeError(f"{playlist}: HTTP {status}, no preload hint")
    name = hint.rsplit("/", 1)[-1]
    parsed = tree.parse_name(name)
    if parsed is None or parsed[2] is None:
        raise RuntimeError(f"{playlist}: the preload hint {name} names no part")
    return (parsed[1], parsed[2]), f"/media/dash/{name}"


def written_at(clock: PartClock, part: Part, timeout: float) -> tuple[float, float]:
    seen = clock.wait(part, timeout)
    if seen is None:
        raise RuntimeError(f"part {part} was not written within {timeout:g} s"
                           + (f" ({clock.error})" if clock.error else ""))
    return seen


def part_samples(port: int, tree_dir: Path, tree: LowLatencyTree, playlist: str,
                 clock: PartClock, samples: int) -> list[dict[str, float]]:
    """One sample per part: the part through the origin, then its bytes as a finished file."""
    refs = tree_dir / "bench-ref"
    refs.mkdir(mode=0o755)
    origin, files, lists = Client(port), Client(port), Client(port)
    out: list[dict[str, float]] = []
    try:
        while len(out) < samples:
            part, path = next_part(lists, playlist, tree)
            status, body, sent, done = origin.get(path)
            if status != 200:
                raise RuntimeError(f"{path}: HTTP {status}: {body[:200]!r}")
            before, seen = written_at(clock, part, 3 * tree.part_target)
            if before < sent:
                print(f"  part {part}: written before it was asked for, dropped", flush=True)
                continue
            if len(body) != clock.sizes[part]:
                raise RuntimeError(f"{path}: {len(body)} bytes, the part has "
                                   f"{clock.sizes[part]}")
            ref = refs / f"{len(out):04d}.m4s"
            ref.write_bytes(body)
            ref.chmod(0o644)
            time.sleep(max(0.0, seen + REF_AFTER * tree.part_target - time.monotonic()))
            status, copy, f_sent, f_done = files.get(f"/media/bench-ref/{ref.name}")
            if status != 200 or copy != body:
                raise RuntimeError(f"{ref.name} from nginx: HTTP {status}, {len(copy)} bytes")
            origin_ms, file_ms = 1000 * (done - seen), 1000 * (f_done - f_sent)
            out.append({"origin_ms": origin_ms, "file_ms": file_ms,
                        "added_ms": origin_ms - file_ms, "bytes": len(body)})
            print(f"  part {part[0]}.{part[1]} {len(body):6} B: origin {origin_ms:6.2f} ms, "
                  f"file {file_ms:5.2f} ms, added {origin_ms - file_ms:6.2f} ms", flush=True)
    finally:
        for c in (origin, files, lists):
            c.close()
    return out


@dataclass(frozen=True)
class Round:
    """One round of the viewers: the part they follow, its paths, when it was written."""

    playlist: str  # /media/hls/<rendition>/index.m3u8
    query: str  # _HLS_msn=M&_HLS_part=P
    part_path: str  # /media/dash/<segment>.p<P>.m4s
    wanted: str  # the part's name, which the reload's answer must list


async def viewer(session: aiohttp.ClientSession, base: str, rnd: Round
                 ) -> tuple[bool, float, bool, float]:
    """One viewer's round, as an LL-HLS player asks: the blocking reload and the part's preload
    hint at once. (reload lists the part, its last byte's time, part whole, its last byte's)."""

    async def get(path: str) -> tuple[int, bytes, float]:
        try:
            async with session.get(base + path) as resp:
                return resp.status, await resp.read(), time.monotonic()
        except aiohttp.ClientError:
            return 0, b"", time.monotonic()

    (r_status, r_body, r_done), (p_status, p_body, p_done) = await asyncio.gather(
        get(f"{rnd.playlist}?{rnd.query}"), get(rnd.part_path))
    listed = r_status == 200 and rnd.wanted.encode() in r_body
    return listed, r_done, p_status == 200 and len(p_body) > 0, p_done


def nginx_ends(access_log: Path, uri: str, args: str | None = None) -> list[float]:
    """When nginx finished each answer to `uri` (with query `args`), on time.time(): its access
    log's `msec`, to the millisecond."""
    ends = []
    for line in access_log.read_text().splitlines():
        with contextlib.suppress(ValueError, KeyError):
            entry = json.loads(line)
            if entry["uri"] == uri and (args is None or entry["args"] == args):
                ends.append(float(entry["msec"]))
    return ends


def round_figures(rnd: Round, answers: list[tuple[bool, float, bool, float]], seen: float,
                  tree: LowLatencyTree, access_log: Path) -> dict[str, float]:
    """A round's late reloads and parts (by this process's clock and by nginx's) and spread."""
    wall = time.time() - time.monotonic()  # nginx logs wall-clock time
    reloads = [done - seen for _, done, _, _ in answers]
    parts = [done - seen for _, _, _, done in answers]
    at_nginx = [end - wall - seen for end in nginx_ends(access_log, rnd.part_path)]
    reload_ends = nginx_ends(access_log, rnd.playlist, rnd.query)
    return {
        "late": float(sum(1 for (ok, _, _, _), a in zip(answers, reloads, strict=True)
                          if not ok or a > tree.part_target)),
        "parts_late": float(sum(1 for (_, _, ok, _), a in zip(answers, parts, strict=True)
                                if not ok or a > tree.part_duration)),
        "parts_late_at_nginx": float(sum(1 for a in at_nginx if a > tree.part_duration)
                                     + max(0, len(answers) - len(at_nginx))),
        "spread_ms": 1000 * (max(reloads) - min(reloads)),
        "first_ms": 1000 * min(reloads), "last_ms": 1000 * max(reloads),
        "part_last_ms": 1000 * max(parts),
        "part_last_at_nginx_ms": 1000 * max(at_nginx, default=math.nan),
        "nginx_spread_ms": (1000 * (max(reload_ends) - min(reload_ends)) if reload_ends
                            else math.nan)}


async def viewer_rounds(port: int, tree: LowLatencyTree, playlist: str, clock: PartClock,
                        viewers: int, rounds: int, access_log: Path) -> list[dict[str, float]]:
    """Per round: every viewer's reload and part of the next part, late ones and spread."""
    base = f"http://{HOST}:{port}"
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=30)
    lists = Client(port)
    out: list[dict[str, float]] = []
    try:
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            for r in range(-1, rounds):
                (msn, k), part_path = await asyncio.to_thread(next_part, lists, playlist, tree)
                rnd = Round(playlist, f"_HLS_msn={msn}&_HLS_part={k}", part_path,
                            tree.part_name(clock.rep, msn, k))
                answers = await asyncio.gather(*(viewer(session, base, rnd)
                                                 for _ in range(viewers)))
                if r < 0:  # the viewers' connections opened, as a player's are before it plays
                    print(f"  warm-up round: {2 * viewers} connections opened", flush=True)
                    continue
                _, seen = await asyncio.to_thread(written_at, clock, (msn, k),
                                                  3 * tree.part_target)
                row = round_figures(rnd, answers, seen, tree, access_log)
                out.append(row)
                print(f"  round {r} part {msn}.{k}: parts late {row['parts_late']:.0f} of "
                      f"{viewers} (at nginx {row['parts_late_at_nginx']:.0f}), last part "
                      f"{row['part_last_ms']:.1f} ms after it was written (at nginx "
                      f"{row['part_last_at_nginx_ms']:.1f} ms); reloads late {row['late']:.0f}, "
                      f"{row['first_ms']:.1f} to {row['last_ms']:.1f} ms (at nginx spread "
                      f"{row['nginx_spread_ms']:.0f} ms)", flush=True)
    finally:
        lists.close()
    return out


def cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(pid: int, seconds: float) -> dict[str, float]:
    """The origin's CPU over `seconds` with no request: ms of CPU, share of one core."""
    before, t0 = cpu_s(pid), time.monotonic()
    time.sleep(seconds)
    used, wall = cpu_s(pid) - before, time.monotonic() - t0
    print(f"  origin (pid {pid}): {1000 * used:.0f} ms of CPU in {wall:.1f} s, "
          f"{100 * used / wall:.2f}% of a core", flush=True)
    return {"cpu_ms": 1000 * used, "cpu_share_pct": 100 * used / wall, "wall_s": wall}


def percentile(xs: list[float], q: float) -> float:
    """The q-quantile, linear between the nearest ranks."""
    xs = sorted(xs)
    at = q * (len(xs) - 1)
    lo = int(at)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (at - lo)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_for_playlist(client: Client, playlist: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        status, body, _, _ = client.get(playlist)
        if status == 200 and MediaPlaylist.parse(body.decode()).preload_hint:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{playlist}: HTTP {status} after {timeout:g} s")
        time.sleep(0.2)


def run(args: argparse.Namespace, tmp: Path) -> tuple[dict[str, list[dict[str, float]]],
                                                      LowLatencyTree]:
    """The figures of every sample and round by condition, and the stream's description."""
    tmp.chmod(0o755)  # nginx's workers run as www-data
    config = LiveConfig(source="synthetic", ladder="tiny", segment_duration=SEGMENT_S,
                        window_s=12, out=tmp / "tree",
                        low_latency=LowLatency(args.part_duration))
    port = free_port()
    with live_in_background(config) as tree_dir, \
            ServerStack(tree_dir, host=HOST, port=port, workdir=tmp / "server") as stack:
        described = read_low_latency(tree_dir)
        assert described is not None and stack.origin is not None
        tree = described[0]
        rendition = (tree.rendition(args.rendition) if args.rendition
                     else tree.renditions[0])
        if rendition is None:
            raise SystemExit(f"no rendition {args.rendition}: one of "
                             f"{', '.join(r.playlist for r in tree.renditions)}")
        playlist = f"/media/hls/{rendition.playlist}/index.m3u8"
        probe = Client(port)
        wait_for_playlist(probe, playlist)
        probe.close()
        print(f"serving {stack.base_url} ({stack.mptcp_method}); rendition {rendition.playlist}"
              f" (representation {rendition.rep}), part duration {tree.part_duration:g} s, "
              f"part target {tree.part_target:.3f} s", flush=True)
        print(f"idle, {args.idle_s:g} s without a request:", flush=True)
        idle = idle_cpu(stack.origin.pid, args.idle_s)
        with PartClock(tree_dir / "dash", tree, rendition.rep) as clock:
            print(f"part delivery, {args.samples} samples:", flush=True)
            parts = part_samples(port, tree_dir, tree, playlist, clock, args.samples)
            print(f"{args.viewers} viewers, {args.rounds} rounds:", flush=True)
            rounds = asyncio.run(viewer_rounds(port, tree, playlist, clock, args.viewers,
                                               args.rounds, stack.access_log))
        return {"idle": [idle],
                "origin": [{"delivery_ms": p["origin_ms"], "bytes": p["bytes"]} for p in parts],
                "nginx-file": [{"delivery_ms": p["file_ms"], "bytes": p["bytes"]}
                               for p in parts],
                "added": [{"added_ms": p["added_ms"]} for p in parts],
                "viewers": rounds}, tree


def derive(got: dict[str, list[dict[str, float]]], tree: LowLatencyTree, viewers: int
           ) -> dict[str, dict[str, float]]:
    """The figures computed over all samples and rounds (n 1 in the summary)."""
    added = [r["added_ms"] for r in got["added"]]
    rounds = got["viewers"]
    return {
        "origin": {"delivery_p95_ms": percentile([r["delivery_ms"] for r in got["origin"]], .95)},
        "nginx-file": {"delivery_p95_ms": percentile([r["delivery_ms"] for r in got["nginx-file"]],
                                                     .95)},
        "added": {"added_p95_ms": percentile(added, .95), "added_max_ms": max(added)},
        "viewers": {"late_total": sum(r["late"] for r in rounds),
                    "parts_late_total": sum(r["parts_late"] for r in rounds),
                    "parts_late_at_nginx_total": sum(r["parts_late_at_nginx"] for r in rounds),
                    "answers": float(viewers * len(rounds)),
                    "spread_max_ms": max(r["spread_ms"] for r in rounds),
                    "last_max_ms": max(r["last_ms"] for r in rounds),
                    "part_last_max_ms": max(r["part_last_ms"] for r in rounds),
                    "part_target_ms": 1000 * tree.part_target,
                    "part_duration_ms": 1000 * tree.part_duration},
    }


def report(got: dict[str, list[dict[str, float]]], derived: dict[str, dict[str, float]]) -> None:
    idle = got["idle"][0]
    print()
    print(f"origin idle: {idle['cpu_share_pct']:.2f}% of a core over {idle['wall_s']:.0f} s "
          f"({idle['cpu_ms']:.0f} ms of CPU), the stream written, no viewer")
    print(f"{'':12} {'median':>9} {'p95':>9} {'max':>9}")
    for label, key in (("origin", "delivery_ms"), ("nginx-file", "delivery_ms"),
                       ("added", "added_ms")):
        xs = [r[key] for r in got[label]]
        print(f"{label:12} {statistics.median(xs):6.2f} ms {percentile(xs, .95):6.2f} ms "
              f"{max(xs):6.2f} ms")
    added = [r["added_ms"] for r in got["added"]]
    print(f"added delay to a part over nginx's delivery of its bytes: median "
          f"{statistics.median(added):.2f} ms, p95 {percentile(added, .95):.2f} ms")
    v, rounds = derived["viewers"], got["viewers"]
    print(f"viewers: {v['parts_late_total']:.0f} parts of {v['answers']:.0f} late by more than "
          f"one part duration ({v['part_duration_ms']:.0f} ms; at nginx "
          f"{v['parts_late_at_nginx_total']:.0f}); slowest part {v['part_last_max_ms']:.1f} ms "
          f"after it was written")
    print(f"         {v['late_total']:.0f} reloads of {v['answers']:.0f} late (more than "
          f"{v['part_target_ms']:.0f} ms after the part); spread per round median "
          f"{statistics.median(r['spread_ms'] for r in rounds):.1f} ms, max "
          f"{v['spread_max_ms']:.1f} ms (at nginx: median "
          f"{statistics.median(r['nginx_spread_ms'] for r in rounds):.0f} ms)")


def raise_open_files() -> None:
    """As many descriptors as allowed, for this process and the servers it starts: every
    viewer holds two connections, and nginx and the origin one each per viewer's request."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part-duration", type=float, default=0.5,
                        help="the stream's part duration (s; default 0.5)")
    parser.add_argument("--idle-s", type=float, default=30.0,
                        help="seconds the origin's CPU is measured with no viewer (default 30)")
    parser.add_argument("--samples", type=int, default=40, help="parts timed (default 40)")
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=10, help="viewer rounds (default 10)")
    parser.add_argument("--rendition", help="the HLS rendition (default: the stream's first)")
    parser.add_argument("--summary", "--out", dest="summary", type=Path,
                        help="also write the figures as a run summary")
    args = parser.parse_args()
    record = BenchRecord()
    raise_open_files()
    with signals_interrupt(), tempfile.TemporaryDirectory(prefix="mps-bench-origin-") as tmp:
        got, tree = run(args, Path(tmp))
    derived = derive(got, tree, args.viewers)
    report(got, derived)
    if args.summary:
        names = {k for rows in [*got.values(), list(derived.values())] for r in rows for k in r}
        units = {k: "ms" if k.endswith("_ms") else "s" if k.endswith("_s") else
                 "%" if k.endswith("_pct") else "B" if k == "bytes" else "" for k in names}
        argv = ["--summary" if a == "--out" else a.replace("--out=", "--summary=", 1)
                for a in sys.argv]
        print(f"summary: {record.write(args.summary, argv, got, units, derived)}")


if __name__ == "__main__":
    main()
