"""Who loses packets at a shared bottleneck, and whether bursts take the losses: the figures of
docs/coupled-cc.md's queue section, from a bulk run made with `--pcap`.

    .venv/bin/python scripts/burst_losses.py RUN_DIR [--gap-us 200] [--burst 3]
        [--summary docs/data/NAME.json]

For each trial, from the server's capture (trials/<key>/pcap/server-eth0.pcap.gz, taken before
the emulated links, so every packet the server sent is in it, lost or not): per class of flow
(the MPTCP user's subflows, the TCP user's connection), the data segments sent, the part of them
sent again (a sequence number seen twice: lost at the bottleneck), the part of the segments that
left in a burst (at least --burst segments of one flow with less than --gap-us between them), and
the part of the losses whose first sending was in such a burst. A capture on a veth device sees
segmentation-offload packets of several segments; each counts as its payload in segments.
`--summary` also writes these figures as a summary the docs cite (scripts/docsfigures.py): per
condition each figure over the trials and each trial's own, with the run's provenance.
"""

from __future__ import annotations

import argparse
import gzip
import struct
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mpstream.errors import UserError
from mpstream.runner.layout import load_trials
from mpstream.runner.report.summary import write_analysis

MSS = 1428  # a segment of the emulated paths' 1500-byte MTU with MPTCP's options, about
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101


@dataclass(frozen=True)
class Segment:
    t: float
    flow: tuple[str, int, str, int]  # source address and port, destination address and port
    seq: int
    payload: int


def read_pcap(path: Path) -> Iterator[Segment]:
    """The IPv4 TCP packets of a (gzip) pcap file, Ethernet or raw IP."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        data = fh.read()
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        order = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        order = ">"
    else:
        raise ValueError(f"{path}: not a pcap file (pcapng is not read here)")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    (linktype,) = struct.unpack(order + "I", data[20:24])
    link_header = {LINKTYPE_ETHERNET: 14, LINKTYPE_RAW: 0}.get(linktype)
    if link_header is None:
        raise ValueError(f"{path}: link type {linktype} is not read here")
    off = 24
    while off + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack(order + "IIII", data[off:off + 16])
        pkt = data[off + 16 + link_header:off + 16 + caplen]
        off += 16 + caplen
        if len(pkt) < 40 or pkt[0] >> 4 != 4 or pkt[9] != 6:
            continue
        ihl = (pkt[0] & 15) * 4
        (total,) = struct.unpack(">H", pkt[2:4])
        tcp = pkt[ihl:]
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        flow = (".".join(map(str, pkt[12:16])), sport, ".".join(map(str, pkt[16:20])), dport)
        yield Segment(sec + frac / (1e9 if nano else 1e6), flow, seq,
                      total - ihl - (tcp[12] >> 4) * 4)


@dataclass
class FlowFigures:
    segments: int = 0
    lost: int = 0
    in_bursts: int = 0
    lost_in_bursts: int = 0

    def add(self, other: FlowFigures) -> None:
        self.segments += other.segments
        self.lost += other.lost
        self.in_bursts += other.in_bursts
        self.lost_in_bursts += other.lost_in_bursts


def flow_figures(sent: list[Segment], gap_s: float, burst: int) -> FlowFigures:
    """One flow's data packets in the order sent: its segments, losses and bursts."""
    run_of: list[int] = []  # each packet's run (packets less than gap_s apart)
    run_segments: list[int] = []
    last = None
    for s in sent:
        if last is None or s.t - last >= gap_s:
            run_segments.append(0)
        run_segments[-1] += max(1, round(s.payload / MSS))
        run_of.append(len(run_segments) - 1)
        last = s.t
    out = FlowFigures()
    first: dict[int, int] = {}
    for i, s in enumerate(sent):
        if s.seq in first:
            out.lost += 1
            out.lost_in_bursts += run_segments[run_of[first[s.seq]]] >= burst
            continue
        first[s.seq] = i
        n = max(1, round(s.payload / MSS))
        out.segments += n
        if run_segments[run_of[i]] >= burst:
            out.in_bursts += n
    return out


def trial_figures(pcap: Path, mptcp_port: int, tcp_ports: set[int], gap_s: float,
                  burst: int) -> dict[str, FlowFigures]:
    """class (mptcp, tcp) -> the figures of its flows from the server's port."""
    sent: dict[tuple, list[Segment]] = defaultdict(list)
    for s in read_pcap(pcap):
        if s.payload > 0 and (s.flow[1] == mptcp_port or s.flow[1] in tcp_ports):
            sent[s.flow].append(s)
    out = {"mptcp": FlowFigures(), "tcp": FlowFigures()}
    for flow, packets in sent.items():
        out["mptcp" if flow[1] == mptcp_port else "tcp"].add(
            flow_figures(packets, gap_s, burst))
    return out


def _ratio(a: int, b: int) -> float:
    return a / b if b else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--gap-us", type=float, default=200.0)
    ap.add_argument("--burst", type=int, default=3)
    ap.add_argument("--summary", type=Path, help="also write the figures as a summary")
    a = ap.parse_args()
    rows: dict[str, list[dict]] = {}
    print("trial | loss per segment: MPTCP, TCP, ratio | segments in bursts: MPTCP, TCP "
          "| losses in bursts: MPTCP, TCP")
    for t in sorted(load_trials(a.run_dir), key=lambda t: (t.condition, t.key)):
        pcap = t.dir / "pcap" / "server-eth0.pcap.gz"
        if not t.ok or not pcap.is_file():
            continue
        # iperf3's server ports: the client's, then each competitor's (mpstream's bulk trials).
        mp_port = int(t.iperf["start"]["connecting_to"]["port"]) if t.iperf else 5211
        tcp_ports = {int(c["start"]["connecting_to"]["port"])
                     for c in (t.competitor_iperf(u.host) for u in t.record.competitors) if c}
        f = trial_figures(pcap, mp_port, tcp_ports, a.gap_us / 1e6, a.burst)
        m, c = f["mptcp"], f["tcp"]
        lm, lc = _ratio(m.lost, m.segments), _ratio(c.lost, c.segments)
        times = lm / lc if lc else float("nan")
        print(f"{t.key} | {lm:.4f} {lc:.4f} {times:.1f}"
              f" | {_ratio(m.in_bursts, m.segments):.3f} {_ratio(c.in_bursts, c.segments):.3f}"
              f" | {_ratio(m.lost_in_bursts, m.lost):.2f} {_ratio(c.lost_in_bursts, c.lost):.2f}")
        rows.setdefault(t.condition, []).append({
            "key": t.key, "mptcp_loss_per_segment": lm, "tcp_loss_per_segment": lc,
            "loss_vs_tcp": times, "mptcp_in_bursts": _ratio(m.in_bursts, m.segments),
            "tcp_in_bursts": _ratio(c.in_bursts, c.segments),
            "mptcp_lost_in_bursts": _ratio(m.lost_in_bursts, m.lost),
            "tcp_lost_in_bursts": _ratio(c.lost_in_bursts, c.lost)})
    if a.summary:
        try:
            out = write_analysis(a.run_dir, sys.argv, rows, {}, {}, a.summary)
        except UserError as e:
            raise SystemExit(str(e)) from e
        print(f"summary: {out}")


if __name__ == "__main__":
    main()
