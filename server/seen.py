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
from dataclasses import asdict, dataclass
from typing import Any

from mpstream import tcpinfo

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
MPTCP_SUBFLOW_ATTR_FLAGS = 8
MPTCP_SUBFLOW_FLAG_BKUP_REM = 1 << 4
MPTCP_SUBFLOW_FLAG_BKUP_LOC = 1 << 5
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


def _unmapped(ip: ipaddress.IPv4Address | ipaddress.IPv6Address
              ) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An IPv4-mapped IPv6 address as the IPv4 address it maps; any other as it is."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _forms(text: str) -> list[tuple[int, bytes]]:
    """The (family, packed address) forms a socket of this address may have: an IPv4 client of
    a dual-stack listener is an IPv6 socket with the IPv4-mapped address."""
    ip = _unmapped(ipaddress.ip_address(text))
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


def _subflow(attrs: bytes) -> dict[int, bytes] | None:
    """The MPTCP subflow attributes of a TCP socket's ULP info, None when it is plain TCP."""
    for kind, value in _attrs(attrs):
        if kind != INET_DIAG_ULP_INFO:
            continue
        ulp = dict(_attrs(value))
        if ulp.get(ULP_INFO_NAME, b"").rstrip(b"\0") != b"mptcp":
            return None
        return dict(_attrs(ulp.get(ULP_INFO_MPTCP, b"")))
    return None


def _token(attrs: bytes) -> int | None:
    """The MPTCP local token of a TCP socket's ULP info, None when it is plain TCP."""
    token = (_subflow(attrs) or {}).get(MPTCP_SUBFLOW_ATTR_TOKEN_LOC)
    return struct.unpack("=I", token[:4])[0] if token else None


@dataclass(frozen=True)
class _Socket:
    """One socket of the kernel's answer: its TCP state, family, addresses (packed, 16 bytes)
    and ports, and its attributes."""

    state: int
    family: int
    local: tuple[bytes, int]
    remote: tuple[bytes, int]
    attrs: bytes


def _ask(message: bytes, dump: bool) -> Iterator[_Socket]:
    """Each socket the kernel answers `message` with."""
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
                    sport, dport, src, dst = _SOCKID.unpack_from(payload, 4)
                    yield _Socket(payload[1], payload[0], (src, sport), (dst, dport),
                                  payload[_MSG_LEN:])
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
                for sock in _ask(request, dump=False):
                    if sock.state != TCP_LISTEN and sock.remote[1] == client[1]:
                        return sock.attrs
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
    subflows = sum(1 for sock in _established() if _token(sock.attrs) == token)
    return Seen("mptcp", max(subflows, 1))


def _established() -> Iterator[_Socket]:
    """Every established TCP socket of this namespace, with its info and its ULP's."""
    ext = 1 << (INET_DIAG_INFO - 1)
    for family in (socket.AF_INET, socket.AF_INET6):
        yield from _ask(_request(family, ext, 1 << TCP_ESTABLISHED, None, None, NLM_F_DUMP),
                        dump=True)


# The fields of struct tcp_info a path's figure reads (mpstream/tcpinfo.py).
_TCPI_READ = ("delivery_rate_app_limited", "unacked", "last_ack_recv", "rtt", "bytes_acked",
              "delivery_rate")


@dataclass(frozen=True)
class PathFigure:
    """One path of a client's connections as the server's sender sees it: what the page's
    multipath-aware adaptation rule reads (docs/abr.md). A path is the client's address its
    subflows come from (`address`: one per path, each path's interface has its own);
    `delivery_bps` the kernel's latest delivery-rate sample of the path's subflow that last
    had data acknowledged, `app_limited` whether the sender had too little to send during it
    (a sample of the application, not of the path); `bytes_acked` the path's bytes delivered
    over all its subflows; `backup` whether either end marked a subflow backup (a path policy
    holding it back); `waiting_ms` how long data in flight on it has waited for an ACK, the
    least over its subflows that have some (0 when none is in flight): a path that failed
    shows it growing."""

    address: str
    subflows: int
    delivery_bps: float
    app_limited: bool
    rtt_ms: float
    bytes_acked: int
    backup: bool
    waiting_ms: int

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Sample:
    info: dict[str, int]  # the tcp_info fields of _TCPI_READ
    backup: bool


def _sample(sock: _Socket) -> _Sample | None:
    """The tcp_info and backup mark of a TCP socket (an MPTCP subflow, or a plain connection)."""
    info = next((v for k, v in _attrs(sock.attrs) if k == INET_DIAG_INFO), b"")
    if len(info) < tcpinfo.length(*_TCPI_READ):
        return None  # a kernel older than tcp_info's delivery rate (4.18)
    sub = _subflow(sock.attrs) or {}
    flags = struct.unpack("=I", sub[MPTCP_SUBFLOW_ATTR_FLAGS][:4])[0] \
        if MPTCP_SUBFLOW_ATTR_FLAGS in sub else 0
    held = bool(flags & (MPTCP_SUBFLOW_FLAG_BKUP_REM | MPTCP_SUBFLOW_FLAG_BKUP_LOC))
    return _Sample(tcpinfo.read(info, *_TCPI_READ), held)


def _address(sock: _Socket) -> str:
    """The peer's address as text; an IPv4 client of a dual-stack socket as IPv4."""
    packed = sock.remote[0]
    return str(_unmapped(ipaddress.ip_address(packed[:4] if sock.family == socket.AF_INET
                                             else packed)))


def _figure(address: str, samples: list[_Sample]) -> PathFigure:
    """A path's figure from its subflows' samples: the rate of the one whose last ACK came most
    recently (an idle subflow keeps its last sample from whenever it last sent)."""
    latest = min(samples, key=lambda s: s.info["last_ack_recv"])
    in_flight = [s.info["last_ack_recv"] for s in samples if s.info["unacked"] > 0]
    return PathFigure(
        address=address, subflows=len(samples),
        delivery_bps=latest.info["delivery_rate"] * 8.0,
        app_limited=bool(latest.info["delivery_rate_app_limited"]),
        rtt_ms=latest.info["rtt"] / 1000.0,
        bytes_acked=sum(s.info["bytes_acked"] for s in samples),
        backup=any(s.backup for s in samples),
        # A path that failed holds every subflow's data; one stuck connection on a path that
        # others still cross does not make the path failed.
        waiting_ms=min(in_flight, default=0),
    )


def paths(server: tuple[str, int], client: tuple[str, int]) -> list[PathFigure]:
    """The paths of every connection to `server` from the client whose connection from
    `client` (address, port) asks, one figure a path: the asking address's first, then the
    others by address. Each connection of a browser starts from the same address (its first
    path's), so its connections are the ones with a subflow from there, whichever of them
    asked; a plain TCP client's are its TCP connections from that address, one path. NotFound
    when this namespace has no such connection."""
    mptcp = _token(_find(server, client)) is not None
    socks = [s for s in _established() if s.local[1] == server[1]]
    first = {form for _family, form in _forms(client[0])}
    tokens = {_token(s.attrs) for s in socks if s.remote[0] in first}
    by_address: dict[str, list[_Sample]] = {}
    for sock in socks:
        token = _token(sock.attrs)
        if mptcp:
            mine = token is not None and token in tokens
        else:
            mine = token is None and sock.remote[0] in first
        sample = _sample(sock) if mine else None
        if sample is not None:
            by_address.setdefault(_address(sock), []).append(sample)
    asking = str(_unmapped(ipaddress.ip_address(client[0])))
    return [_figure(address, by_address[address])
            for address in sorted(by_address, key=lambda a: (a != asking, a))]
