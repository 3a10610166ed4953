"""The server's lookup of a connection's transport (server/seen.py) against real connections on
loopback: an MPTCP client's, a plain TCP client's to the same MPTCP listener, and a pair of
addresses with no connection."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

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
