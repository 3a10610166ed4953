"""One MPTCP download of a fixed size over the balanced preset's two paths, sampled at both ends
by the runner's kernel sampler, with each client path interface's counters before and after:
what tests/integration/test_runner_sampler.py checks and bench/bench_sampler.py measures round
after round (the bytes a packet beyond the sampled payload, which docs/penalties/evidence.md
quotes)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpstream.netem.profile import load_profile
from mpstream.netem.topology import Topology
from mpstream.runner.metrics.common import binned_by_path
from mpstream.runner.samplers.kernel import SubflowSampler, read_samples
from mpstream.transports.base import get_transport
from tests.waiting import listening, wait_until

MPTCP_WRAP = get_transport("mptcp").wrap
PORT = 5301


@dataclass
class SampledDownload:
    iperf: dict[str, Any]  # iperf3's JSON
    client_rows: list[dict[str, Any]]
    server_rows: list[dict[str, Any]]
    interfaces: dict[int, dict[str, int]]  # path -> rx_bytes, rx_packets over the transfer
    samples: int  # the client sampler's polls
    sampled_s: float  # how long the samplers ran
    errors: list[str]
    sampler_left_running: bool

    def sampled_bytes(self) -> dict[int, int]:
        """Path -> the bytes its client subflows received, as sampled."""
        recv = binned_by_path(self.client_rows, "bytes_received")
        return {p: sum(b.values()) for p, b in recv.items()}

    def retransmitted(self) -> dict[int, int]:
        """Path -> the bytes the server retransmitted on it."""
        sent = binned_by_path(self.server_rows, "bytes_retrans")
        return {p: sum(b.values()) for p, b in sent.items()}

    def bytes_a_packet(self) -> dict[int, float]:
        """Path -> what its interface received beyond the sampled payload, a packet: the
        headers, and any bytes retransmitted that the client already had."""
        return {p: (self.interfaces[p]["rx_bytes"] - v) / self.interfaces[p]["rx_packets"]
                for p, v in self.sampled_bytes().items()}


def sampled_download(folder: Path, name: str, size: str = "12M") -> SampledDownload:
    profile = load_profile("thesis-bandwidth-balanced")
    with Topology.up(profile, name=name) as topo:
        path_of = {p.client_addr: p.index for p in topo.paths}.get
        server = topo.popen("server", ["iperf3", "-s", "-1", "-p", str(PORT)], wrap=MPTCP_WRAP,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: listening(topo.server_ns, PORT), 10, "iperf3 listens")
            before = topo.path_bytes()
            t0 = time.monotonic()
            client_csv, server_csv = folder / "c.csv", folder / "s.csv"
            with SubflowSampler(topo.client_ns, "client", client_csv, path_of, t0=t0) as sc, \
                    SubflowSampler(topo.server_ns, "server", server_csv, path_of, t0=t0) as ss:
                # A byte count, not a duration: the transfer ends with everything delivered
                # and read, so no data is still on the wire when the receiving sockets close.
                proc = topo.run("client", ["iperf3", "-c", topo.server_addr, "-p", str(PORT),
                                           "-n", size, "-R", "-J"], wrap=MPTCP_WRAP,
                                capture_output=True, text=True, timeout=60)
                # Every subflow and iperf3's control connection is reported once more as it
                # is freed.
                wait_until(lambda: sc.destroyed >= 3 and ss.destroyed >= 2, 10,
                           "the samplers report the freed sockets")
            sampled_s = time.monotonic() - t0
            after = topo.path_bytes()
        finally:
            server.kill()
            server.wait()
    if proc.returncode != 0:
        raise AssertionError(f"iperf3 failed: {proc.stderr}")
    interfaces = {p: {k: after[p][k] - before[p][k] for k in ("rx_bytes", "rx_packets")}
                  for p in range(len(after))}
    return SampledDownload(
        iperf=json.loads(proc.stdout), client_rows=read_samples(client_csv),
        server_rows=read_samples(server_csv), interfaces=interfaces, samples=sc.samples,
        sampled_s=sampled_s, errors=sc.errors + ss.errors,
        sampler_left_running=sc._events.poll() is None or ss._events.poll() is None)
