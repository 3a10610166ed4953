"""mpstream/tcpinfo.py: struct tcp_info's fields read at their offsets, from this kernel's own
answer on a loopback connection and from a laid-out buffer."""

import socket
import struct

from mpstream import tcpinfo


def test_a_loopback_connections_info_reads_as_the_kernel_filled_it():
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.create_connection(server.getsockname()) as client:
        accepted, _ = server.accept()
        with accepted:
            client.sendall(b"x" * 100_000)
            got = 0
            while got < 100_000:
                got += len(accepted.recv(1 << 16))
            names = ("snd_mss", "rtt", "bytes_acked", "unacked")
            raw = client.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
            info = tcpinfo.read(raw, *names)
    assert 500 < info["snd_mss"] <= 65535  # loopback's MSS, not a neighbouring field
    assert 0 < info["rtt"] < 1_000_000  # µs
    # The bytes the receiver acknowledged: all of them, or all but the last flight.
    assert 50_000 < info["bytes_acked"] <= 100_001


def test_a_bit_field_is_read_without_its_neighbours():
    raw = bytearray(tcpinfo.length("delivery_rate", "delivery_rate_app_limited"))
    assert len(raw) == 168
    raw[7] = 0b110
    struct.pack_into("=Q", raw, 160, 123_456)
    assert tcpinfo.read(bytes(raw), "delivery_rate_app_limited", "delivery_rate") == {
        "delivery_rate_app_limited": 0, "delivery_rate": 123_456}
    raw[7] = 0b001
    assert tcpinfo.read(bytes(raw), "delivery_rate_app_limited")["delivery_rate_app_limited"] == 1
