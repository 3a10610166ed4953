"""Per-segment evidence of a video trial: for each media segment, when the page asked for it,
when nginx got the request, when its first and last bytes reached the page, and how many bytes
each path carried meanwhile, all on one clock (the report draws them as a timeline:
runner/report/figures.py).

The trial clock is the kernel samplers' (seconds from the samplers' start, `t_s` of the samples;
clock.json holds its origin in Unix time). nginx logs Unix time (`msec`, the response's end, and
`request_time`, so the request arrived at msec - request_time). The page's clock is
performance.now(); it is placed on Unix time by the manifest request: the page's request time of
the first manifest is taken as nginx's arrival time of it (the error is the request's one-way
trip, a few ms on the emulated paths).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from urllib.parse import urlparse

from mpstream.runner.layout import CLOCK_JSON, TrialData
from mpstream.runner.metrics.common import socket_increments
from mpstream.runner.metrics.metric import Metric, declare

# A sample counts towards a segment from its request up to one sampling interval after its last
# byte (the sample that sees the last bytes is taken up to 100 ms later).
SAMPLE_SLACK_S = 0.1
# A segment's tail: its last 10% of bytes (docs/penalties/tail.md).
TAIL_FRACTION = 0.1
# A returning path "carries data again" at the first poll that sees it bring more than this:
# more than the keep-alives, probes and path validation of a 100 ms poll.
RETURN_BYTES = 5000


def write_clock(tdir: Path, t0_monotonic: float, t0_unix: float) -> None:
    (tdir / CLOCK_JSON).write_text(json.dumps({"t0_monotonic": t0_monotonic,
                                               "t0_unix": t0_unix}))


def _last_segment_events(events: list[dict]) -> dict[int, dict]:
    last: dict[int, dict] = {}
    for e in sorted(events, key=lambda e: e.get("seq", 0)):
        d = e.get("data", {})
        if e.get("type") == "segment" and d.get("kind") in ("video", "muxed"):
            last[d["index"]] = d
    return last


def _arrivals(rec: TrialData) -> dict[str, list[tuple[float, dict]]]:
    """nginx's log lines by URI, each with its request's arrival in Unix time."""
    arrivals: dict[str, list[tuple[float, dict]]] = defaultdict(list)
    for r in rec.access_log:
        arrivals[r.get("uri", "")].append((float(r["msec"]) - float(r["request_time"]), r))
    return arrivals


def _page_clock(rec: TrialData, arrivals: dict[str, list[tuple[float, dict]]]):
    """(t0_unix, page_s): the trial clock's origin in Unix time, and a function from the page's
    milliseconds to seconds on the trial clock (None where it cannot be placed), anchored on the
    first manifest request: the page's request time of it is nginx's arrival time of it."""
    t0_unix = rec.t0_unix
    page_to_unix = None
    manifests = sorted((e for e in rec.events if e.get("type") == "manifest"),
                       key=lambda e: e["data"].get("t_request", math.inf))
    if manifests:
        m = manifests[0]["data"]
        seen = arrivals.get(urlparse(m.get("url", "")).path)
        if seen:
            page_to_unix = min(t for t, _ in seen) - m["t_request"] / 1000.0

    def page_s(t_ms):
        if page_to_unix is None or t0_unix is None or t_ms is None:
            return None
        return page_to_unix + t_ms / 1000.0 - t0_unix

    return t0_unix, page_s


def page_clock(rec: TrialData) -> Callable[[float | None], float | None]:
    """The page's milliseconds to seconds on the trial clock (None where they cannot be placed),
    as the evidence places them."""
    return _page_clock(rec, _arrivals(rec))[1]


@dataclass
class TrialEvidence:
    """A trial's evidence, computed once from its files: the rows of segments.csv, the
    per-trial figures for the report's tables, and what the timeline figure draws."""

    segments: list[dict]
    metrics: dict[str, float]
    held: list[tuple[float, float]]  # (poll time, interval) of the polls that found data held
    server: list[dict]  # the sender's sockets on a path, polled (not DESTROYED) rows
    unread: dict[float, int]  # poll time -> bytes the client held unread, all connections
    # A live session's latency to live: (trial time, seconds behind the live edge), per sample
    # a live session's (time, latency to live, playback rate) samples
    live_latency: list[tuple[float, float, float]] = field(default_factory=list)


