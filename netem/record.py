"""A real path as a trace: saturate its downlink and its uplink with one TCP transfer each and
write what was delivered as Mahimahi packet-delivery traces (NAME.down, NAME.up: one line per
1500-byte delivery opportunity, the millisecond it happened) plus a summary (NAME.json: mean
rate, percentiles of the 1 s rates, retransmissions, RTT). A recorded trace loads in a profile
(`trace = "NAME"`) like any other.

`mpstream trace serve` is the far end: for "DOWN S" it sends for S seconds, for "UP S" it takes
what comes and answers with the millisecond each full-sized segment's worth of bytes arrived.
Each segment's payload (the connection's MSS, as negotiated at its handshake) stands for one
1500-byte packet on the wire, so a trace replays the path's packet rate, not its payload rate.
The sender and receiver are Python sockets: paths faster than a few hundred Mbit/s are recorded
as slower than they are.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from mpstream import tcpinfo
from mpstream.errors import UserError
from mpstream.netem import traces
from mpstream.progress import working

CHUNK = 1 << 16
_TCPI_READ = ("snd_mss", "rcv_mss", "rtt", "total_retrans")


def tcp_info(sock: socket.socket) -> dict[str, int]:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, tcpinfo.length(*_TCPI_READ))
    info = tcpinfo.read(raw, *_TCPI_READ)
    return {"snd_mss": info["snd_mss"], "rcv_mss": info["rcv_mss"], "rtt_us": info["rtt"],
            "total_retrans": info["total_retrans"]}


class _Stamps:
    """Millisecond stamps, one per `unit` bytes received, from the first byte on."""

    def __init__(self, unit: int):
        self.unit = unit
        self.t0: float | None = None
        self.total = 0
        self.stamps: list[int] = []

    def add(self, n: int) -> None:
        now = time.monotonic()
        if self.t0 is None:
            self.t0 = now
        before = self.total // self.unit
        self.total += n
        ms = max(1, round((now - self.t0) * 1000))
        self.stamps.extend([ms] * (self.total // self.unit - before))


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        line = b""
        while not line.endswith(b"\n") and len(line) < 64:
            got = sock.recv(1)
            if not got:
                return
            line += got
        try:
            what, seconds = line.decode().split()
            duration = min(float(seconds), 600.0)
        except ValueError:
            return
        if what == "DOWN":
            payload = bytes(CHUNK)
            end = time.monotonic() + duration
            try:
                while time.monotonic() < end:
                    sock.sendall(payload)
            except OSError:
                return
        elif what == "UP":
            stamps = _Stamps(tcp_info(sock)["snd_mss"] or 1448)
            while chunk := sock.recv(CHUNK):
                stamps.add(len(chunk))
            sock.sendall(json.dumps({"stamps": stamps.stamps, "bytes": stamps.total}).encode())


class TraceServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _connect(host: str, port: int, interface: str | None) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if interface:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, interface.encode())
        except OSError as exc:
            raise UserError(f"cannot bind to interface {interface}: {exc.strerror}") from None
    sock.settimeout(10)
    try:
        sock.connect((host, port))
    except OSError as exc:
        raise UserError(f"cannot reach the trace server at {host}:{port}"
                        f"{f' by {interface}' if interface else ''}: {exc}; start one there "
                        "with `mpstream trace serve --listen ADDR:PORT`") from None
    sock.settimeout(30)  # a path that stops delivering for this long ends the recording
    return sock


def record_down(host: str, port: int, seconds: float, interface: str | None) -> dict[str, Any]:
    with _connect(host, port, interface) as sock:
        sock.sendall(f"DOWN {seconds:g}\n".encode())
        stamps = _Stamps(tcp_info(sock)["snd_mss"] or 1448)
        buf = bytearray(CHUNK)
        while n := sock.recv_into(buf):
            stamps.add(n)
        info = tcp_info(sock)
    return {"stamps": stamps.stamps, "bytes": stamps.total, "rtt_ms": info["rtt_us"] / 1000}


def record_up(host: str, port: int, seconds: float, interface: str | None) -> dict[str, Any]:
    with _connect(host, port, interface) as sock:
        sock.sendall(f"UP {seconds:g}\n".encode())
        payload = bytes(CHUNK)
        end = time.monotonic() + seconds
        sent = 0
        while time.monotonic() < end:
            sock.sendall(payload)
            sent += CHUNK
        info = tcp_info(sock)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(CHUNK):
            answer += chunk
    got = json.loads(answer)
    segments = max(1, sent // (info["snd_mss"] or 1448))
    return {"stamps": got["stamps"], "bytes": got["bytes"], "rtt_ms": info["rtt_us"] / 1000,
            "retransmitted_fraction": info["total_retrans"] / segments}


def rate_series(stamps: list[int], bin_ms: int = 1000) -> list[float]:
    """Delivered bit/s in each whole `bin_ms` interval of a trace."""
    if not stamps:
        return []
    bins = [0] * (stamps[-1] // bin_ms)
    for t in stamps:
        if t // bin_ms < len(bins):
            bins[t // bin_ms] += 1
    return [n * traces.TRACE_PACKET_BYTES * 8 * 1000 / bin_ms for n in bins]


def summarize(direction: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    series = rate_series(direction["stamps"])
    stamps = direction["stamps"]
    mean = (len(stamps) * traces.TRACE_PACKET_BYTES * 8 / (stamps[-1] / 1000)) if stamps else 0
    out = {"mean_bps": round(mean), "rtt_ms": round(direction["rtt_ms"], 2),
           "seconds": round(stamps[-1] / 1000, 3) if stamps else 0}
    if series:
        for p in (5, 25, 50, 75, 95):
            out[f"p{p}_bps"] = round(float(np.percentile(series, p)))
    if "retransmitted_fraction" in direction:
        out["retransmitted_fraction"] = round(direction["retransmitted_fraction"], 5)
    return out


def record(server: str, *, seconds: float, interface: str | None, out: Path,
           step: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Records the downlink, then the uplink, `seconds` each; `step(text)` is told as each
    direction begins."""
    host, _, port = server.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--server {server!r}: give HOST:PORT of a `mpstream trace serve`")
    host = host.strip("[]")
    step(f"downlink from {server}")
    down = record_down(host, int(port), seconds, interface)
    step(f"uplink to {server}")
    up = record_up(host, int(port), seconds, interface)
    for name, d in (("down", down), ("up", up)):
        if len(d["stamps"]) < 2:
            raise UserError(f"the {name}link delivered almost nothing ({d['bytes']} bytes) in "
                            f"{seconds:g} s: is the path up?")
    out.parent.mkdir(parents=True, exist_ok=True)
    traces.write(out.with_name(out.name + ".down"), down["stamps"])
    traces.write(out.with_name(out.name + ".up"), up["stamps"])
    summary = {"server": server, "interface": interface, "seconds": seconds,
               "down": summarize(down), "up": summarize(up)}
    out.with_name(out.name + ".json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


@click.group()
def trace() -> None:
    """Record a real path as Mahimahi traces (record), and the far end that feeds it (serve)."""


@trace.command("serve")
@click.option("--listen", default="0.0.0.0:9870", show_default=True, metavar="ADDR:PORT")
def serve(listen: str) -> None:
    """Send and receive for `trace record` on another host until Ctrl-C."""
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--listen {listen!r}: give ADDR:PORT")
    with TraceServer((host.strip("[]"), int(port)), _Handler) as srv:
        click.echo(f"trace server on {listen}; Ctrl-C stops it")
        thread = threading.Thread(target=srv.serve_forever, daemon=True)
        thread.start()
        try:
            while thread.is_alive():
                thread.join(0.5)
        except KeyboardInterrupt:
            srv.shutdown()


@trace.command("record")
@click.option("--server", required=True, metavar="HOST:PORT",
              help="Where `mpstream trace serve` runs.")
@click.option("--interface", help="Leave by this interface [default: the route's].")
@click.option("--duration", "seconds", type=click.FloatRange(2, 600), default=30.0,
              show_default=True, help="Seconds of each direction.")
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="NAME or path: writes NAME.down, NAME.up and NAME.json (a bare name goes to "
                   "the trace store, where profiles find it).")
def record_cmd(server: str, interface: str | None, seconds: float, out: Path) -> None:
    """Saturate the path's downlink, then its uplink, and write what was delivered."""
    if len(out.parts) == 1:
        out = traces.cache_dir() / out
    with working("trace record", seconds=2 * seconds) as progress:
        summary = record(server, seconds=seconds, interface=interface, out=out,
                         step=progress.step)
    for d in ("down", "up"):
        s = summary[d]
        click.echo(f"{d:<5} mean {s['mean_bps'] / 1e6:.2f} Mbit/s, p5 "
                   f"{s.get('p5_bps', 0) / 1e6:.2f}, p95 {s.get('p95_bps', 0) / 1e6:.2f}, "
                   f"rtt {s['rtt_ms']:.1f} ms")
    click.echo(f"wrote {out}.down, {out}.up, {out}.json")
