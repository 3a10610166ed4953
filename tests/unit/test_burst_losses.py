"""scripts/burst_losses.py: segments, losses and bursts per class of flow, from a pcap file
written here (raw IPv4 and Ethernet link types, gzip or not)."""

import gzip
import struct

import pytest

from tests.scripts import load_script

bl = load_script("burst_losses")


def _packet(src: str, sport: int, dst: str, dport: int, seq: int, payload: int) -> bytes:
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x10, 65535, 0, 0)
    total = 20 + len(tcp) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 6, 0,
                     bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    return ip + tcp + b"\0" * payload


def _pcap(path, packets, linktype=101, gz=True):
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
    body = b""
    for t, pkt in packets:
        if linktype == 1:
            pkt = b"\0" * 12 + b"\x08\x00" + pkt
        body += struct.pack("<IIII", int(t), round((t % 1) * 1e6), len(pkt), len(pkt)) + pkt
    (gzip.open if gz else open)(path, "wb").write(head + body)


MP, TCP = ("10.2.0.2", 5211, "10.1.0.2", 40000), ("10.2.0.2", 5212, "10.1.2.2", 40001)


@pytest.mark.parametrize(("linktype", "gz"), [(101, True), (1, False)])
def test_losses_and_bursts_per_class(tmp_path, linktype, gz):
    seg = bl.MSS
    pkts = [
        # MPTCP: a burst of three segments (one offload packet of two, then one 50 us later),
        # whose last is lost and sent again; then a lone segment.
        (1.000000, _packet(*MP, 0, 2 * seg)),
        (1.000050, _packet(*MP, 2 * seg, seg)),
        (1.010000, _packet(*MP, 3 * seg, seg)),
        (1.050000, _packet(*MP, 2 * seg, seg)),
        # TCP: two lone segments 1 ms apart, the first lost; a pure ACK (no payload) of the
        # client, which is no segment.
        (1.000000, _packet(*TCP, 0, seg)),
        (1.001000, _packet(*TCP, seg, seg)),
        (1.002000, _packet("10.1.0.2", 40000, "10.2.0.2", 5211, 0, 0)),
        (1.060000, _packet(*TCP, 0, seg)),
    ]
    pcap = tmp_path / ("s.pcap.gz" if gz else "s.pcap")
    _pcap(pcap, pkts, linktype, gz)
    f = bl.trial_figures(pcap, 5211, {5212}, gap_s=200e-6, burst=3)
    assert (f["mptcp"].segments, f["mptcp"].lost, f["mptcp"].in_bursts,
            f["mptcp"].lost_in_bursts) == (4, 1, 3, 1)
    assert (f["tcp"].segments, f["tcp"].lost, f["tcp"].in_bursts,
            f["tcp"].lost_in_bursts) == (2, 1, 0, 0)


def test_a_file_that_is_no_pcap_is_named(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"\x0a\x0d\x0d\x0a" + b"\0" * 40)
    with pytest.raises(ValueError, match="not a pcap file"):
        list(bl.read_pcap(bad))
