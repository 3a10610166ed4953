"""A namespace's TCP and MPTCP sockets as `ss` reports them: one dict a socket, with its state,
addresses, counters (tcp_info), memory (skmem) and MPTCP marks. The runner's samplers write
them as CSV rows (runner/samplers/kernel.py); the receive-stall check reads them once at a
session's end (netem/receivestall.py)."""

from __future__ import annotations

import re

from mpstream.netem import coupled

# The `mptcp` mark: 0 a plain TCP socket, 1 an MPTCP subflow, MPTCP_LEVEL an MPTCP connection's
# own socket (`ss -M`: one a connection, beside its subflows).
MPTCP_LEVEL = 2

_STATES = {
    "ESTAB",
    "SYN-SENT",
    "SYN-RECV",
    "FIN-WAIT-1",
    "FIN-WAIT-2",
    "TIME-WAIT",
    "CLOSE-WAIT",
    "LAST-ACK",
    "CLOSING",
    "CLOSED",
    "UNCONN",
}
_INT_FIELDS = {
    "bytes_sent": "bytes_sent",
    "bytes_acked": "bytes_acked",
    "bytes_received": "bytes_received",
    "bytes_retrans": "bytes_retrans",
    "cwnd": "cwnd",
    "notsent": "notsent",
    "unacked": "unacked",
}
# An MPTCP connection's next expected data-level sequence number, which ss prints in hex.
_HEX_FIELDS = ("rcv_nxt",)
_SKMEM = re.compile(r"skmem:\(r(\d+),rb(\d+),t\d+,tb(\d+),f\d+,w(\d+)")
_NETIDS = {"tcp", "mptcp"}
_CCS = ("cubic", "bbr", "reno", "bic", "vegas", "westwood", "htcp", "dctcp",
        *(coupled.kernel_name(cc) for cc in coupled.COUPLED))


def split_host_port(endpoint: str) -> tuple[str, int]:
    """'10.0.1.2:443' / '[::ffff:10.0.1.2]:443' / '10.0.1.2%eth0:443' -> ('10.0.1.2', 443)."""
    host, _, port = endpoint.rpartition(":")
    host = host.strip("[]").split("%", 1)[0]
    if host.startswith("::ffff:"):
        host = host[len("::ffff:") :]
    return host, int(port) if port.isdigit() else 0


def parse_ss(text: str) -> list[dict]:
    """Parses `ss -tinmHe` or `ss -tMinmHe` output (header-less, state column present; with
    two socket kinds ss puts a netid column first: tcp or mptcp) into one dict a socket."""
    sockets: list[dict] = []
    current: dict | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            cols = line.split()
            netid = cols.pop(0) if cols and cols[0] in _NETIDS else "tcp"
            if len(cols) >= 5 and cols[0] in _STATES:
                current = {"state": cols[0], "local": cols[3], "peer": cols[4]}
                if cols[1].isdigit():  # Recv-Q: what the application could read now
                    current["recv_q"] = int(cols[1])
                if netid == "mptcp":
                    current["mptcp"] = MPTCP_LEVEL
                sockets.append(current)
                # `-e` puts uid/ino/sk on this line; nothing there we need.
                continue
            current = None
            continue
        if current is not None:
            _parse_info(line, current)
    return sockets


def _parse_info(line: str, sock: dict) -> None:
    skmem = _SKMEM.search(line)
    if skmem:
        sock["rmem"], sock["rcvbuf"], sock["sndbuf"], sock["wmem"] = map(int, skmem.groups())
    tokens = line.split()
    for tok in tokens:
        if tok in _CCS:
            sock.setdefault("cc", tok)
        key, sep, value = tok.partition(":")
        if not sep:
            continue
        if key in _INT_FIELDS and value.isdigit():
            sock[_INT_FIELDS[key]] = int(value)
        elif key in _HEX_FIELDS and re.fullmatch(r"[0-9a-f]+", value):
            sock[key] = int(value, 16)
        elif key == "rtt":
            m = re.match(r"([\d.]+)/", value)
            if m:
                sock["rtt_ms"] = float(m.group(1))
        elif key == "retrans":
            # retrans:<currently unacknowledged retransmits>/<total retransmits>
            _, _, total = value.partition("/")
            if total.isdigit():
                sock["retrans_total"] = int(total)
        elif key == "token":
            sock["token"] = value
    if "tcp-ulp-mptcp" in tokens:
        sock["mptcp"] = 1


def connection_token(sock: dict) -> str | None:
    """The local token of the MPTCP connection a socket belongs to: an MPTCP connection's own
    socket prints it as `token:T`, each of its subflows as `token:R(id:n)/T(id:m)` (the peer's
    token first): None for a plain TCP socket."""
    token = sock.get("token")
    if not token:
        return None
    return token.rpartition("/")[2].split("(", 1)[0] or None
