"""Parsing of `ss -tinHe` output into per-subflow rows (the real ss runs in the integration test
tests/integration/test_runner_sampler.py; the parser is netem/sockets.py)."""

import csv
import io

from mpstream.netem.sockets import MPTCP_LEVEL, parse_ss, split_host_port
from mpstream.runner.metrics.common import binned_by_path
from mpstream.runner.samplers.kernel import (
    DESTROYED,
    FIELDS,
    SubflowSampler,
    read_samples,
    socket_rows,
)

SS = (
    "ESTAB 0      131072          10.0.1.2:40082          10.9.0.1:8080 "
    "ino:0 sk:1c cgroup:/ <->\n"
    "\t bbr wscale:10,10 rto:204 rtt:12.5/0.004 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 "
    "cwnd:12 ssthresh:19 bytes_sent:2742878168 bytes_retrans:65459 bytes_acked:2742681638 "
    "segs_out:62564 segs_in:21698 data_segs_out:62562 bbr:(bw:35717997160bps,mrtt:0.004,"
    "pacing_gain:1.25,cwnd_gain:2) send 139697066667bps lastrcv:1000 unacked:3 retrans:0/7 "
    "dsack_dups:1 tcp-ulp-mptcp flags:Mmec token:0000(id:0)/3906f9d0(id:0) seq:b2 sfseq:1\n"
    "ESTAB 0      0      [::ffff:10.0.2.2]:41000  [::ffff:10.9.0.1]:8080 ino:5 sk:1d <->\n"
    "\t cubic wscale:7,7 rto:204 rtt:30.25/2 ato:40 mss:1448 cwnd:10 bytes_sent:164 "
    "bytes_acked:165 bytes_received:4000 segs_out:7\n"
    "TIME-WAIT 0 0 127.0.0.1:5000 127.0.0.1:6000 timer:(timewait,59sec,0)\n"
)


def test_parse_ss_reads_counters_rtt_cwnd_and_mptcp_marks():
    socks = parse_ss(SS)
    assert len(socks) == 3
    a, b, c = socks
    assert a["state"] == "ESTAB" and a["local"] == "10.0.1.2:40082"
    assert a["bytes_sent"] == 2742878168 and a["bytes_acked"] == 2742681638
    assert a["bytes_retrans"] == 65459 and a["retrans_total"] == 7
    assert a["rtt_ms"] == 12.5 and a["cwnd"] == 12 and a["cc"] == "bbr"
    assert a["mptcp"] == 1 and a["token"].startswith("0000(id:0)/3906f9d0")
    assert "bytes_received" not in a
    assert b["bytes_received"] == 4000 and b["rtt_ms"] == 30.25 and "mptcp" not in b
    assert c["state"] == "TIME-WAIT" and "rtt_ms" not in c


def test_split_host_port_handles_mapped_v6_and_scope():
    assert split_host_port("[::ffff:10.0.2.2]:41000") == ("10.0.2.2", 41000)
    assert split_host_port("10.0.1.2%veth0:80") == ("10.0.1.2", 80)
    assert split_host_port("[fe80::1]:22") == ("fe80::1", 22)


def test_rows_name_the_path_from_the_client_side_address(tmp_path):
    paths = {"10.0.1.2": 0, "10.0.2.2": 1}.get
    client = socket_rows(parse_ss(SS), t_s=1.25, host="client", path_of=paths)
    assert [r["path"] for r in client] == [0, 1, ""]
    # In the server namespace the client address is the peer.
    swapped = SS.replace("10.0.1.2:40082          10.9.0.1:8080",
                         "10.9.0.1:8080          10.0.1.2:40082")
    server = socket_rows(parse_ss(swapped), t_s=1.25, host="server", path_of=paths)
    assert server[0]["path"] == 0
    out = tmp_path / "s.csv"
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(client)
    back = read_samples(out)
    assert back[0]["t_s"] == 1.25 and back[0]["retrans_total"] == 7 and back[0]["path"] == 0
    assert back[2]["path"] is None and back[2]["rtt_ms"] is None


# What `ss -E -tinHe` prints as sockets are freed: the first subflow of an MPTCP connection as
# the kernel reset it (tcp_disconnect: peer port gone, counters zero) and a subflow freed with
# its final counters.
SS_DESTROY = (
    "UNCONN 0      2672822                 *:5301 [::ffff:10.1.0.2]:*     ino:0 sk:100c\n"
    "\t rto:1000 mss:536 cwnd:10 lastsnd:632 app_limited\n"
    "UNCONN 1      0      10.1.1.2%p1:59229 10.2.0.2:5301 ino:0 sk:100e\n"
    "\t ts sack cubic wscale:10,10 rto:204 rtt:10.3/2.1 mss:1428 cwnd:10 bytes_sent:38 "
    "bytes_acked:38 bytes_received:7286520 segs_out:2600\n"
)


class _FakeEvents:
    def __init__(self, text):
        self.stdout = io.StringIO(text)


