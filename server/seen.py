"""The transport of a client's connection as the server's kernel sees it: MPTCP (with how many
subflows) or plain TCP, looked up by the connection's addresses and ports through sock_diag
(inet_diag over netlink, what `ss` reads) in the calling process's network namespace.

A TCP socket of an MPTCP connection carries the `mptcp` upper-layer protocol, whose info holds
the connection's local token; its subflows are the TCP sockets with the same token. A client
that did not ask for MPTCP gets a plain TCP socket even from an MPTCP listener (the kernel's
fallback), so no ULP means TCP. It reads and never changes anything; no privilege is needed.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x01
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
TCP_ESTABLISHED = 1
TCP_LISTEN = 10
INET_DIAG_INFO = 2
INET_DIAG_ULP_INFO = 19
ULP_INFO_NAME = 1
ULP_INFO_MPTCP = 3
MPTCP_SUBFLOW_ATTR_TOKEN_LOC = 2
NLA_TYPE_MASK = 0x3FFF
NOCOOKIE = 0xFFFFFFFF

_NLMSGHDR = struct.Struct("=IHHII")
# inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid: sport, dport
# (big-endian), src[16], dst[16], interface, cookie[2].
_REQ = struct.Struct("=BBBBI")
_SOCKID = struct.Struct("!HH16s16s")
_SOCKID_TAIL = struct.Struct("=III")
# inet_diag_msg: family, state, timer, retrans, sockid, expires, rqueue, wqueue, uid, inode.
_MSG_LEN = 4 + _SOCKID.size + _SOCKID_TAIL.size + 20
_RTA = struct.Struct("=HH")


@dataclass(frozen=True)
class Seen:
    """What the server's kernel says of one connection: `transport` "mptcp" or "tcp",
    `subflows` its live TCP subflows (1 for TCP)."""

    transport: str
    subflows: int

    def describe(self) -> str:
        if self.transport == "mptcp":
            return f"MPTCP, {self.subflows} subflow{'s' if self.subflows != 1 else ''}"
        return "TCP (multipath not negotiated)"


class NotFound(LookupError):
    """No connection with those addresses in this namespace (a proxy between, another host)."""


def _forms(text: str) -> list[tuple[int, bytes]]:
    """The (family, packed address) forms a socket of this address may have: an IPv4 client of
    a dual-stack listener is an IPv6 socket with the IPv4-mapped address."""
    ip = ipaddress.ip_address(text)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 6:
        return [(socket.AF_INET6, ip.packed)]
    mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
    return [(socket.AF_INET, ip.packed.ljust(16, b"\0")), (socket.AF_INET6, mapped.packed)]


def _request(family: int, ext: int, states: int, local: tuple[bytes, int] | None,
             remote: tuple[bytes, int] | None, flags: int) -> bytes:
    src, sport = local or (b"\0" * 16, 0)
    dst, dport = remote or (b"\0" * 16, 0)
    body = (_REQ.pack(family, socket.IPPROTO_TCP, ext, 0, states)
            + _SOCKID.pack(sport, dport, src, dst) + _SOCKID_TAIL.pack(0, NOCOOKIE, NOCOOKIE))
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY,
                          NLM_F_REQUEST | flags, 1, 0) + body


def _attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    off = 0
    while off + _RTA.size <= len(data):
        length, kind = _RTA.unpack_from(data, off)
        if length < _RTA.size:
            return
        yield kind & NLA_TYPE_MASK, data[off + _RTA.size:off + length]
        off += (length + 3) & ~3


def _token(attrs: bytes) -> int | None:
    """The MPTCP local token of a TCP socket's ULP info, None when it is plain TCP."""
    for kind, value in _attrs(attrs):
        if kind != INET_DIAG_ULP_INFO:
            continue
        ulp = dict(_attrs(value))
        if ulp.get(ULP_INFO_NAME, b"").rstrip(b"\0") != b"mptcp":
            return None
        token = dict(_attrs(ulp.get(ULP_INFO_MPTCP, b""))).get(MPTCP_SUBFLOW_ATTR_TOKEN_LOC)
        return struct.unpack("=I", token[:4])[0] if token else None
    return None


def _ask(message: bytes, dump: bool) -> Iterator[tuple[int, int, bytes]]:
    """(state, remote port, attributes) of each socket the kernel answers `message` with."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
        nl.sendto(message, (0, 0))
        while True:
            data = nl.recv(1 << 16)
            off = 0
            while off + _NLMSGHDR.size <= len(data):
                length, kind, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, off)
                payload = data[off + _NLMSGHDR.size:off + length]
                if kind == NLMSG_DONE:
                    return
                if kind == NLMSG_ERROR:
                    error = -struct.unpack_from("=i", payload)[0]
                    if error == 0:
                        return
                    raise OSError(error, os.strerror(error))
                if kind == SOCK_DIAG_BY_FAMILY:
                    _sport, dport, _src, _dst = _SOCKID.unpack_from(payload, 4)
                    yield payload[1], dport, payload[_MSG_LEN:]
                off += (length + 3) & ~3
            if not dump:
                return  # one socket asked for: one answer


def _find(server: tuple[str, int], client: tuple[str, int]) -> bytes:
    """The attributes of the server's socket of the connection from `client`."""
    ext = 1 << (INET_DIAG_INFO - 1)  # the ULP's info comes with INET_DIAG_INFO
    for family, local in _forms(server[0]):
        for remote_family, remote in _forms(client[0]):
            if remote_family != family:
                continue
            request = _request(family, ext, 0xFFFFFFFF, (local, server[1]), (remote, client[1]),
                               0)
            try:
                # The kernel looks the pair up as a packet from the client would be: where no
                # connection matches, it answers with the listener, not the one asked for.
                for state, dport, attrs in _ask(request, dump=False):
                    if state != TCP_LISTEN and dport == client[1]:
                        return attrs
            except FileNotFoundError:
                continue
    raise NotFound(f"no TCP connection from {client[0]}:{client[1]} to {server[0]}:{server[1]} "
                   "in this network namespace")


def connection(server: tuple[str, int], client: tuple[str, int]) -> Seen:
    """The transport of the connection from `client` (address, port) to `server` (address,
    port), as the server's end sees it. NotFound when this namespace has no such connection."""
    token = _token(_find(server, client))
    if token is None:
        return Seen("tcp", 1)
    ext = 1 << (INET_DIAG_INFO - 1)
    subflows = sum(1 for f in (socket.AF_INET, socket.AF_INET6)
                   for _state, _port, attrs in _ask(
                       _request(f, ext, 1 << TCP_ESTABLISHED, None, None, NLM_F_DUMP), dump=True)
                   if _token(attrs) == token)
    return Seen("mptcp", max(subflows, 1))
