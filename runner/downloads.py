"""Bulk downloads from a network's server: the bulk transfer's (runner/workloads/bulk.py) and
the cross traffic of a network's competitors beside any workload. One iperf3 server and client
each, over each user's own transport."""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from mpstream.errors import UserError
from mpstream.network import Competitor, Network
from mpstream.proc import stop
from mpstream.runner.layout import competitor_iperf_name
from mpstream.runner.workloads.base import TrialContext, TrialFailed
from mpstream.transports.base import Transport, get_transport

BULK_PORT = 5211  # not iperf3's default: other tools on the machine may hold that one


def competitor_flow(ctx: TrialContext, k: int, user: Competitor, trial_s: float) -> BulkFlow:
    """Competitor `k`'s download in a trial of `trial_s` seconds: what the client does (from
    0, with the client's warm-up left out), or its cross traffic's schedule."""
    transport = get_transport(user.transport)
    if transport.carries_http_only:
        raise UserError(f"{user.name} speaks {transport.name}, which carries a player's HTTP "
                        "only: a bulk download needs a transport iperf3 speaks (mptcp or tcp)")
    output = ctx.tdir / competitor_iperf_name(user.host)
    port = BULK_PORT + 1 + k
    if user.cross_traffic is None:
        return BulkFlow(user.host, transport, port, output, seconds=trial_s,
                        omit_s=ctx.scenario.warmup_s)
    start_s, stop_s = user.cross_traffic
    end_s = min(stop_s, trial_s) if stop_s is not None else trial_s
    if end_s - start_s < 1:
        raise UserError(f"{user.name}'s cross traffic starts at {start_s:g} s, and the trial's "
                        f"transfers end at {trial_s:g} s: start it earlier or make the scenario "
                        "longer")
    return BulkFlow(user.host, transport, port, output, seconds=end_s - start_s,
                    start_s=start_s)


@dataclass
class BulkFlow:
    """One user's download: iperf3 -R from the server's port `port` to `host`, starting
    `start_s` after the others' start, for `seconds` (the first `omit_s` left out of iperf3's
    figures); its JSON goes to `output`."""

    host: str
    transport: Transport
    port: int
    output: Path
    seconds: float
    start_s: float = 0.0
    omit_s: float = 0.0

    def argv(self, net: Network) -> list[str]:
        argv = ["iperf3", "-c", net.server_addr, "-p", str(self.port), "-R", "-J",
                "-t", f"{self.seconds:g}"]
        if self.omit_s:
            argv += ["-O", f"{self.omit_s:g}"]
        return argv


class Downloads:
    """Bulk downloads from the server, one iperf3 server and client each: the servers listen on
    entry, `start()` starts each client at its `start_s`, `wait()` waits for all and writes
    their JSON; on the way out everything still running is stopped (an error, Ctrl-C)."""

    def __init__(self, net: Network, flows: list[BulkFlow]):
        self.net, self.flows = net, flows
        self.servers: list[subprocess.Popen[str]] = []
        self.clients: dict[str, subprocess.Popen[str]] = {}
        self.timers: list[threading.Timer] = []
        self.lock = threading.Lock()
        self.closed = False

    def __enter__(self) -> Downloads:
        try:
            for flow in self.flows:
                self.servers.append(self.net.popen(
                    "server", ["iperf3", "-s", "-1", "-p", str(flow.port)],
                    wrap=flow.transport.wrap, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    text=True))
                self.net.wait_listening("server", flow.port, server=self.servers[-1])
        except BaseException:
            self.__exit__()
            raise
        return self

    def start(self) -> None:
        for flow in self.flows:
            if flow.start_s <= 0:
                self._start(flow)
            else:
                timer = threading.Timer(flow.start_s, self._start, args=(flow,))
                timer.daemon = True
                self.timers.append(timer)
                timer.start()

    def _start(self, flow: BulkFlow) -> None:
        with self.lock:
            if not self.closed:
                self.clients[flow.host] = self.net.popen(
                    flow.host, flow.argv(self.net), wrap=flow.transport.wrap,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait(self, timeout_s: float) -> None:
        """Until every download has ended (each within `timeout_s` of now); their JSON into
        their files; an iperf3 that failed fails the trial with its own words."""
        for timer in self.timers:
            timer.join()
        for flow in self.flows:
            client = self.clients[flow.host]
            out, err = client.communicate(timeout=timeout_s)
            flow.output.write_text(out)
            if client.returncode != 0:
                who = "" if flow.host == "client" else f" ({flow.host})"
                raise TrialFailed(f"iperf3{who} exit {client.returncode}: "
                                  f"{_iperf_error(out, err)}")

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.closed = True
        for timer in self.timers:
            timer.cancel()
        for proc in [*self.clients.values(), *self.servers]:
            stop(proc, timeout=5)


def _iperf_error(stdout: str, stderr: str) -> str:
    """iperf3's own words: its JSON's `error`, else what it printed on stderr."""
    try:
        return str(json.loads(stdout)["error"])[:300]
    except (ValueError, KeyError, TypeError):
        return stderr.strip()[:300]
