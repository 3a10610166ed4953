"""The QUIC hop's per-path statistics (quic-proxy.jsonl of the client's end, quic-gateway.jsonl
of the server's: mpstream/transports/hop/programs.py) as rows of the kernel sampler's shape, so
that a trial over (multipath) QUIC gets the per-path figures (each path's share of the bytes,
losses, the sender's RTT, the first segment's split) that a trial over MPTCP gets from its
subflows. The kernel's samples of such a trial hold only loopback TCP (browser to proxy,
gateway to server): no path.

One row per statistics line: the socket key is the connection and its path id (ids are never
reused within a connection); bytes_received is what arrived on the path in UDP payload
(acknowledgements of the other direction included, as the kernel's counts its own headers),
retrans_total the packets the sender declared lost, cwnd in packets of the path's MTU.
"""

from __future__ import annotations

from pathlib import Path

from mpstream.jsonlines import read_json_lines
from mpstream.runner.record import TrialRecord
from mpstream.runner.samplers.kernel import SampleRow

FILES = {"client": "quic-proxy.jsonl", "server": "quic-gateway.jsonl"}


def quic_path_samples(trial_dir: Path, record: TrialRecord, t0_unix: float) -> dict[str, list]:
    """host (client, server) -> sample rows of the hop's QUIC paths; empty when the trial did
    not run over QUIC. A path is placed by the client address it was opened from: the proxy's
    `opened` event and statistics name it (the statistics of a path may not, when the path was
    established before the proxy had recorded its address), and the gateway's lines are matched
    by path id. On one path every line is that path's."""
    every = {host: read_json_lines(Path(trial_dir) / name) for host, name in FILES.items()}
    # The statistics lines; a path's `discarded` event repeats its last figures.
    lines = {host: [x for x in found if "rtt_ms" in x and "event" not in x]
             for host, found in every.items()}
    by_addr = {p.client_addr: p.index for p in record.paths if p.client_addr}
    single = record.paths_in_use[0] if len(record.paths_in_use) == 1 else None
    path_of_id: dict[int, int] = {}
    for x in every["client"]:
        if "path" in x and str(x.get("local")) in by_addr:
            path_of_id[x["path"]] = by_addr[str(x["local"])]
    out: dict[str, list[SampleRow]] = {}
    for host, stats in lines.items():
        rows = []
        for x in stats:
            path = path_of_id.get(x["path"], single)
            mtu = x.get("mtu") or 1200
            rows.append({
                "t_s": float(x["t"]) - t0_unix, "host": host, "path": path,
                "local": f"quic:{x.get('side', host)}:{x.get('conn')}",
                "peer": f"path:{x['path']}", "state": "ESTAB", "mptcp": 0, "token": "",
                "bytes_sent": int(x.get("udp_tx_bytes", 0)),
                "bytes_acked": 0,
                "bytes_received": int(x.get("udp_rx_bytes", 0)),
                "bytes_retrans": int(x.get("lost_bytes", 0)),
                "retrans_total": int(x.get("lost_packets", 0)),
                "rtt_ms": float(x["rtt_ms"]), "cwnd": int(x.get("cwnd", 0)) // mtu,
                "cc": "", "rmem": 0, "rcvbuf": 0, "wmem": 0, "sndbuf": 0, "notsent": 0,
                "unacked": 0,
            })
        out[host] = sorted(rows, key=lambda r: r["t_s"])
    return out
