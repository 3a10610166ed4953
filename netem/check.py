"""`mpstream netem check`: measure what a topology really does and compare it with its profile.

Per path: round-trip time and loss with ping, bound to the path's client address (so source
routing pins it to that path), and downlink throughput with iperf3 TCP flows bound the same
way. Then the aggregate: iperf3 under mptcpize (mode mptcp) or plain TCP (mode tcp), with the
bytes each client interface carried meanwhile.

Tolerances (stated here so that a failing check can be read against them):
- RTT: the median of the pings within RTT_TOLERANCE_MS + RTT_TOLERANCE_FRACTION of the configured
  round trip (plus the configured jitter of both directions; a trace-driven direction may add up
  to its longest gap between delivery opportunities, so only the lower bound holds there).
- Loss: round-trip loss within four standard errors of 1 - (1 - up)(1 - down), plus 1 point.
- Throughput of a fixed-rate, loss-free path: between RATE_LOW and RATE_HIGH of the configured
  downlink rate (a TCP flow's goodput is at most 1448/1500 = 96.5% of an IP-level rate), by
  PATH_STREAMS flows at once.
- Aggregate over fixed-rate, loss-free paths: at least AGGREGATE_LOW of the sum of the rates (or
  of the single path's rate in mode tcp), at most RATE_HIGH; every non-backup path carries at
  least SUBFLOW_SHARE of the bytes in mode mptcp, and nothing but `tcp_path` does in mode tcp.
- A shared server link counts in every figure of every path: its delay and loss add, its rate
  caps each path and the aggregate.
Lossy or trace-driven links have no fixed throughput to meet: those figures are shown, not judged.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from mpstream.errors import UserError
from mpstream.netem.profile import Link, Profile
from mpstream.netem.system import require_tools
from mpstream.netem.topology import Topology
from mpstream.netem.traces import mean_bps as trace_mean_bps
from mpstream.transports.base import get_transport

# The aggregate of an mptcp profile is measured by iperf3 speaking MPTCP at both ends.
MPTCP_WRAP = get_transport("mptcp").wrap

RTT_TOLERANCE_MS = 1.5
RTT_TOLERANCE_FRACTION = 0.05
RATE_LOW = 0.85
# A TCP goodput cannot exceed the IP rate; the margin above its 96.5% ceiling absorbs the
# receiver's timing on a busy CPU (a late read moves bytes into the counted seconds).
RATE_HIGH = 1.0
AGGREGATE_LOW = 0.80
SUBFLOW_SHARE = 0.02
PING_BYTES = 84  # IP size of ping's default 56-byte payload
# iperf3 runs take ports from here on, one each: path i's run IPERF_PORT + i, the aggregate's
# the next one.
IPERF_PORT = 5201
WARMUP_S = 1.0
# A path's rate is measured by several flows at once, so that it is the link's rate and not one
# flow's congestion window: one CUBIC flow on a 100 Mbit/s, 30 ms path with a one-BDP queue
# reaches 96.5% after its slow start most runs, but a second loss episode (the machine's vCPU
# paused for a few ms) halves a lone flow's window for seconds; the other flows keep the link
# full meanwhile.
PATH_STREAMS = 4


@dataclass
class Measurement:
    check: str
    path: str
    unit: str
    configured: float | None
    measured: float | None
    low: float | None = None  # acceptance interval; both None: shown, not judged
    high: float | None = None
    note: str = ""

    @property
    def judged(self) -> bool:
        return self.low is not None or self.high is not None

    @property
    def ok(self) -> bool:
        if not self.judged:
            return True
        if self.measured is None:
            return False
        return (self.low is None or self.measured >= self.low) and \
            (self.high is None or self.measured <= self.high)


@dataclass
class CheckReport:
    profile: str
    mode: str
    measurements: list[Measurement] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.measurements)

    def failures(self) -> list[Measurement]:
        return [m for m in self.measurements if not m.ok]

    def as_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "mode": self.mode, "ok": self.ok,
                "seconds": round(self.seconds, 1),
                "measurements": [{**asdict(m), "ok": m.ok, "judged": m.judged}
                                 for m in self.measurements]}


def _chain(profile: Profile, index: int,
           direction: Literal["uplink", "downlink"]) -> list[Link]:
    """The links a packet of path `index` crosses in `direction`: the path's own and, when the
    profile has one, the shared server link."""
    server = profile.server_link_model(direction)
    return [profile.link(index, direction), *([server] if server else [])]


def _serialization_ms(chain: list[Link], size: int) -> float:
    return sum(size * 8 / link.rate_bps * 1000 for link in chain
               if link.rate_bps and not link.trace)


def _fixed_rate_bps(chain: list[Link]) -> int | None:
    """The rate TCP should reach over `chain`: its narrowest fixed rate; None when a trace,
    a loss or no rate at all leaves no fixed figure to meet."""
    if any(link.trace or link.loss for link in chain):
        return None
    rates = [link.rate_bps for link in chain if link.rate_bps]
    return min(rates) if rates else None


def _loss(chain: list[Link]) -> float:
    return 1 - math.prod(1 - link.loss for link in chain)


def rtt_slack_ms(configured_ms: float, jitter_ms: float = 0.0) -> float:
    """How far a path's median round trip may stray from the configured one (both directions'
    jitter added)."""
    return RTT_TOLERANCE_MS + RTT_TOLERANCE_FRACTION * configured_ms + jitter_ms


def _ping_measurements(topo: Topology, profile: Profile) -> list[Measurement]:
    procs = []
    for path in topo.paths:
        lossy = _loss(_chain(profile, path.index, "uplink") +
                      _chain(profile, path.index, "downlink"))
        count = 300 if lossy else 50
        procs.append((path, count, topo.popen(
            "client", ["ping", "-n", "-c", str(count), "-i", "0.01", "-W", "2",
                       "-I", path.client_addr, topo.server_addr],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    out = []
    for path, count, proc in procs:
        text, _ = proc.communicate(timeout=60)
        rtts = [float(x) for x in re.findall(r"time=([0-9.]+) ms", text)]
        both = _chain(profile, path.index, "uplink") + _chain(profile, path.index, "downlink")
        label = f"{path.index} {path.name}"
        configured = profile.rtt_ms(path.index) + _serialization_ms(both, PING_BYTES)
        slack = rtt_slack_ms(configured, sum(link.jitter_ms for link in both))
        traced = [link.trace for link in both if link.trace]
        high = None if traced else configured + slack
        note = "trace: waits for delivery opportunities, lower bound only" if traced else ""
        out.append(Measurement("RTT median", label, "ms", round(configured, 2),
                               round(statistics.median(rtts), 2) if rtts else None,
                               round(configured - slack, 2), high and round(high, 2), note))
        if rtts:
            p99 = sorted(rtts)[min(len(rtts) - 1, math.ceil(0.99 * len(rtts)) - 1)]
            out.append(Measurement("RTT p99", label, "ms", round(configured, 2),
                                   round(p99, 2), note="shown, not judged"))
        expected = _loss(both)
        measured = 1 - len(rtts) / count
        margin = 4 * math.sqrt(max(expected * (1 - expected), 1e-4) / count) + 0.01
        low = max(0.0, expected - margin)
        out.append(Measurement("loss", label, "%", round(100 * expected, 2),
                               round(100 * measured, 2), round(100 * low, 2),
                               round(100 * (expected + margin), 2), f"round trip, {count} pings"))
    return out


@dataclass
class IperfRun:
    """One iperf3 run: its downlink goodput, or what iperf3 said when it gave none."""
    bps: float | None
    error: str = ""

    def note(self, otherwise: str = "") -> str:
        return f"iperf3 failed: {self.error}" if self.bps is None else otherwise


def _iperf(topo: Topology, port: int, argv: list[str], *, mptcp: bool,
           duration_s: float) -> IperfRun:
    """Downlink (server -> client) goodput of one iperf3 run against a server of its own.

    The server serves this one test (-1) on a port no other run uses, and listens before the
    client connects: a server shared by consecutive runs is still finishing one test when the
    next client arrives, and that client gets "unable to receive control message: Connection
    reset by peer" or "the server is busy running a test".

    The first second (slow start) is run but not counted. It is dropped from the receiver's
    one-second intervals rather than with iperf3's --omit, whose totals in reverse mode
    (iperf3 3.12) come out above what the link can carry."""
    wrap = MPTCP_WRAP if mptcp else None
    server = topo.popen("server", ["iperf3", "-s", "-1", "-p", str(port)], wrap=wrap,
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        topo.wait_listening("server", port, server=server)
        proc = topo.run("client", ["iperf3", "-c", topo.server_addr, "-p", str(port), "-R",
                                   "-J", "-t", f"{duration_s + WARMUP_S:g}", *argv],
                        wrap=wrap, capture_output=True, text=True, timeout=duration_s + 30)
    finally:
        served = server.poll() is not None  # -1: it ends by itself once the test is over
        if not served:
            server.terminate()
        _, server_err = server.communicate(timeout=10)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        result = {}
    intervals = [i["sum"] for i in result.get("intervals", [])]
    counted = [i for i in intervals if i["start"] >= WARMUP_S - 0.01]
    seconds = sum(i["seconds"] for i in counted)
    if proc.returncode == 0 and seconds > 0:
        return IperfRun(sum(i["bytes"] for i in counted) * 8 / seconds)
    said = [result.get("error") or _first_line(proc.stderr) or
            f"exit {proc.returncode}, no interval after the first second"]
    if served and server_err.strip():
        said.append(f"server: {_first_line(server_err)}")
    return IperfRun(None, "; ".join(said))


def _first_line(text: str) -> str:
    """iperf3 says what went wrong in one line (a usage text follows a bad option)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _throughput_measurements(topo: Topology, profile: Profile,
                             duration_s: float) -> list[Measurement]:
    out = []
    for path in topo.paths:
        chain = _chain(profile, path.index, "downlink")
        down = chain[0]
        run = _iperf(topo, IPERF_PORT + path.index,
                     ["-B", path.client_addr, "-P", str(PATH_STREAMS)], mptcp=False,
                     duration_s=duration_s)
        label = f"{path.index} {path.name}"
        mbit = None if run.bps is None else round(run.bps / 1e6, 2)
        fixed = _fixed_rate_bps(chain)
        if fixed:
            rate = fixed / 1e6
            out.append(Measurement("TCP rate", label, "Mbit/s", rate, mbit,
                                   round(RATE_LOW * rate, 2), round(RATE_HIGH * rate, 2),
                                   run.note()))
        elif down.trace:
            mean = trace_mean_bps(down.trace) / 1e6
            note = f"trace {down.trace.name}: configured = its mean"
            out.append(Measurement("TCP rate", label, "Mbit/s", round(mean, 2), mbit,
                                   note=run.note(note)))
        else:
            note = "lossy link: TCP cannot reach the rate" if _loss(chain) else "unlimited rate"
            shown = down.rate_bps / 1e6 if down.rate_bps else None
            out.append(Measurement("TCP rate", label, "Mbit/s", shown, mbit,
                                   note=run.note(note)))
    return out


