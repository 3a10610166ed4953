"""struct tcp_info (linux/tcp.h) as the kernel lays it out, once: the byte offset and width of
each field mpstream reads, from a TCP_INFO socket option (netem/record.py) or a sock_diag
INET_DIAG_INFO attribute (server/seen.py). The layout only grows at its end, so a field's offset
holds on every kernel that has it; a shorter answer is an older kernel's."""

from __future__ import annotations

import struct

# name -> (byte offset, struct format)
FIELDS: dict[str, tuple[int, str]] = {
    # a bit field: bit 0 of byte 7 (the sample was limited by the application, not the path)
    "delivery_rate_app_limited": (7, "=B"),
    "snd_mss": (16, "=I"),
    "rcv_mss": (20, "=I"),
    "unacked": (24, "=I"),
    "last_ack_recv": (56, "=I"),  # ms since the last ACK came
    "rtt": (68, "=I"),  # µs, smoothed
    "total_retrans": (100, "=I"),
    "bytes_acked": (120, "=Q"),
    "delivery_rate": (160, "=Q"),  # bytes/s, the latest sample (kernel 4.18 on)
}


def length(*names: str) -> int:
    """The bytes of tcp_info that hold all of `names`."""
    return max(FIELDS[n][0] + struct.calcsize(FIELDS[n][1]) for n in names)


# The bit fields among FIELDS: name -> the mask of their bits in the byte read.
BITS = {"delivery_rate_app_limited": 0x1}


def read(raw: bytes, *names: str) -> dict[str, int]:
    """The fields `names` of a tcp_info (which must hold them: `length`)."""
    return {n: int(struct.unpack_from(FIELDS[n][1], raw, FIELDS[n][0])[0]) & BITS.get(n, ~0)
            for n in names}
