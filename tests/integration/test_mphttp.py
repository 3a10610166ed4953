"""The client-only multipath HTTP proxy (mpstream/transports/mphttp/) on real namespaces: curl in
the client namespace fetches files from nginx in the server namespace through it, over the thesis's
unbalanced paths (25 and 5 Mbit/s). Both paths carry each large file, which arrives byte for
byte; nginx logs the Range requests from both client addresses; a request with a Range of its
own passes through as it is; the proxy says what each path carries; a path taken down
mid-transfer does not hang the download; the proxy stops on SIGTERM and leaves nothing, and ends
by itself when its parent is killed."""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from mpstream.netem.profile import load_profile, profile_from_dict
from mpstream.netem.topology import Topology
from mpstream.proc import pid_alive
from mpstream.server.stack import ServerStack
from mpstream.transports.mphttp import MultipathHTTPProxy
from tests.pathbytes import cut_path0_during
from tests.waiting import command_lines, wait_until

pytestmark = pytest.mark.timeout(300)

FILE_BYTES = 6 * 1024 * 1024
PORT = 8080


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    media = tmp_path_factory.mktemp("media")
    (media / "dash").mkdir()
    (media / "dash" / "big.m4s").write_bytes(os.urandom(FILE_BYTES))
    (media / "dash" / "huge.m4s").write_bytes(os.urandom(3 * FILE_BYTES))
    return media