def trial_evidence(rec: TrialData, n_paths: int) -> TrialEvidence:
    """Reads the trial's samples, access log and page events once, and derives from them:
    per video segment (its last download) the times in seconds on the trial clock (None where a
    source is missing), the time the sender held data back, the most the client held unread,
    and bytes_path<i>; and the per-trial figures (`_metrics`)."""
    arrivals = _arrivals(rec)
    t0_unix, page_s = _page_clock(rec, arrivals)
    client = rec.samples("client")
    incs = socket_increments(rec.path_samples("client"), "bytes_received")
    server = rec.samples("server")
    held = _held_polls(server)
    # What reached the client and the page could not read yet: an MPTCP connection's own
    # socket (its receive queue, and what waits behind a hole in its sequence), else the TCP
    # sockets themselves.
    mptcp_level = rec.mptcp_samples("client")
    unread: dict[float, int] = defaultdict(int)
    for r in (mptcp_level if mptcp_level is not None else
              [r for r in client if r["path"] is not None]):
        if r["state"] != "DESTROYED":
            unread[r["t_s"]] += r["rmem"]

    segs = _last_segment_events(rec.events)
    rows = []
    for idx in sorted(segs):
        d = segs[idx]
        req, first, done = page_s(d.get("t_request")), page_s(d.get("t_first_byte")), \
            page_s(d.get("t_done"))
        row: dict = {"segment_index": idx, "url": d.get("url", ""), "bytes": d.get("bytes"),
                     "request_page_s": req, "request_nginx_s": None,
                     "nginx_request_time_s": None, "nginx_connection": None,
                     "first_byte_s": first, "last_byte_s": done,
                     "sender_held_s": None, "client_unread_max_bytes": None}
        cands = arrivals.get(urlparse(d.get("url", "")).path, [])
        if cands and t0_unix is not None:
            # The log line of this download: the arrival closest to the page's request.
            ref = (req + t0_unix) if req is not None else cands[-1][0]
            t_arr, line = min(cands, key=lambda c: abs(c[0] - ref))
            row.update(request_nginx_s=t_arr - t0_unix,
                       nginx_request_time_s=float(line["request_time"]),
                       nginx_connection=line.get("connection"))
        per_path = _bytes_by_path(incs, n_paths, req, done)
        for p in range(n_paths):
            row[f"bytes_path{p}"] = per_path[p] if per_path else None
        if req is not None and done is not None:
            row["sender_held_s"] = round(_held_s(held, req, done), 3)
            row["client_unread_max_bytes"] = max(
                (b for t, b in unread.items() if req < t <= done + SAMPLE_SLACK_S), default=0)
        rows.append(row)
    metrics = _metrics(rec, n_paths, page_s, incs, held, rows)
    latency = [(t, float(e["data"]["latency_s"]), float(e["data"].get("playback_rate", 1.0)))
               for e in rec.events
               if e.get("type") == "live_latency"
               and (t := page_s(e.get("t_ms"))) is not None]
    return TrialEvidence(rows, metrics,
                         held, [r for r in server if r["path"] is not None
                                and r["state"] != "DESTROYED"], dict(unread), latency)


def _bytes_by_path(incs, n_paths: int, req: float | None, done: float | None) -> list[int]:
    """Bytes each path received from a download's request up to a poll after its last byte
    ([] when the download cannot be placed on the trial clock)."""
    if req is None or done is None:
        return []
    return [sum(inc for t, path, inc in incs if path == p and req < t <= done + SAMPLE_SLACK_S)
            for p in range(n_paths)]


def _tail_by_path(incs, n_paths: int, req: float, done: float,
                  fraction: float = TAIL_FRACTION) -> list[float]:
    """Bytes each path carried of a download's last `fraction` of bytes (its tail): the polls
    counted back from its last one until they hold that much, the earliest of them in part.
    The tail is what a segment waits for at the end, on whichever path is slow to bring it."""
    by_poll: dict[float, list[float]] = defaultdict(lambda: [0.0] * n_paths)
    for t, path, inc in incs:
        # A socket on no path (path None: the browser's loopback connection to a client-side
        # proxy, such as mphttp's) carried nothing over the network.
        if req < t <= done + SAMPLE_SLACK_S and path is not None and 0 <= path < n_paths \
                and inc > 0:
            by_poll[t][path] += inc
    want = fraction * sum(sum(v) for v in by_poll.values())
    out = [0.0] * n_paths
    for t in sorted(by_poll, reverse=True):
        if want <= 0:
            break
        poll = by_poll[t]
        part = min(1.0, want / sum(poll))  # a poll that crosses the mark counts pro rata
        for path, b in enumerate(poll):
            out[path] += b * part
        want -= sum(poll) * part
    return out


def path_returns(rec: TrialData) -> list[tuple[int, float]]:
    """(path index, time on the trial clock) of each `up` event of the profile that follows a
    `down` of the same path: a path that failed and came back."""
    t0, started = rec.t0_unix, rec.record.events_started_unix
    if t0 is None or started is None:
        return []
    names = [p.get("name") for p in rec.profile.get("paths") or []]
    down: set[int] = set()
    out = []
    for e in sorted(rec.profile.get("events") or [], key=lambda e: e.get("at_s", 0.0)):
        ref = e.get("path")
        path = names.index(ref) if isinstance(ref, str) and ref in names else ref
        if not isinstance(path, int):
            continue
        if e.get("action") == "down":
            down.add(path)
        elif e.get("action") == "up" and path in down:
            down.discard(path)
            out.append((path, started + float(e["at_s"]) - t0))
    return out


