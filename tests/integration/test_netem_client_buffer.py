"""The emulated clients' receive buffer (docs/netem.md#the-clients-receive-buffer): the client
and each competing user start their sockets at 4 MB, the server keeps the kernel's, a profile's
own `tcp_rmem` wins at both ends; and a real MPTCP connection's socket takes its buffer from it.
The receive-stall check finds no stall on a connection that works."""

import os
import subprocess
from pathlib import Path

from mpstream.netem.profile import profile_from_dict
from mpstream.netem.receivestall import receive_stall
from mpstream.netem.sockets import MPTCP_LEVEL, parse_ss
from mpstream.netem.system import CLIENT_RMEM_INITIAL
from mpstream.netem.topology import Topology
from mpstream.transports.base import get_transport
from tests.waiting import listening, wait_until

MPTCP_WRAP = get_transport("mptcp").wrap
PATH = {"rate": "20mbit", "delay_ms": 5}
KERNEL = [int(v) for v in Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()]


def profile(**extra):
    return profile_from_dict({"mode": "mptcp", "paths": [PATH, PATH],
                              "competitors": [{"name": "tcp-user", "mode": "tcp",
                                               "paths": [PATH]}], **extra}, name="buffers")


def rmem(topo, host):
    out = topo.run(host, ["sysctl", "-n", "net.ipv4.tcp_rmem"], capture_output=True,
                   text=True, check=True).stdout
    return [int(v) for v in out.split()]


def test_clients_start_at_4mb_and_the_server_keeps_the_kernels():
    with Topology.up(profile(), f"rb{os.getpid()}") as topo:
        for host in ("client", "user1"):
            assert rmem(topo, host) == [KERNEL[0], CLIENT_RMEM_INITIAL,
                                        max(KERNEL[2], CLIENT_RMEM_INITIAL)], host
        assert rmem(topo, "server") == KERNEL


def test_a_profiles_own_tcp_rmem_wins_at_both_ends():
    own = "4096 131072 6291456"
    with Topology.up(profile(sysctls={"net.ipv4.tcp_rmem": own}), f"ro{os.getpid()}") as topo:
        for host in ("client", "user1", "server"):
            assert rmem(topo, host) == [4096, 131072, 6291456], host


def test_a_working_mptcp_download_starts_at_4mb_and_is_not_a_stall():
    with Topology.up(profile(), f"rd{os.getpid()}") as topo:
        server = topo.popen("server", ["iperf3", "-s", "-1"], wrap=MPTCP_WRAP,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: listening(topo.server_ns, 5201), 10, "iperf3 listens")
            client = topo.popen("client", ["iperf3", "-c", topo.server_addr, "-R", "-t", "6"],
                                wrap=MPTCP_WRAP, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

            def connections():
                listing = topo.run("client", ["ss", "-tMinmH"], capture_output=True,
                                   text=True).stdout
                found = [s for s in parse_ss(listing) if s.get("mptcp") == MPTCP_LEVEL
                         and s["state"] == "ESTAB"]
                return found or None

            found = wait_until(connections, 10, "the MPTCP connections are up")
            # A new connection's socket takes its buffer from the namespace's tcp_rmem.
            assert {s["rcvbuf"] for s in found} >= {CLIENT_RMEM_INITIAL}
            assert receive_stall(topo) is None
            assert client.wait(timeout=30) == 0
        finally:
            server.kill()
            server.wait()