def _aggregate_measurements(topo: Topology, profile: Profile,
                            duration_s: float) -> list[Measurement]:
    mptcp = profile.mode == "mptcp"
    before = topo.path_bytes()
    run = _iperf(topo, IPERF_PORT + len(topo.paths), [], mptcp=mptcp, duration_s=duration_s)
    after = topo.path_bytes()
    carried = [a["rx_bytes"] - b["rx_bytes"] for a, b in zip(after, before, strict=True)]
    total = sum(carried) or 1
    used = [i for i, p in enumerate(profile.paths) if not p.backup or not mptcp]
    if not mptcp:
        used = [profile.tcp_path]
    fixed_rates = [_fixed_rate_bps([profile.link(i, "downlink")]) for i in used]
    own = [r for r in fixed_rates if r is not None]
    server = profile.server_link_model("downlink")
    label = "MPTCP aggregate" if mptcp else f"TCP over path {profile.tcp_path}"
    mbit = None if run.bps is None else round(run.bps / 1e6, 2)
    out = []
    if len(own) == len(used) and all(own) and (
            server is None or not (server.trace or server.loss)):
        # The paths add up, up to what the shared server link carries.
        rate = min(sum(own), (server and server.rate_bps) or math.inf) / 1e6
        out.append(Measurement("aggregate", label, "Mbit/s", rate, mbit,
                               round(AGGREGATE_LOW * rate, 2), round(RATE_HIGH * rate, 2),
                               run.note()))
    else:
        out.append(Measurement("aggregate", label, "Mbit/s", None, mbit,
                               note=run.note("lossy or trace-driven paths: shown, not judged")))
    for path in topo.paths:
        share = carried[path.index] / total
        expected_used = path.index in used
        low, high = (SUBFLOW_SHARE, None) if expected_used else (None, SUBFLOW_SHARE)
        if mptcp and not expected_used:
            low = high = None  # a backup path may carry retransmissions; shown only
        out.append(Measurement("byte share", f"{path.index} {path.name}", "%",
                               None, round(100 * share, 1),
                               None if low is None else 100 * low,
                               None if high is None else 100 * high,
                               "carries data" if expected_used else "should stay idle"))
    return out


