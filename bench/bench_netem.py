"""How exactly the emulated paths behave as configured, and what the emulator costs.

Run as root:  .venv/bin/python bench/bench_netem.py [--quick] [--only delay,rate,...]

Every figure comes from real traffic through `mpstream.netem.topology.Topology` (namespaces,
build/mpstream-linkem on TUN devices): ping for delay, iperf3 for rate, a saturating UDP flow
over a Mahimahi trace, MPTCP over two paths, and the emulators' CPU time from /proc/<pid>/stat.
The machine may be shared: timings are noisy, so each figure states what it measured.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mpstream.netem import traces
from mpstream.netem.profile import load_profile, profile_from_dict
from mpstream.netem.topology import Topology
from mpstream.proc import signals_interrupt
from mpstream.transports.base import get_transport

MPTCP_WRAP = get_transport("mptcp").wrap

TCP_PAYLOAD_SHARE = 1448 / 1500  # TCP goodput per wire byte (IPv4 + TCP with timestamps)
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Linux socket options the socket module does not export
SO_TIMESTAMPNS = 35
SO_TIMESTAMPING = 37
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_TX_SCHED = 1 << 8
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11


def topology(paths: list[dict[str, Any]], *, mode: str = "tcp", name: str,
             emulate: bool = True) -> Topology:
    profile = profile_from_dict({"mode": mode, "paths": paths}, name=name)
    return Topology.up(profile, f"bn{os.getpid()}{name}", emulate=emulate)


def ping(topo: Topology, path: int, count: int, interval: float = 0.01) -> list[float]:
    """RTTs in ms of ICMP echoes over one path, to the microsecond (ping prints only three
    significant digits, which is 1 ms at 100 ms). The probe runs in the client namespace."""
    r = topo.run("client", [sys.executable, __file__, "--probe", topo.paths[path].client_addr,
                            topo.server_addr, str(count), str(interval)],
                 capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def icmp_probe(src: str, dst: str, count: int, interval: float) -> list[float]:
    """Echo requests every `interval` s. Both ends of each RTT are kernel timestamps: when the
    request entered the device layer (SO_TIMESTAMPING, TX_SCHED) and when the reply arrived
    (SO_TIMESTAMPNS), so a busy machine delaying this process does not inflate the figures."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sock.bind((src, 0))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING,
                    SOF_TIMESTAMPING_TX_SCHED | SOF_TIMESTAMPING_SOFTWARE
                    | SOF_TIMESTAMPING_OPT_TSONLY)
    ident = os.getpid() & 0xFFFF
    sent: dict[int, int] = {}
    rtts: dict[int, float] = {}

    def stamp(anc: list, kind: int) -> int | None:
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == kind:
                sec, nsec = struct.unpack("qq", data[:16])
                return sec * 1_000_000_000 + nsec
        return None

    def receive_until(deadline: float) -> None:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                data, anc, _, _ = sock.recvmsg(2048, 256)
            except TimeoutError:
                return
            icmp = data[(data[0] & 0x0F) * 4:]
            kind, _, _, rid, seq = struct.unpack("!BBHHH", icmp[:8])
            received = stamp(anc, SO_TIMESTAMPNS)
            if kind == 0 and rid == ident and seq in sent and received:
                rtts[seq] = (received - sent[seq]) / 1e6

    start = time.monotonic()
    for seq in range(count):
        body = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + bytes(56)
        checksum = sum(struct.unpack(f"!{len(body) // 2}H", body))
        checksum = (checksum >> 16) + (checksum & 0xFFFF)
        checksum = ~(checksum + (checksum >> 16)) & 0xFFFF
        body = body[:2] + struct.pack("!H", checksum) + body[4:]
        sent[seq] = time.time_ns()  # replaced by the kernel's stamp just below
        sock.sendto(body, (dst, 0))
        # The TX stamp is made in sendto's own context, so it is queued by now.
        try:
            _, anc, _, _ = sock.recvmsg(64, 256, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            sent[seq] = stamp(anc, SO_TIMESTAMPING) or sent[seq]
        except BlockingIOError:
            pass
        receive_until(start + (seq + 1) * interval)
    receive_until(time.monotonic() + 1.0)
    return [rtts[seq] for seq in sorted(rtts)]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


def iperf(topo: Topology, args: list[str], *, seconds: float, mptcp: bool = False,
          port: int = 5201) -> subprocess.Popen:
    """Starts an iperf3 client (after its server); returns the client process (JSON on stdout)."""
    wrap = MPTCP_WRAP if mptcp else None
    server = topo.popen("server", ["iperf3", "-s", "-1", "-p", str(port)], wrap=wrap,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    del server  # it exits after one test; teardown stops it otherwise
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        ss = topo.run("server", ["ss", "-ltnH", f"sport = :{port}"], capture_output=True,
                      text=True).stdout
        if ss.strip():
            break
        time.sleep(0.02)
    return topo.popen("client", ["iperf3", "-c", topo.server_addr, "-p", str(port), "-J",
                                 "-t", str(seconds), *args], wrap=wrap,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def iperf_result(proc: subprocess.Popen) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    try:
        return json.loads(out)
    except ValueError:
        raise RuntimeError(f"iperf3 failed: {err or out}") from None


def goodput(result: dict[str, Any]) -> float:
    """Receiver goodput in bit/s over the measured (not omitted) intervals. The end summary
    divides by the sender's duration, so what a full queue delivers after the sender stopped
    inflates it on slow links with deep queues."""
    intervals = [iv["sum"] for iv in result["intervals"] if not iv["sum"].get("omitted")]
    return sum(iv["bytes"] for iv in intervals) * 8 / sum(iv["seconds"] for iv in intervals)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


# ---- the figures -------------------------------------------------------------------------------


def bench_delay(quick: bool) -> None:
    print("\n## Delay: ping RTT against configured RTT (idle path, then with a bulk TCP flow "
          "saturating the other path)")
    print(f"{'RTT ms':>7} {'load':>6} {'n':>5} {'min':>8} {'p50':>8} {'p99':>8} "
          f"{'p99-cfg':>8}  within 1 ms")
    count = 150 if quick else 400
    for rtt in (1, 10, 50, 100):
        one_way = rtt / 2
        link = {"rate": 50_000_000, "delay_ms": one_way}
        with topology([link, link], name=f"d{rtt}") as topo:
            for load in ("idle", "bulk"):
                bulk = None
                if load == "bulk":
                    bulk = iperf(topo, ["-B", topo.paths[1].client_addr, "-R"],
                                 seconds=count * 0.01 + 4)
                    time.sleep(2)  # past slow start: the queue of path 1 is full
                rtts = ping(topo, 0, count)
                if bulk is not None:
                    got = goodput(iperf_result(bulk))
                    load = f"{got / 1e6:.0f}M"
                p99 = pct(rtts, 99)
                print(f"{rtt:>7} {load:>6} {len(rtts):>5} {min(rtts):>8.3f} "
                      f"{pct(rtts, 50):>8.3f} {p99:>8.3f} {p99 - rtt:>+8.3f}  "
                      f"{'yes' if abs(p99 - rtt) <= 1 and len(rtts) == count else 'NO'}")


def bench_added_delay(quick: bool) -> None:
    print("\n## Added delay at zero configured delay (unlimited rate): the emulator's own cost "
          "per round trip (two traversals), against the same topology without the emulator")
    count = 200 if quick else 500
    results = {}
    for emulate in (False, True):
        with topology([{"delay_ms": 0}], name=f"z{int(emulate)}", emulate=emulate) as topo:
            ping(topo, 0, 20)
            results[emulate] = ping(topo, 0, count)
    for emulate, rtts in results.items():
        label = "emulator" if emulate else "plain veth"
        print(f"{label:>11}: RTT p50 {pct(rtts, 50) * 1000:7.1f} us, p99 "
              f"{pct(rtts, 99) * 1000:7.1f} us (n={len(rtts)})")
    added = pct(results[True], 50) - pct(results[False], 50)
    print(f"added per round trip: {added * 1000:.1f} us at the median "
          f"({added * 500:.1f} us per traversal)")


def bench_rate(quick: bool) -> None:
    print("\n## Rate: one TCP (cubic) flow, downlink, default queue (one BDP, at least 20 ms "
          "and 32 packets); 'median 1 s' is the median one-second interval, which a sender the "
          "busy machine starved for a moment does not pull down")
    print(f"{'rate':>10} {'RTT':>6} {'goodput':>10} {'goodput/rate':>13} {'wire/rate':>10} "
          f"{'median 1 s':>11} {'q drops':>8}  >= 93%")
    seconds = 6 if quick else 12
    cases = [(1, 10), (10, 10), (50, 10), (100, 10)]
    if not quick:
        cases += [(1, 100), (10, 100), (100, 100)]
    for mbit, rtt in cases:
        rate = mbit * 1_000_000
        topo = topology([{"rate": rate, "delay_ms": rtt / 2}], name=f"r{mbit}")
        try:
            res = iperf_result(iperf(topo, ["-R", "-O", "3"], seconds=seconds))
        finally:
            stats = topo.down()
        got = goodput(res)
        wire = got / TCP_PAYLOAD_SHARE
        median = statistics.median(iv["sum"]["bits_per_second"] for iv in res["intervals"]
                                   if not iv["sum"].get("omitted"))
        drops = stats["path0"]["b_to_a"]["dropped_queue_packets"]
        verdict = "yes" if got / rate >= 0.93 else f"wire {'yes' if wire / rate >= 0.93 else 'NO'}"
        print(f"{mbit:>6} Mbit {rtt:>3} ms {got / 1e6:>8.2f} M {got / rate:>12.1%} "
              f"{wire / rate:>10.1%} {median / rate:>11.1%} {drops:>8}  {verdict}")


def bench_queue(quick: bool) -> None:
    print("\n## Why the default queue is one BDP: one TCP (cubic) flow at 50 Mbit/s, 50 ms RTT, "
          "against the drop-tail queue size")
    print(f"{'queue':>12} {'bytes':>9} {'goodput/rate':>13}")
    seconds = 8 if quick else 15
    rate, rtt = 50_000_000, 50
    bdp = rate // 8 * rtt // 1000
    for label, size in (("0.1 BDP", bdp // 10), ("0.25 BDP", bdp // 4), ("0.5 BDP", bdp // 2),
                        ("default", None)):
        link = {"rate": rate, "delay_ms": rtt / 2}
        if size is not None:
            link["queue_bytes"] = size
        with topology([link], name="q") as topo:
            res = iperf_result(iperf(topo, ["-R", "-O", "3"], seconds=seconds))
        got = goodput(res)
        print(f"{label:>12} {size if size is not None else bdp:>9} {got / rate:>13.1%}")


def trace_capacity_per_second(trace: Path, offset_s: float, bins: int) -> list[float]:
    ms = [int(line) for line in trace.read_text().split()]
    period = ms[-1]
    counts: collections.Counter[int] = collections.Counter()
    # opportunities in [offset, offset + bins) seconds, the trace wrapping around
    for rep in range(int((offset_s + bins) * 1000 // period) + 2):
        for m in ms:
            t = (rep * period + m) / 1000 - offset_s
            if 0 <= t < bins:
                counts[int(t)] += 1
    return [counts[k] * 1500 * 8 for k in range(bins)]


def bench_trace(quick: bool) -> None:
    # The published Verizon LTE trace where it was fetched (`mpstream traces fetch
    # Verizon-LTE-short`), otherwise a made-up one of the same mean.
    trace = traces.find("Verizon-LTE-short", "down")
    if trace is None:
        trace = traces.write(Path(tempfile.mkdtemp()) / "synthetic-5mbit.down",
                             traces.synthetic(5e6, 60, seed=1))
    name = trace.name
    seconds = 20 if quick else 40
    print(f"\n## Trace: saturating UDP flow (25 Mbit/s offered, downlink) over {name}; "
          "delivered bits per 1 s bin against the trace's capacity")
    link = {"delay_ms": 10, "uplink": {"rate": 10_000_000},
            "downlink": {"trace": str(trace), "queue_packets": 400}}
    with topology([link], name="t") as topo:
        topo.start_events()  # the trace restarts from its first opportunity now
        t_events = time.monotonic()
        client = iperf(topo, ["-R", "-u", "-b", "25M", "-l", "1400"], seconds=seconds)
        # iperf3's first interval starts about when its client starts (plus one handshake)
        offset = time.monotonic() - t_events
        res = iperf_result(client)
    delivered = [iv["sum"]["bytes"] * 8 * 1428 / 1400 for iv in res["intervals"]][:seconds]
    cap = trace_capacity_per_second(trace, offset, len(delivered))
    aligned = statistics.correlation(delivered, cap)
    best = max((statistics.correlation(
        delivered, trace_capacity_per_second(trace, offset + k / 20, len(delivered))),
        offset + k / 20) for k in range(-10, 11))
    print(f"bins: {len(delivered)}; mean delivered {statistics.mean(delivered) / 1e6:.2f} "
          f"Mbit/s on the wire, mean capacity {statistics.mean(cap) / 1e6:.2f} Mbit/s")
    print(f"correlation at the measured start offset ({offset:.3f} s): {aligned:.3f}  "
          f"{'>= 0.9 yes' if aligned >= 0.9 else 'NO'}; best within +-0.5 s: {best[0]:.3f} "
          f"at {best[1]:.2f} s")


def bench_mptcp(quick: bool) -> None:
    print("\n## MPTCP aggregate: one iperf3 flow under mptcpize, downlink, over the presets")
    print(f"{'preset':>28} {'sum of rates':>13} {'goodput':>9} {'share':>7} {'target':>7}")
    seconds = 8 if quick else 15
    for preset, target in (("thesis-bandwidth-balanced", 0.90),
                           ("thesis-bandwidth-unbalanced", 0.85),
                           ("np03-2x10", 0.90)):
        profile = load_profile(preset)
        with Topology.up(profile, f"bn{os.getpid()}m") as topo:
            res = iperf_result(iperf(topo, ["-R", "-O", "3"], seconds=seconds, mptcp=True))
        total = sum(profile.link(i, "downlink").rate_bps for i in range(len(profile.paths)))
        got = goodput(res)
        print(f"{preset:>28} {total / 1e6:>9.0f} M {got / 1e6:>7.2f} M {got / total:>7.1%} "
              f"{target:>6.0%} {'yes' if got / total >= target else 'NO'}")


def bench_cpu(quick: bool) -> None:
    print("\n## Emulator CPU at 2 x 100 Mbit/s: two TCP flows (one per path), from "
          "/proc/<pid>/stat of both emulators")
    seconds = 8 if quick else 15
    link = {"rate": 100_000_000, "delay_ms": 5}
    with topology([link, link], name="c") as topo:
        flows = [iperf(topo, ["-R", "-B", p.client_addr], seconds=seconds + 2, port=5201 + i)
                 for i, p in enumerate(topo.paths)]
        time.sleep(1.5)
        before = [cpu_seconds(pid) for pid in topo.emulator_pids]
        t0 = time.monotonic()
        time.sleep(seconds)
        after = [cpu_seconds(pid) for pid in topo.emulator_pids]
        elapsed = time.monotonic() - t0
        got = [goodput(iperf_result(f)) for f in flows]
    user = sum(a[0] - b[0] for a, b in zip(after, before, strict=True)) / elapsed
    system = sum(a[1] - b[1] for a, b in zip(after, before, strict=True)) / elapsed
    print(f"throughput: {' + '.join(f'{g / 1e6:.1f}' for g in got)} Mbit/s goodput over "
          f"{elapsed:.1f} s")
    print(f"emulator CPU, both paths together: {user + system:.1%} of one core "
          f"({(user + system) / 2:.1%} per path); user {user:.1%}, system {system:.1%} "
          "(system time includes the kernel's forwarding and the receiving host's stack, which "
          "a TUN write runs in the writer's context)")


BENCHES = {"delay": bench_delay, "added": bench_added_delay, "rate": bench_rate,
           "queue": bench_queue,
           "trace": bench_trace, "mptcp": bench_mptcp, "cpu": bench_cpu}


def main() -> int:
    if len(sys.argv) == 6 and sys.argv[1] == "--probe":  # run by ping() inside a namespace
        src, dst, count, interval = sys.argv[2:]
        print(json.dumps(icmp_probe(src, dst, int(count), float(interval))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated subset")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_netem: needs root (network namespaces); skipped")
        return 0
    print(f"# bench_netem ({'quick' if args.quick else 'full'}); load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name in args.only.split(","):
        BENCHES[name](args.quick)
    return 0


if __name__ == "__main__":
    # SIGTERM (a timeout, a scheduler) tears down what the benchmark built, as Ctrl-C does.
    with signals_interrupt(signal.SIGTERM, signal.SIGHUP):
        sys.exit(main())