def test_destroy_events_become_rows_with_final_counters(tmp_path):
    paths = {"10.1.0.2": 0, "10.1.1.2": 1}.get
    sampler = SubflowSampler(None, "client", tmp_path / "c.csv", paths, t0=0.0)
    out = io.StringIO()
    sampler._writer = csv.DictWriter(out, fieldnames=FIELDS)
    sampler._events = _FakeEvents(SS_DESTROY)
    sampler._follow_destroys()
    rows = list(csv.DictReader(io.StringIO(out.getvalue()), fieldnames=FIELDS))
    assert sampler.destroyed == 2 and len(rows) == 2
    assert {r["state"] for r in rows} == {DESTROYED}
    reset, final = rows
    assert reset["bytes_received"] == "" and reset["peer"] == "[::ffff:10.1.0.2]:*"
    assert final["path"] == "1" and final["bytes_received"] == "7286520"
    assert final["cc"] == "cubic" and float(final["rtt_ms"]) == 10.3


def test_a_destroy_row_adds_the_bytes_after_the_last_poll():
    def row(t, state, received):
        return {"t_s": t, "local": "10.1.1.2:59229", "peer": "10.2.0.2:5301", "path": 1,
                "state": state, "bytes_received": received}

    rows = [row(0.1, "ESTAB", 1_000), row(0.2, "ESTAB", 5_000), row(0.25, DESTROYED, 6_500)]
    assert binned_by_path(rows, "bytes_received", bin_s=1.0) == {1: {0: 6_500}}


# `ss -tinmHe` of a corked server subflow (bytes held, none in flight) and `ss -MinmHe` of the
# client's MPTCP connection socket holding data the page has not read.
SS_MEMORY = (
    "ESTAB 0      88      10.2.0.2:8080 10.1.0.2:52940 ino:2207 sk:1e <->\n"
    "\t skmem:(r0,rb131072,t0,tb658432,f3848,w4344,o0,bl0,d0) ts sack cubic wscale:10,10 "
    "rto:204 rtt:22.5/3 mss:1448 cwnd:81 bytes_sent:1200196 bytes_acked:1200196 notsent:88 "
    "tcp-ulp-mptcp flags:Mec token:0000(id:0)/9c1a(id:0)\n"
)
# `ss -tMinmHe`: with two socket kinds ss puts the netid first; an MPTCP connection's own socket
# (holding data the page has not read) beside its subflow.
SS_BOTH_KINDS = (
    "tcp   ESTAB 0      0      10.1.0.2:52940 10.2.0.2:8080 ino:2207153 sk:568 <->\n"
    "\t skmem:(r0,rb4905931,t0,tb46080,f1920,w0,o0,bl0,d1) ts sack cubic rtt:10.4/3.9 "
    "cwnd:10 bytes_received:1380375 tcp-ulp-mptcp flags:Mmec token:0000(id:0)/9c1a(id:0)\n"
    "mptcp ESTAB 847872 0      10.1.0.2:52940 10.2.0.2:8080 ino:2207153 sk:1425 <->\n"
    "\t skmem:(r847872,rb4905931,t0,tb96256,f6080,w0,o0,bl0,d0) subflows:1 "
    "subflows_max:2 token:9c1a write_seq:ddf6 snd_una:ddf6 rcv_nxt:7a8b\n"
)


def test_socket_memory_notsent_and_unacked_are_read(tmp_path):
    (held,) = parse_ss(SS_MEMORY)
    assert (held["rmem"], held["rcvbuf"], held["sndbuf"], held["wmem"]) == (0, 131072, 658432,
                                                                            4344)
    assert held["notsent"] == 88 and "unacked" not in held  # ss prints unacked only when > 0
    (a, *_) = parse_ss(SS)
    assert a["unacked"] == 3 and "rmem" not in a  # no -m on that line
    rows = socket_rows([held], t_s=0.5, host="server", path_of={"10.1.0.2": 0}.get)
    assert rows[0]["notsent"] == 88 and rows[0]["unacked"] == 0


def test_one_poll_writes_subflows_and_connections_to_their_own_files(tmp_path, monkeypatch):
    import subprocess

    seen = []
    output = {"text": SS_BOTH_KINDS}

    def fake_run(argv, **kw):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, output["text"], "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    sampler = SubflowSampler("ns1", "client", tmp_path / "c.csv", {"10.1.0.2": 0}.get,
                             t0=0.0, mptcp_out=tmp_path / "c-mptcp.csv")
    sampler._fh = (tmp_path / "c.csv").open("w", newline="")
    sampler._writer = csv.DictWriter(sampler._fh, fieldnames=FIELDS)
    sampler._writer.writeheader()
    rows = sampler.sample_once()
    assert seen[0][-2:] == ["ss", "-tMinmHe"]
    sampler._write(rows)
    sampler.stop()
    (subflow,) = read_samples(tmp_path / "c.csv")
    (connection,) = read_samples(tmp_path / "c-mptcp.csv")
    assert subflow["mptcp"] == 1 and subflow["bytes_received"] == 1380375
    assert connection["mptcp"] == MPTCP_LEVEL and connection["token"] == "9c1a"
    assert connection["rmem"] == 847872 and connection["rcvbuf"] == 4905931
    assert connection["path"] == 0 and connection["bytes_received"] == 0  # no counters there

    # A TCP trial's poll lists no connection: no MPTCP file is written.
    output["text"] = SS
    plain = SubflowSampler(None, "client", tmp_path / "t.csv", {}.get, t0=0.0,
                           mptcp_out=tmp_path / "t-mptcp.csv")
    plain._fh = (tmp_path / "t.csv").open("w", newline="")
    plain._writer = csv.DictWriter(plain._fh, fieldnames=FIELDS)
    plain._write(plain.sample_once())
    plain.stop()
    assert not (tmp_path / "t-mptcp.csv").exists()