# The steps run_check reports through `step`, for a progress bar.
CHECK_STEPS = 5


def run_check(profile: Profile, *, name: str, duration_s: float = 3.0,
              step: Callable[[str], None] = lambda _: None) -> CheckReport:
    """Builds `profile` as topology `name`, measures, tears down; `step(text)` is told as each
    of the CHECK_STEPS steps begins."""
    require_tools("iperf3", "ping", "ss", "mptcpize")
    if duration_s < 1:
        raise UserError("--duration: throughput runs need at least 1 second")
    started = time.monotonic()
    report = CheckReport(profile.name, profile.mode)
    step(f"bringing up {len(profile.paths)} path(s)")
    with Topology.up(profile, name) as topo:
        # Measurements see the configured links, not the profile's timed events.
        step("RTT and loss per path (ping)")
        report.measurements += _ping_measurements(topo, profile)
        step("throughput per path (iperf3)")
        report.measurements += _throughput_measurements(topo, profile, duration_s)
        step("the MPTCP aggregate (iperf3)")
        report.measurements += _aggregate_measurements(topo, profile, duration_s)
        step("tearing down")
    report.seconds = time.monotonic() - started
    return report


def print_report(report: CheckReport, console: Console) -> None:
    table = Table(title=f"netem check {report.profile} ({report.mode})")
    for column in ("check", "path", "configured", "measured", "accepted", "result", "note"):
        table.add_column(column)
    for m in report.measurements:
        accepted = ""
        if m.judged:
            low = "" if m.low is None else f"{m.low:g}"
            high = "" if m.high is None else f"{m.high:g}"
            accepted = f"{low}..{high}"
        result = ("[green]ok[/]" if m.ok else "[bold red]OFF[/]") if m.judged else "[dim]info[/]"
        table.add_row(m.check, m.path,
                      "" if m.configured is None else f"{m.configured:g} {m.unit}",
                      "failed" if m.measured is None else f"{m.measured:g} {m.unit}",
                      accepted, result, m.note)
    console.print(table)
    verdict = "[green]all within tolerance[/]" if report.ok else \
        f"[bold red]{len(report.failures())} figure(s) off[/]"
    console.print(f"{verdict} ({report.seconds:.0f} s)")
