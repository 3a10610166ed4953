"""The receive-stall check on hand-written polls, modelled on a stalled trial's client: an MPTCP
connection at its 128 KB buffer with nothing readable, its first subflow holding what the
server re-sent; and the client buffer that keeps a young connection out of it."""

from mpstream.netem.receivestall import Poll, stalled_connection
from mpstream.netem.sockets import connection_token, parse_ss


def listing(*, recv_q: int = 0, rmem: int = 131328, rcvbuf: int = 131072,
            rcv_nxt: str = "cbf3385b86c84694", subflow_rmem: int = 5541120) -> str:
    return f"""\
tcp   ESTAB 0      0         10.1.0.2:60984 10.2.0.2:8080
\t skmem:(r{subflow_rmem},rb{subflow_rmem},t0,tb46080,f0,w0,o0,bl0,d0) mps_lia rtt:16.9/2 \
bytes_received:3432933 tcp-ulp-mptcp flags:Mmec token:0000(id:0)/a30bf5a1(id:0) seq:1 sfseq:1
tcp   ESTAB 0      0      10.1.1.2%p1:56191 10.2.0.2:8080
\t skmem:(r0,rb626688,t0,tb46080,f0,w0,o0,bl0,d0) mps_lia bytes_received:526828 \
tcp-ulp-mptcp flags:Jjec token:85279a81(id:0)/a30bf5a1(id:2) seq:1
tcp   ESTAB 0      0         10.1.0.2:60970 10.2.0.2:8080
\t skmem:(r0,rb131072,t0,tb46080,f0,w0,o0,bl0,d0) mps_lia bytes_received:1069 \
tcp-ulp-mptcp flags:Mmec token:0000(id:0)/82331485(id:0) seq:1
mptcp ESTAB {recv_q}      0         10.1.0.2:60984 10.2.0.2:8080
\t skmem:(r{rmem},rb{rcvbuf},t0,tb96256,f0,w0,o0,bl0,d0) subflows:1 remote_key \
token:a30bf5a1 write_seq:b392aaf50144f789 snd_una:b392aaf50144f789 rcv_nxt:{rcv_nxt}
mptcp ESTAB 0      0         10.1.0.2:60970 10.2.0.2:8080
\t skmem:(r0,rb131072,t0,tb96256,f0,w0,o0,bl0,d0) subflows:1 remote_key \
token:82331485 write_seq:1 snd_una:1 rcv_nxt:cff0f85e3537782f
"""


def polls(retrans=(200, 204), **after) -> tuple[Poll, Poll]:
    return (Poll(parse_ss(listing()), retrans[0]),
            Poll(parse_ss(listing(**after)), retrans[1]))


def test_a_full_buffer_with_nothing_to_read_and_no_progress_is_the_stall():
    stall = stalled_connection(*polls())
    assert stall is not None
    assert (stall.peer, stall.held_bytes, stall.buffer_bytes, stall.waiting_bytes) == (
        "10.2.0.2:8080", 131328, 131072, 5541120)
    assert (stall.retransmissions, stall.retransmissions_in_gap) == (204, 4)
    reason = stall.reason()
    assert "kernel MPTCP receive stall" in reason and "131328 bytes" in reason
    assert "5541120 bytes wait in its subflows" in reason and "204 times" in reason


def test_a_connection_whose_sequence_moved_is_not_stalled():
    assert stalled_connection(*polls(rcv_nxt="cbf3385b86c90000")) is None


def test_readable_data_is_a_reader_that_stopped_not_the_kernel():
    assert stalled_connection(*polls(recv_q=9216)) is None


def test_a_buffer_with_room_is_not_stalled():
    assert stalled_connection(*polls(rmem=65536)) is None


def test_nothing_waiting_in_the_subflows_is_not_stalled():
    assert stalled_connection(*polls(subflow_rmem=0)) is None


def test_without_the_server_the_stall_is_named_without_its_retransmissions():
    stall = stalled_connection(*polls(retrans=(None, None)))
    assert stall is not None and stall.retransmissions is None
    assert "re-sent" not in stall.reason()


def test_the_connection_token_of_a_subflow_is_its_connections_own():
    subflow, _, _, conn, _ = parse_ss(listing())
    assert connection_token(subflow) == connection_token(conn) == "a30bf5a1"
    assert conn["recv_q"] == 0 and conn["rcv_nxt"] == 0xcbf3385b86c84694
    assert connection_token({"token": ""}) is None


def test_the_clients_buffer_keeps_the_kernels_bounds_and_starts_at_4mb():
    from mpstream.netem.system import client_rmem

    assert client_rmem("4096\t131072\t33554432") == "4096 4194304 33554432"
    # A kernel whose maximum is below 4 MB gets it raised, or the initial value would not hold.
    assert client_rmem("4096 131072 1048576") == "4096 4194304 4194304"
