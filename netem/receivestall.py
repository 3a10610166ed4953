"""Kernel MPTCP's receive stall, told apart from a slow network or a stuck browser.

On kernel 6.18 an MPTCP connection's receive path can stop for good. Data arriving on a subflow
goes into the connection's socket while that socket's memory is under its receive buffer, and
into the connection's backlog otherwise; the backlog is moved in only once the memory is back
under the buffer. When out-of-order data (what came on one subflow past a hole that another
subflow has yet to fill) alone fills the buffer, the data that fills the hole lands in the
backlog, the application has nothing to read, the buffer (which autotuning grows only as the
application reads) never grows, and the sender, which sees no data-level acknowledgement,
re-sends at the connection level into the same backlog until the page gives up.

From outside the kernel that state shows in two polls of the client's sockets a moment apart:
an MPTCP connection whose memory is at its receive buffer, with nothing readable (ss's Recv-Q
0), whose data-level sequence (`rcv_nxt`) did not move, while its subflows hold data. A browser
that stopped reading looks different (its data is readable), and so does a slow path (the
sequence moves).
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from mpstream.errors import UserError
from mpstream.netem.sockets import MPTCP_LEVEL, connection_token, parse_ss
from mpstream.network import Network
from mpstream.transports.direct import mptcp_counters

# Long enough for a working connection's data-level sequence to move at any rate a trial
# emulates; short enough to add little to a session that already timed out.
POLL_GAP_S = 1.0
DOCS = "docs/netem.md#the-clients-receive-buffer"


@dataclass(frozen=True)
class Poll:
    """What one look at the client and the server showed: the client's sockets (parse_ss
    dicts) and the server's count of data-level retransmissions (None: the server is not a
    host of ours)."""

    sockets: list[dict]
    server_retransmissions: int | None


@dataclass(frozen=True)
class ReceiveStall:
    peer: str  # the server end of the stalled connection
    held_bytes: int  # the connection's memory: data past the hole
    buffer_bytes: int  # its receive buffer
    waiting_bytes: int  # its subflows' memory: data that cannot move in
    retransmissions: int | None  # the server's data-level retransmissions so far
    retransmissions_in_gap: int | None  # ... of them between the two polls

    def reason(self) -> str:
        resent = ("" if self.retransmissions is None else
                  f"; the server re-sent at the connection level {self.retransmissions} times "
                  f"(MPTcpExtMPTCPRetrans), {self.retransmissions_in_gap} of them in the last "
                  f"{POLL_GAP_S:g} s")
        return (f"kernel MPTCP receive stall: the client's connection to {self.peer} holds "
                f"{self.held_bytes} bytes of out-of-order data at its {self.buffer_bytes}-byte "
                f"receive buffer and has none for the page to read, while "
                f"{self.waiting_bytes} bytes wait in its subflows{resent} ({DOCS})")


def stalled_connection(before: Poll, after: Poll) -> ReceiveStall | None:
    """The first client MPTCP connection that was stalled across the two polls (None: none
    was)."""
    earlier = {connection_token(s): s for s in before.sockets if s.get("mptcp") == MPTCP_LEVEL}
    for conn in after.sockets:
        token = connection_token(conn)
        if conn.get("mptcp") != MPTCP_LEVEL or token not in earlier:
            continue
        was = earlier[token]
        if (conn.get("rcv_nxt") is None or conn["rcv_nxt"] != was.get("rcv_nxt")
                or conn.get("recv_q", 0) > 0 or conn.get("rmem", 0) < conn.get("rcvbuf", 1)):
            continue
        waiting = sum(s.get("rmem", 0) for s in after.sockets
                      if s.get("mptcp") == 1 and connection_token(s) == token)
        if waiting == 0:
            continue
        gap = (None if after.server_retransmissions is None
               or before.server_retransmissions is None
               else after.server_retransmissions - before.server_retransmissions)
        return ReceiveStall(peer=conn["peer"], held_bytes=conn["rmem"],
                            buffer_bytes=conn["rcvbuf"], waiting_bytes=waiting,
                            retransmissions=after.server_retransmissions,
                            retransmissions_in_gap=gap)
    return None


def poll(network: Network) -> Poll:
    """The client's TCP and MPTCP sockets, and the server's data-level retransmissions."""
    listing = network.run("client", ["ss", "-tMinmH"], capture_output=True, text=True,
                          timeout=10)
    return Poll(parse_ss(listing.stdout), _server_retransmissions(network))


def receive_stall(network: Network) -> ReceiveStall | None:
    """Whether the client of `network` is in kernel MPTCP's receive stall now (two polls
    POLL_GAP_S apart); a poll that fails is no evidence of one."""
    try:
        before = poll(network)
        time.sleep(POLL_GAP_S)
        return stalled_connection(before, poll(network))
    except (OSError, subprocess.SubprocessError):
        return None


def _server_retransmissions(network: Network) -> int | None:
    try:
        network.netns("server")
    except UserError:  # a real network's server is another host
        return None
    return mptcp_counters(network, "server").get("MPTCPRetrans")
