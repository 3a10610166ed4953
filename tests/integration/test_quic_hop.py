"""The QUIC hop on real namespaces: curl in the client namespace fetches a file from nginx in the
server namespace through the proxy and the gateway (build/mpstream-quic). Multipath QUIC carries
it over both emulated paths, QUIC over one; the TCP and MPTCP arms of the same hop do as their
transports do; a path taken down mid-transfer does not hang the download, and a dead gateway
ends the proxy with the reason. Over paths of unequal delay, each packet scheduler carries a
download whole, and minrtt keeps a download on the low-RTT path that noq's own order splits.
The proxy tells the page what each path carries.
A response that grows while it is sent (chunked, as the low-latency origin's segment being
written) reaches the client chunk by chunk, each as it was written, in every mode.
The gateway's path hold (the path policies' lever for mpquic) moves a running download off a
path and back, each within a second."""

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from mpstream.errors import UserError
from mpstream.netem.profile import profile_from_dict
from mpstream.netem.topology import Topology
from mpstream.server.stack import ServerStack
from mpstream.transports.hop.programs import HopOptions, QuicHop
from tests.chunkedserver import chunk_body
from tests.pathbytes import cut_path0_during, moved, rx, seconds_until, still
from tests.waiting import wait_until

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]  # make test-quic

FILE_BYTES = 6 * 1024 * 1024
SMALL_BYTES = 128 * 1024  # fits the fast path's window once a download has opened it
PORT = 8080
GROWING_PORT = 8090  # tests/chunkedserver.py, beside nginx on the server host
ROOT = Path(__file__).resolve().parents[2]
SCHEDULERS = ("lowest-id", "minrtt", "ecf", "redundant-tail")


def two_paths(mode: str):
    path = {"rate": "10mbit", "delay_ms": 5, "queue_packets": 100}
    return profile_from_dict({"mode": mode, "tcp_path": 0, "paths": [path, path]},
                             name=f"hop-{mode}")


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    media = tmp_path_factory.mktemp("media")
    (media / "dash").mkdir()
    (media / "dash" / "big.m4s").write_bytes(os.urandom(FILE_BYTES))
    (media / "dash" / "huge.m4s").write_bytes(os.urandom(3 * FILE_BYTES))
    (media / "dash" / "small.m4s").write_bytes(os.urandom(SMALL_BYTES))
    return media


@pytest.fixture(scope="module")
def mptcp_net(media):
    """A two-path topology whose client has MPTCP endpoints (the mpquic, quic, tcp and mptcp
    arms all run on it: the QUIC ones ignore the endpoints)."""
    with (
        Topology.up(two_paths("mptcp"), name=f"hop{os.getpid()}") as topo,
        ServerStack(media, netns=topo.server_ns, host=topo.server_addr, port=PORT),
    ):
        yield topo


@pytest.fixture(scope="module")
def unequal_net(media):
    """Two 20 Mbit/s paths, path 0 with the larger delay: 40 ms each way against path 1's 2 ms
    (path 1's queue, 100 packets, adds at most 60 ms: it stays the faster path under load)."""
    paths = [{"rate": "20mbit", "delay_ms": delay, "queue_packets": 100} for delay in (40, 2)]
    profile = profile_from_dict({"mode": "mptcp", "tcp_path": 0, "paths": paths},
                                name="hop-unequal")
    with (
        Topology.up(profile, name=f"hu{os.getpid()}") as topo,
        ServerStack(media, netns=topo.server_ns, host=topo.server_addr, port=PORT),
    ):
        yield topo