@pytest.fixture(scope="module")
def unbalanced(media):
    with (
        Topology.up(load_profile("thesis-bandwidth-unbalanced"),
                    name=f"mh{os.getpid()}") as topo,
        ServerStack(media, netns=topo.server_ns, host=topo.server_addr, port=PORT) as stack,
    ):
        yield topo, stack


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(topo, url: str, out, *extra: str, timeout: float = 120) -> tuple[str, list[int]]:
    """curl's status and size, and the bytes each client path received meanwhile."""
    before = [p["rx_bytes"] for p in topo.path_bytes()]
    done = topo.run("client", ["curl", "-s", "-o", str(out), "-w", "%{http_code} %{size_download}",
                               *extra, url], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    after = [p["rx_bytes"] for p in topo.path_bytes()]
    return done.stdout, [a - b for a, b in zip(after, before, strict=True)]


def access_lines(stack) -> list[dict]:
    return [json.loads(line) for line in stack.access_log.read_text().splitlines() if line]


def stats(proxy) -> list[dict]:
    return [json.loads(line) for line in proxy.stats.read_text().splitlines() if line]


def test_both_paths_carry_a_file_that_arrives_whole(unbalanced, media, tmp_path):
    topo, stack = unbalanced
    logged = len(access_lines(stack))
    with MultipathHTTPProxy(topo, stack.base_url, tmp_path) as proxy:
        assert proxy.base_url.startswith("http://127.0.0.1:")
        got, per_path = fetch(topo, f"{proxy.base_url}/media/dash/big.m4s", tmp_path / "big")
        assert got == f"200 {FILE_BYTES}"
        assert sha256(tmp_path / "big") == sha256(media / "dash" / "big.m4s")
        # Sized by rate, the 25 Mbit/s path carries most, the 5 Mbit/s one its part.
        assert per_path[0] > 0.5 * FILE_BYTES and per_path[1] > 0.08 * FILE_BYTES, per_path
        proof = proxy.proof()
        assert proof is not None and proof.problem is None, proof
        assert proof.counters["mphttp_paths"] == 2
        assert proxy.problem() is None
    ranges = [x for x in access_lines(stack)[logged:] if x["uri"] == "/media/dash/big.m4s"]
    assert all(x["range"].startswith("bytes=") and x["status"] == 206 for x in ranges), ranges
    assert {x["remote_addr"] for x in ranges} == {p.client_addr for p in topo.paths}
    assert sum(x["body_bytes_sent"] for x in ranges) >= FILE_BYTES
    request = next(x for x in stats(proxy) if x.get("event") == "request")
    assert request["size"] == FILE_BYTES and request["complete"]
    assert sum(request["path_bytes"]) == FILE_BYTES
    assert {p["path"] for p in request["parts"]} == {0, 1}
    assert stats(proxy)[-1]["event"] == "stopped"


def test_a_request_with_its_own_range_passes_through(unbalanced, media, tmp_path):
    topo, stack = unbalanced
    logged = len(access_lines(stack))
    with MultipathHTTPProxy(topo, stack.base_url, tmp_path) as proxy:
        got, _ = fetch(topo, f"{proxy.base_url}/media/dash/big.m4s", tmp_path / "part",
                       "-r", "1000-1099")
        missing, _ = fetch(topo, f"{proxy.base_url}/media/dash/none.m4s", tmp_path / "none")
    assert got == "206 100"
    assert (tmp_path / "part").read_bytes() == (media / "dash" / "big.m4s").read_bytes()[1000:1100]
    assert missing.startswith("404 ")
    lines = access_lines(stack)[logged:]
    assert [x["range"] for x in lines if x["uri"] == "/media/dash/big.m4s"] == ["bytes=1000-1099"]


def test_the_proxy_tells_the_page_what_each_path_carries(unbalanced, tmp_path):
    """The multipath rule's input with this transport (the server sees only connections): after
    a download, each client path with the rate its parts got, the 25 Mbit/s path's above the
    5 Mbit/s one's, and the bytes it received; to a page of another origin too."""
    topo, stack = unbalanced
    with MultipathHTTPProxy(topo, stack.base_url, tmp_path) as proxy:
        fetch(topo, f"{proxy.base_url}/media/dash/big.m4s", tmp_path / "big")
        assert proxy.paths_url == f"{proxy.base_url}/.well-known/mpstream/paths"
        done = topo.run("client", ["curl", "-s", "-D", "-", proxy.paths_url],
                        capture_output=True, text=True, timeout=10)
    last = [x for x in stats(proxy) if "event" not in x and "path" in x][-2:]  # once stopped
    head, _, body = done.stdout.partition("\n\n")  # text mode: CRLF read as LF
    assert head.startswith("HTTP/1.1 200") and "Access-Control-Allow-Origin: *" in head, head
    found = json.loads(body)
    assert found["measured"] is True
    by_address = {p["address"]: p for p in found["paths"]}
    fast, slow = (by_address[p.client_addr] for p in topo.paths)
    assert 8e6 < fast["delivery_bps"] < 30e6 and 1e6 < slow["delivery_bps"] < 6e6, found
    assert [fast["bytes_acked"], slow["bytes_acked"]] == [x["rx_bytes"] for x in last]
    assert fast["waiting_ms"] == slow["waiting_ms"] == 0  # nothing in flight
    assert not fast["backup"] and not slow["backup"]


@pytest.mark.long  # make test-paths
def test_a_path_that_fails_mid_transfer_does_not_hang_the_download(media, tmp_path):
    """Once data flows, the fast path's far end goes down (its interface in the link namespace:
    from then on its packets vanish without a word). The proxy hears nothing on that path,
    takes it for dead, and asks the other path for what it had not delivered."""
    path = {"rate": "10mbit", "delay_ms": 5, "queue_packets": 100}
    profile = profile_from_dict({"mode": "mptcp", "paths": [path, path]}, name="mphttp-fail")
    with (
        Topology.up(profile, name=f"mf{os.getpid()}") as topo,
        ServerStack(media, netns=topo.server_ns, host=topo.server_addr, port=PORT),
        MultipathHTTPProxy(topo, f"http://{topo.server_addr}:{PORT}", tmp_path) as proxy,
    ):
        # 18 MiB at 2 x 10 Mbit/s takes about 8 s.
        code, out = cut_path0_during(topo, [
            "curl", "-s", "-o", str(tmp_path / "huge"), "-w", "%{http_code} %{size_download}",
            f"{proxy.base_url}/media/dash/huge.m4s"], 90)
        assert code == 0 and out == f"200 {3 * FILE_BYTES}", (out, proxy.problem())
        assert proxy.problem() is None
    assert sha256(tmp_path / "huge") == sha256(media / "dash" / "huge.m4s")
    lines = stats(proxy)
    assert any(x.get("event") == "path_down" and x["path"] == 0 for x in lines), lines[-5:]
    request = next(x for x in lines if x.get("event") == "request")
    assert request["complete"] and request["path_bytes"][1] > FILE_BYTES


def test_sigterm_stops_the_proxy_and_leaves_nothing(unbalanced, tmp_path):
    topo, stack = unbalanced
    with MultipathHTTPProxy(topo, stack.base_url, tmp_path) as proxy:
        assert proxy._proc is not None
        pid = proxy._proc.pid
        fetch(topo, f"{proxy.base_url}/media/dash/big.m4s", tmp_path / "big")
    assert not pid_alive(pid)
    assert proxy._proc.returncode == 0, proxy.stderr.read_text()
    assert not [c for c in command_lines(topo.client_ns) if "mpstream.transports.mphttp" in c]
    assert stats(proxy)[-1]["event"] == "stopped"


def test_the_proxy_ends_when_its_parent_is_killed(unbalanced, tmp_path):
    """`mpstream play` killed with -9 runs no teardown: the proxy notices it is orphaned."""
    topo, stack = unbalanced
    parent = subprocess.Popen(topo.command("client", [
        sys.executable, "-c",
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-m', 'mpstream.transports.mphttp', '--upstream', "
        f"'{stack.base_url}', '--path', '0,{topo.paths[0].client_addr}', "
        f"'--exit-with-parent'], stdout=open('{tmp_path}/ready', 'w'))\n"
        "time.sleep(600)\n"]), start_new_session=True)
    try:
        wait_until(lambda: (tmp_path / "ready").exists()
                   and "ready" in (tmp_path / "ready").read_text(), 20, "the proxy is ready")
        running = [c for c in command_lines(topo.client_ns) if "mpstream.transports.mphttp" in c]
        assert running
    finally:
        parent.kill()  # SIGKILL: no teardown runs in it
        parent.wait()
    wait_until(lambda: not [c for c in command_lines(topo.client_ns)
                            if "mpstream.transports.mphttp" in c],
               10, "the orphaned proxy ends")


def test_a_browser_that_gives_up_on_a_download_costs_no_path(unbalanced, media, tmp_path):
    """A player aborts a request it no longer wants (an ABR switch): the proxy drops that
    download's parts, and neither path is taken for failed."""
    topo, stack = unbalanced
    with MultipathHTTPProxy(topo, stack.base_url, tmp_path) as proxy:
        done = topo.run("client", ["curl", "-s", "-o", "/dev/null", "--max-time", "0.5",
                                   f"{proxy.base_url}/media/dash/huge.m4s"], timeout=30)
        assert done.returncode == 28  # curl's own time limit
        got, per_path = fetch(topo, f"{proxy.base_url}/media/dash/big.m4s", tmp_path / "big")
        assert got == f"200 {FILE_BYTES}" and min(per_path) > 0.05 * FILE_BYTES, per_path
        assert proxy.problem() is None
    assert sha256(tmp_path / "big") == sha256(media / "dash" / "big.m4s")
    assert not [x for x in stats(proxy) if x.get("event") == "path_down"]
    huge = next(x for x in stats(proxy) if x.get("event") == "request")
    assert huge["url"] == "/media/dash/huge.m4s" and not huge["complete"]
