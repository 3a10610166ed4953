"""The server's lookup of a connection's transport (server/seen.py) against real connections on
loopback: an MPTCP client's, a plain TCP client's to the same MPTCP listener, and a pair of
addresses with no connection."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from mpstream import tcpinfo
from mpstream.server import seen

pytestmark = pytest.mark.unit

IPPROTO_MPTCP = 262


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def _connect(listener: socket.socket, proto: int) -> tuple[socket.socket, socket.socket]:
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    client.connect(listener.getsockname())
    accepted, _ = listener.accept()
    return client, accepted


def test_an_mptcp_clients_connection_is_mptcp_with_one_subflow(listener):
    client, accepted = _connect(listener, IPPROTO_MPTCP)
    with client, accepted:
        found = seen.connection(listener.getsockname(), client.getsockname())
    assert found == seen.Seen("mptcp", 1)
    assert found.describe() == "MPTCP, 1 subflow"


def test_a_tcp_clients_connection_to_an_mptcp_listener_is_tcp(listener):
    client, accepted = _connect(listener, socket.IPPROTO_TCP)
    with client, accepted:
        found = seen.connection(listener.getsockname(), client.getsockname())
        # The IPv4-mapped form a dual-stack server reports names the same connection.
        mapped = seen.connection(listener.getsockname(),
                                 (f"::ffff:{client.getsockname()[0]}", client.getsockname()[1]))
    assert found == mapped == seen.Seen("tcp", 1)
    assert found.describe() == "TCP (multipath not negotiated)"


def test_an_ipv4_client_of_a_dual_stack_listener_is_found():
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM, IPPROTO_MPTCP) as dual:
        dual.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        dual.bind(("::", 0))
        dual.listen()
        port = dual.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = dual.accept()
            with accepted:
                found = seen.connection(("127.0.0.1", port), client.getsockname())
    assert found == seen.Seen("tcp", 1)


def test_two_connections_of_one_client_are_told_apart(listener):
    mp, mp_accepted = _connect(listener, IPPROTO_MPTCP)
    tcp, tcp_accepted = _connect(listener, socket.IPPROTO_TCP)
    with mp, mp_accepted, tcp, tcp_accepted:
        assert seen.connection(listener.getsockname(), mp.getsockname()).transport == "mptcp"
        assert seen.connection(listener.getsockname(), tcp.getsockname()).transport == "tcp"


def test_no_such_connection_is_not_found_not_the_listener(listener):
    # The kernel answers a pair that matches no connection with the listener itself.
    with pytest.raises(seen.NotFound, match=r"no TCP connection from 127\.0\.0\.1:1 to"):
        seen.connection(listener.getsockname(), ("127.0.0.1", 1))
    with pytest.raises(seen.NotFound, match="no TCP connection from ::1:1"):
        seen.connection(listener.getsockname(), ("::1", 1))


def _headers(listener: socket.socket, client: socket.socket) -> dict[str, str]:
    """What nginx passes the collector of the connection a request came on."""
    (server, server_port), (addr, port) = listener.getsockname(), client.getsockname()
    return {"X-Forwarded-For": addr, "X-Client-Port": str(port), "X-Server-Addr": server,
            "X-Server-Port": str(server_port)}


def test_the_collector_measures_the_asking_connection_and_keeps_it_with_the_session(
        listener, tmp_path):
    from mpstream.server.app import create_app

    app = create_app(f"sqlite:///{tmp_path / 'qoe.sqlite3'}").test_client()
    mp, mp_accepted = _connect(listener, IPPROTO_MPTCP)
    tcp, tcp_accepted = _connect(listener, socket.IPPROTO_TCP)
    with mp, mp_accepted, tcp, tcp_accepted:
        # Asked before the session record arrived: kept all the same.
        first = app.post("/api/v1/sessions/web-1/transport", headers=_headers(listener, mp))
        other = app.post("/api/v1/sessions/web-2/transport", headers=_headers(listener, tcp))
        asked_from = "{}:{}".format(*mp.getsockname())
    assert first.json == {"measured": True, "transport": "mptcp", "subflows": 1,
                          "label": "MPTCP, 1 subflow",
                          "client": asked_from}
    assert other.json["label"] == "TCP (multipath not negotiated)"
    session = {"id": "web-1", "player": "dashjs", "player_version": "5.2.1",
               "protocol": "dash", "manifest": "/m.mpd", "scenario": None, "trial": None,
               "transport": "unknown", "user_agent": "x", "started_at": "2026-11-27T06:00:00Z"}
    assert app.post("/api/v1/sessions", json=session).status_code == 201
    stored = app.get("/api/v1/sessions/web-1").json
    assert (stored["transport"], stored["measured_transport"], stored["measured_subflows"]) \
        == ("unknown", "mptcp", 1)
    summary = app.get("/api/v1/sessions/web-1/summary").json
    assert (summary["measured_transport"], summary["measured_subflows"]) == ("mptcp", 1)


def test_the_collector_says_why_it_measured_nothing(listener, tmp_path):
    from mpstream.server.app import create_app

    app = create_app(f"sqlite:///{tmp_path / 'qoe.sqlite3'}").test_client()
    direct = app.post("/api/v1/sessions/web-1/transport").json
    assert direct["measured"] is False and "did not come through mpstream's nginx" in \
        direct["reason"]
    gone = {"X-Forwarded-For": "127.0.0.1", "X-Client-Port": "1",
            "X-Server-Addr": "127.0.0.1", "X-Server-Port": str(listener.getsockname()[1])}
    answer = app.post("/api/v1/sessions/web-1/transport", headers=gone).json
    assert answer["measured"] is False and "no TCP connection from 127.0.0.1:1" in \
        answer["reason"]
    assert app.post("/api/v1/sessions/bad%20id/transport").status_code == 400


def _served(sender: socket.socket, receiver: socket.socket, nbytes: int) -> None:
    """`nbytes` sent from `sender` and read to the end by `receiver` (acknowledged by then)."""
    sender.sendall(b"x" * nbytes)
    got = 0
    while got < nbytes:
        got += len(receiver.recv(1 << 20))


def test_the_paths_of_an_mptcp_client_count_every_connection_of_it(listener):
    first, first_accepted = _connect(listener, IPPROTO_MPTCP)
    second, second_accepted = _connect(listener, IPPROTO_MPTCP)
    with first, first_accepted, second, second_accepted:
        _served(first_accepted, first, 1 << 20)
        _served(second_accepted, second, 1 << 18)
        # Asked on the second connection: the first connection's bytes count too.
        figures = seen.paths(listener.getsockname(), second.getsockname())
    assert [f.address for f in figures] == ["127.0.0.1"]
    path = figures[0]
    assert path.subflows == 2
    assert path.bytes_acked == (1 << 20) + (1 << 18)
    assert path.delivery_bps > 0 and path.rtt_ms > 0
    assert not path.backup and path.waiting_ms == 0
    assert path.as_json()["bytes_acked"] == path.bytes_acked


def test_the_paths_of_a_tcp_client_are_its_tcp_connections_on_path_0(listener):
    mp, mp_accepted = _connect(listener, IPPROTO_MPTCP)
    tcp, tcp_accepted = _connect(listener, socket.IPPROTO_TCP)
    with mp, mp_accepted, tcp, tcp_accepted:
        _served(mp_accepted, mp, 1 << 20)
        _served(tcp_accepted, tcp, 1 << 16)
        figures = seen.paths(listener.getsockname(), tcp.getsockname())
    # The MPTCP connection from the same address is not the TCP client's.
    assert [(f.address, f.subflows, f.bytes_acked) for f in figures] == [("127.0.0.1", 1, 1 << 16)]


def test_the_paths_of_no_such_connection_are_not_found(listener):
    with pytest.raises(seen.NotFound, match=r"no TCP connection from 127\.0\.0\.1:1 to"):
        seen.paths(listener.getsockname(), ("127.0.0.1", 1))


def _info(*, last_ack_recv: int, unacked: int = 0, rate: int = 0, acked: int = 0,
          app_limited: bool = False, rtt_us: int = 1000) -> bytes:
    """A struct tcp_info with the fields a path's figure reads (linux/tcp.h offsets)."""
    raw = bytearray(232)
    # bit 0 of byte 7; bits 1-2 (fastopen_client_fail) set too, which must not read as it
    raw[7] = 0b111 if app_limited else 0b110
    struct.pack_into("=I", raw, 24, unacked)
    struct.pack_into("=I", raw, 56, last_ack_recv)
    struct.pack_into("=I", raw, 68, rtt_us)
    struct.pack_into("=Q", raw, 120, acked)
    struct.pack_into("=Q", raw, 160, rate)
    return bytes(raw)