def return_s(incs, path: int, t_up: float) -> float:
    """Seconds from a path's return to the first poll that saw it bring more than
    RETURN_BYTES (NaN: none did before the trial ended)."""
    return min((t for t, p, inc in incs if p == path and t > t_up and inc > RETURN_BYTES),
               default=t_up + math.nan) - t_up


def _held_s(held: list[tuple[float, float]], req: float, done: float) -> float:
    return sum(dt for t, dt in held if req < t <= done)


HELD = declare(
    # The network's part of startup: the page's own time for that download, which leaves out
    # what the player did between the manifest and the request (tens of ms that vary from
    # trial to trial with the machine's load, and are the same whatever the transport).
    Metric("first_download_ms", "first segment: request to last byte", "ms"),
    Metric("first_segment_held_ms", "first segment: sender held data, nothing in flight", "ms"),
    Metric("held_share", "segment time the sender held data, nothing in flight"),
)
PER_PATH = declare(
    Metric("first_segment_share", "share of the first segment's bytes", per_path=True),
    Metric("tail_share", "share of the segments' last 10% of bytes", per_path=True),
    Metric("return_s", "time a returning path took to carry data again", "s", per_path=True),
)


def _metrics(rec: TrialData, n_paths: int, page_s, incs, held, rows: list[dict]
             ) -> dict[str, float]:
    """Per-trial figures for the report's tables with CIs: how long the first video segment's
    download took (request to last byte, on the page's clock); how long the sender held data back
    with nothing in flight while the page waited for its first video segment (its first
    download, the one startup waits for), and over the downloads of all segments as a share of
    the time they took; and each path's share of the bytes that arrived during that first
    download."""
    out: dict[str, float] = {}
    # Holding back is read from the kernel's sockets: a sender in user space (the QUIC hop's
    # gateway) is not seen holding anything, which is not the same as holding nothing.
    kernel_sender = rec.quic_samples is None
    first = min((e["data"] for e in rec.events if e.get("type") == "segment"
                 and e.get("data", {}).get("kind") in ("video", "muxed")),
                key=lambda d: d.get("t_request", math.inf), default=None)
    if first is not None:
        if first.get("t_request") is not None and first.get("t_done") is not None:
            out["first_download_ms"] = float(first["t_done"]) - float(first["t_request"])
        req, done = page_s(first.get("t_request")), page_s(first.get("t_done"))
        if req is not None and done is not None:
            if kernel_sender:
                out["first_segment_held_ms"] = 1000.0 * _held_s(held, req, done)
            # Which paths carried the bytes that arrived meanwhile: a path given more than its
            # capacity share makes the segment wait for it (the scheduler's first guess).
            per_path = _bytes_by_path(incs, n_paths, req, done)
            if n_paths > 1 and sum(per_path) > 0:
                for p, b in enumerate(per_path):
                    out[f"path{p}_first_segment_share"] = b / sum(per_path)
    placed = [r for r in rows if r["request_page_s"] is not None and r["last_byte_s"] is not None]
    if n_paths > 1:
        tails = [0.0] * n_paths
        for r in placed:
            for path, tail in enumerate(_tail_by_path(incs, n_paths, r["request_page_s"],
                                                      r["last_byte_s"])):
                tails[path] += tail
        if sum(tails) > 0:
            for path, tail in enumerate(tails):
                out[f"path{path}_tail_share"] = tail / sum(tails)
    for path, t_up in path_returns(rec):
        out[f"path{path}_return_s"] = return_s(incs, path, t_up)
    busy = sum(max(0.0, r["last_byte_s"] - r["request_page_s"]) for r in placed)
    if busy > 0 and kernel_sender:
        out["held_share"] = sum(r["sender_held_s"] for r in placed) / busy
    return out


def _connection(row: dict) -> str:
    """The connection a server socket belongs to: an MPTCP subflow's connection token (the
    part after the slash of `token:local(id)/remote(id)`), else the socket itself."""
    token = row.get("token") or ""
    if "/" in token:
        return token.split("/", 1)[1].split("(", 1)[0]
    return f"{row['local']}>{row['peer']}"


def _held_polls(server_rows: list[dict]) -> list[tuple[float, float]]:
    """(poll time, poll interval) of each server poll that found a connection holding data
    back: bytes written to one of its subflows and not sent (notsent) while none of its
    subflows had a packet in flight. A sender limited by its congestion window or by the
    receiver's window has packets in flight; one that holds bytes with nothing in flight waits
    on itself (a corked socket waits for its 200 ms timer)."""
    polls: dict[float, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in server_rows:
        if r["path"] is not None and r["state"] not in ("DESTROYED", "LISTEN"):
            polls[r["t_s"]][_connection(r)].append(r)
    times = sorted(polls)
    out = []
    for before, t in pairwise(times):
        if any(all(r["unacked"] == 0 for r in subflows) and any(r["notsent"] > 0
                                                                 for r in subflows)
               for subflows in polls[t].values()):
            out.append((t, t - before))
    return out
