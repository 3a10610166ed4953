"""Packet capture and MPTCP counters around a real MPTCP transfer over two emulated paths, with the
targets a trial captures: one capture a namespace, the client's holding both paths (told apart
by the client's address on each) and none of its loopback; each holds headers only, is
bounded, decodes as MPTCP (tcpdump reads the options Wireshark does), and the counters of both
namespaces show the handshakes; nothing keeps running. A capture that cannot start is refused
at once, in tcpdump's words."""

import gzip
import re
import struct
import subprocess
import time

import pytest

from mpstream.errors import UserError
from mpstream.netem.profile import load_profile
from mpstream.netem.topology import Topology
from mpstream.proc import pid_alive
from mpstream.runner.samplers.capture import (
    READY_TIMEOUT_S,
    SNAPLEN,
    CounterSnapshots,
    PacketCapture,
    namespace_targets,
)
from mpstream.transports.base import get_transport
from tests.waiting import listening, wait_until

MPTCP_WRAP = get_transport("mptcp").wrap

pytestmark = pytest.mark.timeout(90)
MAX_PACKETS = 400


def test_capture_and_counters_of_an_mptcp_download(tmp_path):
    profile = load_profile("thesis-bandwidth-balanced")
    with Topology.up(profile, name="rcap") as topo:
        targets = namespace_targets(topo.client_ns, topo.server_ns)
        counters = CounterSnapshots({"client": topo.client_ns, "server": topo.server_ns})
        server = topo.popen("server", ["iperf3", "-s", "-1", "-p", "5302"], wrap=MPTCP_WRAP,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: listening(topo.server_ns, 5302), 10, "iperf3 listens")
            counters.take_before()
            cap = PacketCapture(targets, tmp_path / "pcap", max_packets=MAX_PACKETS)
            with cap:
                pids = [proc.pid for proc, _ in cap._procs]
                # Loopback traffic in the client's namespace, which its capture must leave out.
                topo.run("client", ["ping", "-c", "2", "-i", "0.2", "127.0.0.1"], check=True,
                         capture_output=True, timeout=10)
                proc = topo.run("client", ["iperf3", "-c", topo.server_addr, "-p", "5302",
                                           "-n", "2M", "-R"], wrap=MPTCP_WRAP,
                                capture_output=True, text=True, timeout=60)
            counters.take_after()
        finally:
            server.kill()
            server.wait()
    assert proc.returncode == 0, proc.stderr
    assert not any(pid_alive(pid) for pid in pids), "tcpdump left running"
    assert sorted(f.name for f in cap.files) == ["client.pcap.gz", "server-eth0.pcap.gz"]
    linktypes = {"client.pcap.gz": 276, "server-eth0.pcap.gz": 1}  # LINUX_SLL2, Ethernet
    decoded = {}
    for f in cap.files:
        raw = gzip.decompress(f.read_bytes())
        magic, _, _, _, _, snaplen, linktype = struct.unpack("<IHHiIII", raw[:24])
        assert magic == 0xA1B2C3D4 and snaplen == SNAPLEN and linktype == linktypes[f.name]
        plain = tmp_path / f.name.removesuffix(".gz")
        plain.write_bytes(raw)
        out = subprocess.run(["tcpdump", "-nr", str(plain)], capture_output=True, text=True,
                             check=True).stdout
        lines = out.splitlines()
        # 2 MB is well over MAX_PACKETS packets: the bound holds.
        assert len(lines) <= MAX_PACKETS
        # Headers only: no stored packet is longer than the snap length.
        assert len(raw) <= 24 + len(lines) * (16 + SNAPLEN)
        decoded[f.name] = lines
    assert not any("127.0.0.1" in line for line in decoded["client.pcap.gz"])
    # tcpdump prints an MPTCP option as "mptcp <length> <subtype>". Read elsewhere, the file's
    # interface indexes name nothing, so a path's packets are those of its client address.
    def options(lines):
        return set(re.findall(r"mptcp \d+ ([a-z-]+)", "\n".join(lines)))

    by_path = [[line for line in decoded["client.pcap.gz"] if f" {p.client_addr}." in line]
               for p in topo.paths]
    assert {"capable", "dss"} <= options(by_path[0])
    assert {"join", "dss"} <= options(by_path[1])
    assert {"capable", "join", "dss"} <= options(decoded["server-eth0.pcap.gz"])
    data = counters.as_json()["hosts"]
    assert data["server"]["delta"].get("MPTcpExtMPCapableSYNRX", 0) >= 1
    assert data["server"]["delta"].get("MPTcpExtMPJoinSynRx", 0) >= 1
    assert data["client"]["delta"].get("MPTcpExtMPJoinSynAckRx", 0) >= 1
    assert all(k.startswith("MPTcpExt") for k in data["client"]["after"])


def test_a_capture_that_cannot_start_is_refused_at_once_with_tcpdumps_words(tmp_path):
    capture = PacketCapture([(None, "nosuchif0", "x")], tmp_path / "pcap")
    t0 = time.monotonic()
    with pytest.raises(UserError, match=r"tcpdump on nosuchif0 did not start: .*nosuchif0"):
        capture.start()
    # Refused on tcpdump's first words, not after the wait for words that never come.
    assert time.monotonic() - t0 < READY_TIMEOUT_S
    assert capture._procs == []
