"""Workload kind "iperf": one iperf3 transfer from the server to the client per trial
(iperf.json), over the trial's transport and proven on the wire like a session, with one from
the server to each competing client of the network at the same time (iperf-<host>.json)."""

from __future__ import annotations

import math
import time

from mpstream.runner.downloads import BULK_PORT, BulkFlow, Downloads, competitor_flow
from mpstream.runner.layout import TrialData
from mpstream.runner.metrics.common import cross_traffic_metrics, fairness_metrics, user_rates
from mpstream.runner.metrics.metric import Metric, declare
from mpstream.runner.resolved import ResolvedCondition
from mpstream.runner.scenario import Scenario
from mpstream.runner.workloads import register
from mpstream.runner.workloads.base import TRIAL_SLACK_S, TrialContext, Workload, WorkloadOutcome


class BulkTransfer(Workload):
    """One iperf3 transfer from the server to the client (-R), as long as the scenario's
    duration after its warm-up (iperf.json), over the trial's transport, proven on the wire
    like a session; and at the same time one from the server to each competing client of the
    network, over its own transport (iperf-<host>.json), cross traffic on its schedule."""

    kind = "iperf"
    actor = "iperf3"
    tools = ("iperf3",)
    shown = declare(
        Metric("throughput_mbps", "iperf3 throughput", "Mbit/s"),
        Metric("throughput_share", "throughput / sum of path rates"),
        Metric("iperf_retransmits", "iperf3 retransmits", "count"),
    )

    def refusal(self, scenario: Scenario, resolved: ResolvedCondition) -> str | None:
        transport = resolved.transport
        if resolved.path_policy.adapts:
            return (f"path policy {resolved.path_policy.name} follows a player's buffer, and an "
                    "iperf trial has none")
        if transport.carries_http_only:
            return (f"transport {transport.name} carries a player's HTTP only; an iperf "
                    "scenario needs a transport iperf3 speaks (mptcp or tcp)")
        return None

    def metrics(self, rec: TrialData) -> dict[str, float]:
        return iperf_metrics(rec)

    def run(self, ctx: TrialContext) -> WorkloadOutcome:
        net, scenario = ctx.network, ctx.scenario
        seconds = scenario.warmup_s + scenario.duration_s
        flows = [BulkFlow("client", ctx.transport, BULK_PORT, ctx.tdir / "iperf.json",
                          seconds=seconds, omit_s=scenario.warmup_s)]
        flows += [competitor_flow(ctx, k, user, seconds)
                  for k, user in enumerate(net.competitors)]
        with Downloads(net, flows) as downloads:
            before = ctx.transport.before(net)
            with ctx.watch():
                net.start_events()
                started_unix = time.time()
                downloads.start()
                downloads.wait(seconds + TRIAL_SLACK_S)
            proof = ctx.transport.prove(net, before, "iperf3")
        return WorkloadOutcome(failure=proof.problem, started=proof.problem is None,
                               proof=proof.counters or None, events_started_unix=started_unix)


def iperf_metrics(rec: TrialData) -> dict[str, float]:
    end = (rec.iperf or {}).get("end", {})
    recv = end.get("sum_received", {}).get("bits_per_second")
    sent = end.get("sum_sent", {})
    m = {
        "throughput_mbps": float(recv) / 1e6 if recv is not None else math.nan,
        "iperf_retransmits": float(sent.get("retransmits", math.nan)),
    }
    cap = rec.record.capacity_bps
    m["throughput_share"] = m["throughput_mbps"] * 1e6 / cap if cap else math.nan
    if any(not u.cross_traffic for u in rec.record.competitors):
        m.update(fairness_metrics(user_rates(rec)))
    m.update(cross_traffic_metrics(rec))
    return m


register(BulkTransfer())