def _sample(raw: bytes, backup: bool) -> seen._Sample:
    return seen._Sample(tcpinfo.read(raw, *seen._TCPI_READ), backup)


def test_a_paths_rate_is_its_most_recently_acknowledged_subflows():
    idle = _sample(_info(last_ack_recv=5000, rate=1_000_000, acked=10), False)
    busy = _sample(_info(last_ack_recv=20, rate=250_000, acked=5, app_limited=True,
                              rtt_us=40_000), True)
    figure = seen._figure("10.1.1.2", [idle, busy])
    assert figure.address == "10.1.1.2"
    assert figure.delivery_bps == 2_000_000.0  # bytes/s to bit/s
    assert figure.app_limited and figure.rtt_ms == 40.0
    assert figure.bytes_acked == 15 and figure.subflows == 2
    assert figure.backup  # one subflow held is the path held
    assert figure.waiting_ms == 0  # nothing in flight


def test_a_failed_path_shows_how_long_its_data_in_flight_has_waited():
    stuck = _sample(_info(last_ack_recv=3200, unacked=12, rate=500_000), False)
    figure = seen._figure("10.1.1.2", [stuck])
    assert figure.waiting_ms == 3200 and not figure.backup
    # Another connection's subflow still acknowledged on the path: the path works.
    flowing = _sample(_info(last_ack_recv=15, unacked=4, rate=500_000), False)
    assert seen._figure("10.1.1.2", [stuck, flowing]).waiting_ms == 15
