"""Per-trial figures computed from a trial's raw data: its workload's own (runner/workloads/),
and what every trial has, whatever its workload: the kernel samples per path, the emulator's
links, the metered paths, the transport's redundant bytes, how the users of one network shared
it."""

from __future__ import annotations

import math
from collections import defaultdict

from mpstream.qoe.metrics import video_segment_rates as segment_rates
from mpstream.runner.layout import TrialData
from mpstream.runner.metrics.metric import Metric, declare
from mpstream.runner.workloads import workload_for
from mpstream.transports.base import TRANSPORTS, get_transport

BIN_S = 1.0
__all__ = ["segment_rates", "trial_metrics"]


def num_or_nan(v) -> float:
    return float(v) if v is not None else math.nan


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


CROSS_TRAFFIC = declare(Metric("cross_traffic_mbps", "cross traffic while it ran", "Mbit/s"))


def cross_traffic_metrics(rec: TrialData) -> dict[str, float]:
    """What the cross traffic (competitors' scheduled bulk downloads) carried, summed over
    them, each at its own mean rate while it ran."""
    cross = [received_bps(rec.competitor_iperf(u.host)) for u in rec.record.competitors
             if u.cross_traffic]
    return {"cross_traffic_mbps": sum(cross) / 1e6} if cross else {}


def received_bps(report: dict | None) -> float:
    """What an iperf3 client received, in bit/s over its figures' span (NaN: no figure)."""
    bps = (report or {}).get("end", {}).get("sum_received", {}).get("bits_per_second")
    return float(bps) if bps is not None else math.nan


def user_rates(rec: TrialData) -> list[tuple[bool, float]]:
    """(speaks MPTCP, received bit/s) of every user of a trial's network: the client, then
    each competing client that did what it did (cross traffic is no user here)."""
    rates = [(client_speaks_mptcp(rec), received_bps(rec.iperf))]
    rates += [(speaks_mptcp(u.transport), received_bps(rec.competitor_iperf(u.host)))
              for u in rec.record.competitors if not u.cross_traffic]
    return rates


def client_speaks_mptcp(rec: TrialData) -> bool:
    return speaks_mptcp(rec.record.transport)


def speaks_mptcp(transport: str | None) -> bool:
    """Whether a user of transport `transport` is in the MPTCP class of the fairness figures
    (the kernel's MPTCP at both ends); every other transport is in the other class."""
    return (transport is not None and transport in TRANSPORTS
            and get_transport(transport).kernel_mptcp)


def jain_index(rates: list[float]) -> float:
    """Jain's fairness index, (Σx)² / (n·Σx²): 1 when all users get the same, 1/n when one
    gets everything."""
    squares = sum(x * x for x in rates)
    return sum(rates) ** 2 / (len(rates) * squares) if rates and squares else math.nan


FAIRNESS = declare(
    Metric("mptcp_share", "MPTCP users' share of what all users received"),
    Metric("jain_index", "Jain's fairness index over what each user received"),
    Metric("mptcp_user_mbps", "throughput per MPTCP user", "Mbit/s"),
    Metric("tcp_user_mbps", "throughput per TCP user", "Mbit/s"),
)


def fairness_metrics(rates: list[tuple[bool, float]]) -> dict[str, float]:
    """How the users of one network shared it, from (speaks MPTCP, what it received) per user:
    the MPTCP users' share of everything they all received, Jain's index over the users, and
    each class's mean per user (in Mbit/s, for rates in bit/s)."""
    if any(math.isnan(bps) for _, bps in rates):
        return {}  # a user without a figure: no share can be told
    total = sum(bps for _, bps in rates)
    mptcp = [bps for multipath, bps in rates if multipath]
    tcp = [bps for multipath, bps in rates if not multipath]
    return {
        "mptcp_share": sum(mptcp) / total if mptcp and total else math.nan,
        "jain_index": jain_index([bps for _, bps in rates]),
        "mptcp_user_mbps": sum(mptcp) / len(mptcp) / 1e6 if mptcp else math.nan,
        "tcp_user_mbps": sum(tcp) / len(tcp) / 1e6 if tcp else math.nan,
    }