def fetch(topo, hop, name="big.m4s", timeout=120, out="/dev/null") -> tuple[int, list[int]]:
    """Bytes curl got through the hop (written to `out`), and the bytes each client path
    received meanwhile."""
    before = [p["rx_bytes"] for p in topo.path_bytes()]
    done = topo.run("client", ["curl", "-sf", "-o", str(out), "-w", "%{size_download}",
                               f"{hop.base_url}/media/dash/{name}"],
                    capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (done.stderr, hop.problem())
    after = [p["rx_bytes"] for p in topo.path_bytes()]
    return int(done.stdout), [a - b for a, b in zip(after, before, strict=True)]


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def gateway_sent(hop, since: float) -> dict[int, dict]:
    """The gateway's first sample of each path taken after `since` (its sampler's clock, unix
    time): waits for one of both paths."""
    def samples():
        first: dict[int, dict] = {}
        for line in lines(hop.gateway_stats):
            if "event" not in line and line["t"] > since:
                first.setdefault(line["path"], line)
        return first if set(first) >= {0, 1} else None
    return wait_until(samples, 10, "the gateway samples both paths")


def test_mpquic_carries_a_download_over_both_paths(mptcp_net, tmp_path):
    with QuicHop(mptcp_net, PORT, HopOptions("mpquic"), tmp_path) as hop:
        assert hop.paths_opened == [0, 1]
        # Idle for longer than a path may stay silent (1 s): the gateway's pings keep both.
        time.sleep(2.5)
        size, per_path = fetch(mptcp_net, hop)
        # What the page's multipath rule reads: the proxy's own figures of each path, fresh
        # from the download (its fastest tenth of a second within the last second).
        asked = mptcp_net.run("client", ["curl", "-sf", str(hop.paths_url)],
                              capture_output=True, text=True, timeout=10)
    assert size == FILE_BYTES
    assert all(b > FILE_BYTES * 0.2 for b in per_path), per_path
    figures = json.loads(asked.stdout)
    assert figures["measured"] and figures["label"] == "mpquic", figures
    by_address = {p["address"]: p for p in figures["paths"]}
    assert set(by_address) == {p.client_addr for p in mptcp_net.paths}, figures
    for figure in by_address.values():
        assert 1e6 < figure["delivery_bps"] < 15e6 and figure["rtt_ms"] >= 10, figures
        assert figure["bytes_acked"] > FILE_BYTES * 0.2 and not figure["backup"], figures
    events = [line["event"] for line in lines(hop.proxy_stats) if "event" in line]
    assert "abandoned" not in events, events
    # The sender's (gateway's) samples of both paths, with the figures the trial records.
    sent = {}
    for line in lines(hop.gateway_stats):
        if "sent_bytes" in line and "event" not in line:
            sent[line["path"]] = line
    assert set(sent) == {0, 1}, sent
    for sample in sent.values():
        assert sample["sent_bytes"] > FILE_BYTES * 0.2
        assert sample["rtt_ms"] >= 10  # two 5 ms links, out and back
        assert sample["cwnd"] > 0 and sample["mtu"] == 1472
    # A qlog per connection and side, finished at the clean stop.
    qlogs = sorted(p.name for p in hop.qlog_dir.iterdir())
    assert any(n.startswith("proxy") for n in qlogs) and any(n.startswith("gateway") for n in qlogs)


def test_quic_uses_one_path(mptcp_net, tmp_path):
    with QuicHop(mptcp_net, PORT, HopOptions("quic"), tmp_path) as hop:
        assert hop.paths_opened == [0]
        size, per_path = fetch(mptcp_net, hop)
    assert size == FILE_BYTES
    assert per_path[0] > FILE_BYTES and per_path[1] < FILE_BYTES * 0.02, per_path


@pytest.mark.parametrize(("mode", "both"), [("mptcp", True), ("tcp", False)])
def test_the_hop_without_quic_speaks_its_transport(mptcp_net, tmp_path, mode, both):
    with QuicHop(mptcp_net, PORT, HopOptions(mode), tmp_path) as hop:
        size, per_path = fetch(mptcp_net, hop)
    assert size == FILE_BYTES
    if both:
        assert all(b > FILE_BYTES * 0.2 for b in per_path), per_path
    else:
        assert per_path[0] > FILE_BYTES and per_path[1] < FILE_BYTES * 0.02, per_path


def test_a_path_that_fails_mid_transfer_does_not_hang_the_download(media, tmp_path):
    """Once data flows, the first path's far end goes down (its interface in the link
    namespace: from then on the client's packets there vanish without a word). The proxy hears
    nothing on that path, abandons it, and the rest of the download comes over the second."""
    with (
        Topology.up(two_paths("mptcp"), name=f"hf{os.getpid()}") as topo,
        ServerStack(media, netns=topo.server_ns, host=topo.server_addr, port=PORT),
        QuicHop(topo, PORT, HopOptions("mpquic"), tmp_path) as hop,
    ):
        # 18 MiB at 2 x 10 Mbit/s takes about 8 s.
        code, out = cut_path0_during(topo, [
            "curl", "-sf", "-o", "/dev/null", "-w", "%{size_download}",
            f"{hop.base_url}/media/dash/huge.m4s"], 60)
        assert code == 0 and int(out) == 3 * FILE_BYTES, hop.problem()
        assert hop.problem() is None
    events = [line for line in lines(hop.proxy_stats) if line.get("event") == "abandoned"]
    assert any(e["path"] == 0 and e["reason"] == "TimedOut" for e in events), events


def test_a_held_path_stops_carrying_within_a_second_and_a_release_brings_it_back(media,
                                                                                 tmp_path):
    """Path 1 (a metered one, say) starts held, as under the backup and deadline policies: the
    download goes over path 0 alone. Released through the gateway's control channel, path 1
    carries the download within a second; held again, it stands still within a second (client
    interface counters, as for kernel MPTCP's endpoint flag). The gateway logs each change."""
    path = {"rate": "10mbit", "delay_ms": 5, "queue_packets": 100}
    profile = profile_from_dict({"mode": "mptcp", "paths": [path, path | {"backup": True}]},
                                name="hop-held")
    with (
        Topology.up(profile, name=f"hh{os.getpid()}") as topo,
        ServerStack(media, netns=topo.server_ns, host=topo.server_addr, port=PORT),
        QuicHop(topo, PORT, HopOptions("mpquic"), tmp_path) as hop,
    ):
        held = topo.paths[1].client_addr
        curl = topo.popen("client", [
            "curl", "-sf", "-o", "/dev/null", "-w", "%{size_download}",
            f"{hop.base_url}/media/dash/huge.m4s"], stdout=subprocess.PIPE, text=True)
        try:
            # 18 MiB: about 15 s over path 0 alone, 8 s over both.
            assert seconds_until(moved(topo, 0, rx(topo, 0), 500_000), 10) is not None
            before = rx(topo, 1)
            assert seconds_until(moved(topo, 0, rx(topo, 0), 1_000_000), 5) is not None
            assert rx(topo, 1) - before < 20_000, "the held path carried the download"
            hop.hold(held, False)
            joined = seconds_until(moved(topo, 1, rx(topo, 1), 150_000), 3)
            hop.hold(held, True)
            left = seconds_until(still(topo, 1), 3)
            with pytest.raises(UserError, match=r"refused `hold cellular`: .*not an IP address"):
                hop.hold("cellular", True)
            out, _ = curl.communicate(timeout=60)
        finally:
            if curl.poll() is None:
                curl.kill()
                curl.wait()
        assert curl.returncode == 0 and int(out) == 3 * FILE_BYTES, hop.problem()
    print(f"held path joined after {joined} s, quiet (0.4 s window) after {left} s")
    # 150 KB at 10 Mbit/s takes 120 ms: the rest is the command reaching the sender.
    assert joined is not None and joined < 1.0, joined
    # Quiet for 0.4 s means the bytes stopped within (left - 0.4) s of the hold.
    assert left is not None and left - 0.4 < 1.0, left
    changes = [(line["event"], line["held"]) for line in lines(hop.gateway_stats)
               if line.get("event") in ("hold", "release")]
    assert changes == [("release", []), ("hold", [held])], changes
    connected = [line for line in lines(hop.gateway_stats) if line.get("event") == "connected"]
    assert connected[0]["held"] == [held]


def test_a_slow_paths_late_packets_do_not_close_the_connection(media, tmp_path):
    """Path 1 is 800 ms each way: each packet noq's order sends there arrives 0.8 s after the
    fast path's of the same moment, and meanwhile path 0 (50 Mbit/s) delivers up to 5 MB of the
    same stream behind that gap. noq 1.4.0 closed the connection once 2048 separate spans
    (about 3 MB of full packets) waited ("too many gaps in stream buffer"; curl got 3.9 MB of
    18 MiB here); the patched limit lets the stream window decide, and the download arrives
    whole."""
    paths = [{"rate": "50mbit", "delay_ms": 5, "queue_packets": 100},
             {"rate": "20mbit", "delay_ms": 800, "queue_packets": 2000}]
    profile = profile_from_dict({"mode": "mptcp", "paths": paths}, name="hop-late")
    with (
        Topology.up(profile, name=f"hl{os.getpid()}") as topo,
        ServerStack(media, netns=topo.server_ns, host=topo.server_addr, port=PORT),
        QuicHop(topo, PORT, HopOptions("mpquic"), tmp_path) as hop,
    ):
        size, per_path = fetch(topo, hop, "huge.m4s")
        assert hop.problem() is None
    assert size == 3 * FILE_BYTES
    assert per_path[1] > 30_000, per_path  # the slow path carried some of it (pings: ~1 KB)
    closed = [line for line in lines(hop.gateway_stats) if line.get("event") == "closed"]
    assert all("gaps" not in line["reason"] for line in closed), closed


def test_a_dead_gateway_ends_the_proxy_with_the_reason(mptcp_net, tmp_path):
    options = HopOptions("quic", idle_timeout_ms=3000)
    with QuicHop(mptcp_net, PORT, options, tmp_path) as hop:
        assert hop._gateway is not None
        os.kill(hop._gateway.pid, signal.SIGKILL)
        t0 = time.monotonic()
        proxy = hop._proxy
        assert proxy is not None
        wait_until(lambda: proxy.poll() is not None, 20, "the proxy notices the gateway is gone")
        assert time.monotonic() - t0 < 10
        problem = hop.problem()
    assert problem is not None and "proxy exited (1)" in problem, problem
    assert "connection to the gateway closed" in problem, problem



@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_each_scheduler_carries_a_download_whole(media, unequal_net, tmp_path, scheduler):
    """Both ends run the scheduler; the gateway names it once, and only a scheduler that sends
    data twice on purpose counts the copies (redundant-tail: the slow path's tail, copied onto
    the fast one when the rest of the file is in flight). The file arrives byte for byte."""
    got = tmp_path / "got.m4s"
    with QuicHop(unequal_net, PORT, HopOptions("mpquic", scheduler=scheduler), tmp_path) as hop:
        size, per_path = fetch(unequal_net, hop, out=got)
        done = gateway_sent(hop, time.time())
    assert size == FILE_BYTES
    assert got.read_bytes() == (media / "dash" / "big.m4s").read_bytes()
    assert sum(per_path) > FILE_BYTES and all(b > 0 for b in per_path), per_path
    for name in (hop.gateway_stats, hop.proxy_stats):
        connected = [line for line in lines(name) if line.get("event") == "connected"]
        assert [line["scheduler"] for line in connected] == [scheduler], connected
    if scheduler == "redundant-tail":
        copies = done[0]["redundant_bytes"] + done[1]["redundant_bytes"]
        assert 0 < copies < FILE_BYTES * 0.2, done
        # The copies go to the fast path; they are counted within its sent bytes.
        assert done[1]["redundant_bytes"] > done[0]["redundant_bytes"], done
        assert done[1]["sent_bytes"] > done[1]["redundant_bytes"]
    else:
        assert all("redundant_bytes" not in line for line in lines(hop.gateway_stats))


def test_minrtt_keeps_a_download_on_the_low_rtt_path_that_lowest_id_splits(unequal_net,
                                                                           tmp_path):
    """noq's own order (lowest-id) offers every packet to path 0 first: once a first download
    has opened both windows, path 0 (40 ms each way) takes a part of each small download that
    follows. minrtt offers them to path 1 (2 ms), which has room for them, and holds path 0
    back meanwhile: they stay on path 1 (seen: all of them), and end sooner. How large
    lowest-id's part is depends on path 0's window after the first download, which its losses
    set and the test does not: path 1 carried 0.45-0.49 in nine runs here and 0.80 in one CI
    run. So the test asserts that path 0 carries a real part under lowest-id (a tenth or more)
    and less under minrtt, a quarter at most (seen: next to nothing), not the part's size.
    Read from the gateway's per-path statistics, as a trial reads them."""
    shares = {}
    for scheduler in ("lowest-id", "minrtt"):
        options = HopOptions("mpquic", scheduler=scheduler)
        with QuicHop(unequal_net, PORT, options, tmp_path / scheduler) as hop:
            fetch(unequal_net, hop)  # opens both windows
            before = gateway_sent(hop, time.time())
            for _ in range(3):
                size, _ = fetch(unequal_net, hop, "small.m4s")
                assert size == SMALL_BYTES
            after = gateway_sent(hop, time.time())
        sent = [after[p]["sent_bytes"] - before[p]["sent_bytes"] for p in (0, 1)]
        assert sum(sent) >= 3 * SMALL_BYTES, sent
        shares[scheduler] = sent[1] / sum(sent)
    assert shares["minrtt"] >= 0.75, shares
    assert shares["lowest-id"] <= 0.9, shares
    assert shares["minrtt"] > shares["lowest-id"], shares


# A response written over 2.5 s: six chunks 0.5 s apart, small (a chunk's header, as CMAF's
# moof) and large (100 kB: half a second of video at 1.6 Mbit/s) in turn.
CHUNKS, EVERY_S = 6, 0.5
# A chunk arrives within this of being written: the paths' round trip (up to 84 ms on the
# unequal paths) and its transmission, well under the 0.5 s before the next chunk is written
# (a hop that waited for the end of the response would hand over the first chunk 2.5 s late).
CHUNK_LAG_S = 0.3


@contextmanager
def growing_server(topo, *more: str):
    """tests/chunkedserver.py in the server namespace: every GET answered with chunked
    transfer, one chunk every 0.5 s, each write's time on its stdout (`more`: its further
    options)."""
    server = topo.popen("server", [
        sys.executable, "-m", "tests.chunkedserver", "--host", topo.server_addr,
        "--port", str(GROWING_PORT), "--chunks", str(CHUNKS), "--every", str(EVERY_S),
        "--sizes", "200,100000", *more], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT)
    try:
        assert server.stdout is not None
        ready = server.stdout.readline()
        assert ready, server.stderr.read() if server.stderr else ""
        yield server
    finally:
        server.terminate()
        server.wait(timeout=10)


def fetch_growing(topo, hop, server) -> tuple[float, float, list[float]]:
    """Through the hop, curl (unbuffered) reads the growing response, line by line: seconds
    from the request to its first chunk and to its last, and each chunk's lag (its arrival at
    the client less its write at the server; one clock, both namespaces)."""
    started = time.time()
    curl = topo.popen("client", ["curl", "-sfN", f"{hop.base_url}/growing"],
                      stdout=subprocess.PIPE)
    arrived, sizes = [], []
    assert curl.stdout is not None
    for line in curl.stdout:
        arrived.append(time.time())
        sizes.append(len(line))
        assert line.startswith(f"{len(arrived) - 1} ".encode()), line[:20]
    assert curl.wait(timeout=30) == 0, hop.problem()
    assert server.stdout is not None
    written = [json.loads(server.stdout.readline()) for _ in range(CHUNKS)]
    assert [w["chunk"] for w in written] == list(range(CHUNKS))
    assert sizes == [w["bytes"] for w in written]
    lags = [a - w["written"] for a, w in zip(arrived, written, strict=True)]
    return arrived[0] - started, arrived[-1] - started, lags


@pytest.mark.parametrize(("net", "mode", "scheduler"), [
    ("mptcp_net", "quic", None),
    ("mptcp_net", "tcp", None),
    ("mptcp_net", "mptcp", None),
    *[("unequal_net", "mpquic", s) for s in SCHEDULERS],
])
def test_a_growing_response_arrives_chunk_by_chunk(request, tmp_path, net, mode, scheduler):
    """The low-latency origin sends the segment being written as it grows, with chunked
    transfer: the hop must hand each chunk on as it arrives, not when the response ends. The
    server writes six chunks 0.5 s apart; through the hop, each reaches curl within
    CHUNK_LAG_S of its write, so the first arrives about 2.5 s before the last (the time to
    first byte is a small part of the whole). A first request opens the windows and the
    stream, as a player's earlier requests would."""
    topo = request.getfixturevalue(net)
    options = HopOptions(mode, scheduler=scheduler or "lowest-id")
    with growing_server(topo) as server, QuicHop(topo, GROWING_PORT, options, tmp_path) as hop:
        fetch_growing(topo, hop, server)
        first, total, lags = fetch_growing(topo, hop, server)
        assert hop.problem() is None
    print(f"{mode} {scheduler or ''}: first chunk after {first:.3f} s, last after {total:.3f} s,"
          f" lags {[round(lag, 3) for lag in lags]}")
    assert max(lags) < CHUNK_LAG_S, lags
    assert total > (CHUNKS - 1) * EVERY_S
    assert first < total / 5, (first, total)


@pytest.mark.parametrize("mode", ["mpquic", "tcp"])
def test_a_growing_response_broken_mid_way_arrives_broken(mptcp_net, tmp_path, mode):
    """The origin breaks a segment that stops growing rather than end it as if whole. Broken
    after two chunks (a reset, no last chunk), the response reaches curl through the hop with
    its first chunk (written half a second before the break) and then the reset: curl reports
    the connection reset (56), as it does straight from the server. What of the second chunk
    had not been sent may be lost with the reset, straight from the server (its unsent bytes)
    as through the hop.
    (The hop used to pass a reset on as an orderly end, and curl said 18, a partial transfer:
    a chunked body's missing last chunk still showed it, a body that the connection's end
    delimits would not have.)"""
    with (
        growing_server(mptcp_net, "--break-after", "2"),
        QuicHop(mptcp_net, GROWING_PORT, HopOptions(mode), tmp_path) as hop,
    ):
        done = mptcp_net.run("client", ["curl", "-sN", f"{hop.base_url}/growing"],
                             capture_output=True, timeout=30)
        assert hop.problem() is None
        direct = mptcp_net.run("client", [
            "curl", "-sN", f"http://{mptcp_net.server_addr}:{GROWING_PORT}/growing"],
            capture_output=True, timeout=30)
    assert (direct.returncode, done.returncode) == (56, 56), (direct, done)
    written = chunk_body(0, 200) + chunk_body(1, 100_000)
    for got in (direct.stdout, done.stdout):
        assert written.startswith(got) and got.startswith(chunk_body(0, 200)), len(got)