def socket_increments(rows: list[dict], column: str) -> list[tuple[float, int | None, int]]:
    """(t_s, path, increase of `column` since the socket's previous sample) for every row.

    A socket is one (local, peer) pair; its first sample counts from zero (the samplers start
    before any connection of the trial opens). A counter never decreases, so a drop means a new
    socket reused the address pair: its value counts from zero again.
    """
    last: dict[tuple[str, str], int] = {}
    out = []
    for r in sorted(rows, key=lambda r: r["t_s"]):
        key = (r["local"], r["peer"])
        v = r[column]
        prev = last.get(key, 0)
        inc = v - prev if v >= prev else v
        last[key] = v
        if inc:
            out.append((r["t_s"], r["path"], inc))
    return out


def binned_by_path(
    rows: list[dict], column: str, bin_s: float = BIN_S
) -> dict[int, dict[int, float]]:
    """path -> {bin index -> sum of increments of `column` in that bin}; unknown paths dropped."""
    out: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for t, path, inc in socket_increments(rows, column):
        if path is None:
            continue
        out[path][int(t // bin_s)] += inc
    return {p: dict(b) for p, b in out.items()}


def sample_span_s(rows: list[dict]) -> float:
    ts = [r["t_s"] for r in rows]
    return (max(ts) - min(ts)) if len(ts) > 1 else math.nan


def data_weighted_rtt_ms(rows: list[dict], path: int) -> float:
    """The sender's smoothed RTT on `path`, each poll weighted by the bytes its socket sent since
    its previous poll: the RTT the path's data saw. An idle socket keeps the last RTT it
    measured (at its handshake, or under delayed ACKs), and counted alike it would stand for
    the path as much as one carrying data: iperf3's control connection has a subflow on each
    path beside the data's, and pulled the plain mean about halfway back to the base RTT (64
    instead of 94.6 ms at the MPCC sweep's 1 MB buffer with cubic)."""
    weighted = sent_total = 0.0
    for r, sent in sending_polls(rows, path):
        if r["rtt_ms"] is None:
            continue
        weighted += r["rtt_ms"] * sent
        sent_total += sent
    return weighted / sent_total if sent_total else math.nan


def sending_polls(rows: list[dict], path: int) -> list[tuple[dict, int]]:
    """(poll, bytes sent since the socket's previous poll) for each established socket's poll
    on `path` that found it sending: what its window and RTT were while it carried data."""
    before: dict[tuple, int] = {}
    out = []
    for r in rows:
        if r["path"] != path or r["state"] != "ESTAB":
            continue
        sock = (r["local"], r["peer"])
        sent = r["bytes_sent"] or 0
        last = before.get(sock)
        before[sock] = sent
        if last is not None and sent > last:
            out.append((r, sent - last))
    return out


KERNEL = declare(
    Metric("retrans_per_s", "retransmissions", "packets/s"),
    Metric("bytes_share", "share of bytes", per_path=True),
    Metric("mbytes", "bytes received", "MB", per_path=True),
    Metric("retrans_per_s", "retransmissions", "packets/s", per_path=True),
    Metric("rtt_ms", "sender's smoothed RTT", "ms", per_path=True),
    Metric("link_drop_share", "share of packets the link dropped, data direction",
           per_path=True),
    *[Metric(f"queue_delay_{q}_ms", f"queueing delay in the emulator, data direction, {q}",
             "ms", per_path=True) for q in ("p50", "p95", "p99")],
)


def kernel_metrics(rec: TrialData, n_paths: int) -> dict[str, float]:
    """Per-path bytes share (client side, received), retransmissions per second (sender side),
    and the sender's smoothed RTT per path (weighted by the bytes sent)."""
    m: dict[str, float] = {}
    sender = rec.sender_samples
    recv = binned_by_path(rec.path_samples("client"), rec.receiver_column)
    total = sum(sum(b.values()) for b in recv.values())
    retr = binned_by_path(sender, "retrans_total")
    span = sample_span_s(sender)
    for p in range(n_paths):
        got = sum(recv.get(p, {}).values())
        m[f"path{p}_bytes_share"] = got / total if total else math.nan
        m[f"path{p}_mbytes"] = got / 1e6
        m[f"path{p}_retrans_per_s"] = (
            sum(retr.get(p, {}).values()) / span if span and not math.isnan(span) else math.nan
        )
        m[f"path{p}_rtt_ms"] = data_weighted_rtt_ms(sender, p)
        drops = link_drop_share(rec, p)
        if drops is not None:
            m[f"path{p}_link_drop_share"] = drops
        m.update(queue_delay_metrics(rec, p))
    m["retrans_per_s"] = (
        sum(sum(b.values()) for b in retr.values()) / span if span and not math.isnan(span)
        else math.nan
    )
    return m


# The emulator's drops a sender's congestion control answers: its queue's, its AQM's and its
# random loss; a down link's are an outage, not congestion.
LINK_DROPS = ("dropped_queue_packets", "dropped_aqm_packets", "dropped_loss_packets")


def data_link(rec: TrialData, p: int) -> dict | None:
    """The emulator's counts of path p's link in the data direction (down when the server
    sends); None when the trial kept no count of that link."""
    return rec.link_stats.get(f"path{p}", {}).get(
        "b_to_a" if rec.record.sender == "server" else "a_to_b") or None


def queue_delay_metrics(rec: TrialData, p: int) -> dict[str, float]:
    """Path p's per-packet queueing delay in its link's data direction, p50/p95/p99 over the
    trial (the emulator's histogram; netem/linkem/qdelay.h); empty for a trial whose emulator
    did not record it."""
    link = data_link(rec, p)
    if link is None or "queue_delay_packets" not in link:
        return {}
    return {f"path{p}_queue_delay_{q}_ms": num_or_nan(link.get(f"queue_delay_{q}_ms"))
            for q in ("p50", "p95", "p99")}


def link_drops(link: dict) -> int:
    return sum(int(link.get(k, 0)) for k in LINK_DROPS)


def link_drop_share(rec: TrialData, p: int) -> float | None:
    """The share of the packets that entered path p's link in the data direction that the
    link dropped; None when the trial kept no count of that link."""
    link = data_link(rec, p)
    if link is None:
        return None
    if not link.get("packets_in"):
        return math.nan
    return link_drops(link) / int(link["packets_in"])


def n_paths_of(records: list[TrialData]) -> int:
    return max((len(r.record.paths) for r in records), default=0)


METERED = declare(
    Metric("metered_bytes", "bytes on metered paths", "bytes"),
    Metric("metered_share", "metered paths' share of the bytes"),
    Metric("metered_cost", "cost of the metered bytes", "per cost_per_gb"),
    Metric("policy_toggles", "path policy toggles", "count"),
)


def metered_metrics(rec: TrialData) -> dict[str, float]:
    """What the metered paths carried and cost, and how often the path policy toggled them;
    empty for a trial whose network has no metered path."""
    r = rec.record
    if not r.metered_paths:
        return {}
    return {"metered_bytes": num_or_nan(r.metered_bytes),
            "metered_share": num_or_nan(r.metered_share),
            "metered_cost": num_or_nan(r.metered_cost),
            "policy_toggles": float(len(r.path_policy_toggles))}


REDUNDANCY = declare(
    Metric("redundant_mbytes", "bytes sent twice on purpose", "MB"),
    Metric("redundant_share", "bytes sent twice, share of the media bytes"),
)


def redundancy_metrics(rec: TrialData) -> dict[str, float]:
    """What the transport sent twice on purpose, in MB and as a share of the media bytes the
    page received; empty for a transport that never does."""
    extra = rec.record.redundant_bytes
    if extra is None:
        return {}
    media = sum(float(e["data"].get("bytes") or 0) for e in rec.events
                if e.get("type") == "segment")
    return {"redundant_mbytes": extra / 1e6,
            "redundant_share": extra / media if media > 0 else math.nan}


TIMING = declare(
    Metric("trial_s", "the trial's whole time", "s"),
    Metric("playback_s", "the trial's playback", "s"),
    Metric("overhead_s", "the trial's time less its playback", "s"),
)


def timing_metrics(rec: TrialData) -> dict[str, float]:
    """Where the trial's time went: all of it, its playback, and the rest (set-up and
    tear-down); empty for a trial recorded before trials kept their phases."""
    r = rec.record
    if r.elapsed_s is None or r.playback_s is None:
        return {}
    return {"trial_s": r.elapsed_s, "playback_s": r.playback_s,
            "overhead_s": r.elapsed_s - r.playback_s}


def trial_metrics(rec: TrialData, n_paths: int) -> dict[str, float]:
    """The trial's figures: its workload's own, then the network's and the transport's, and
    where its time went."""
    base = workload_for(rec.record.kind).metrics(rec)
    return {**base, **kernel_metrics(rec, n_paths), **metered_metrics(rec),
            **redundancy_metrics(rec), **timing_metrics(rec)}
