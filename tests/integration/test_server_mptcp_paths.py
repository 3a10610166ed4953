"""The proof that the server speaks MPTCP: in a two-path topology, an MPTCP client (curl under
mptcpize) fetches a segment from nginx in the server namespace and the bytes arrive over both
client paths, with MP_JOIN subflows accepted by the server; a plain TCP client uses one path."""

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from mpstream.netem.topology import Topology
from mpstream.server.stack import ServerStack
from mpstream.transports.base import get_transport

MPTCP_WRAP = get_transport("mptcp").wrap

SEGMENT_BYTES = 6 * 1024 * 1024


def netstat(topo, host: str) -> dict[str, int]:
    text = topo.run(host, ["cat", "/proc/net/netstat"], capture_output=True, text=True).stdout
    lines = text.splitlines()
    out = {}
    for head, values in zip(lines[::2], lines[1::2], strict=True):
        if head.startswith("MPTcpExt:"):
            out = dict(zip(head.split()[1:], map(int, values.split()[1:]), strict=True))
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    media = tmp_path_factory.mktemp("media")
    (media / "dash").mkdir()
    (media / "dash" / "chunk-big.m4s").write_bytes(os.urandom(SEGMENT_BYTES))
    with (
        Topology.up("np03-2x10", name="srvmp") as topo,
        ServerStack(media, netns=topo.server_ns, host=topo.server_addr, port=8080) as stack,
    ):
        yield topo, stack


def fetch(topo, stack, mptcp: bool) -> list[int]:
    """Bytes received on each client path while curl fetches the segment."""
    before = topo.path_bytes()
    done = topo.run(
        "client",
        ["curl", "-sf", "-o", "/dev/null", "-w", "%{size_download}",
         stack.base_url + "/media/dash/chunk-big.m4s"],
        wrap=MPTCP_WRAP if mptcp else None, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == SEGMENT_BYTES
    after = topo.path_bytes()
    return [a["rx_bytes"] - b["rx_bytes"] for a, b in zip(after, before, strict=True)]


def test_listener_in_the_server_namespace_is_mptcp(served):
    topo, _ = served
    ss = topo.run("server", ["ss", "-Mlnt"], capture_output=True, text=True).stdout
    assert re.search(rf"^mptcp\s+LISTEN.*{re.escape(topo.server_addr)}:8080\b", ss, re.M), ss


def test_mptcp_client_gets_the_segment_over_both_paths(served):
    topo, stack = served
    joins = netstat(topo, "server").get("MPJoinSynRx", 0)
    per_path = fetch(topo, stack, mptcp=True)
    # each path carried a real share of the 6 MiB, not just handshakes
    assert all(b > SEGMENT_BYTES * 0.15 for b in per_path), per_path
    assert netstat(topo, "server")["MPJoinSynRx"] > joins


def test_plain_tcp_client_still_works_on_one_path(served):
    topo, stack = served
    per_path = fetch(topo, stack, mptcp=False)
    assert max(per_path) > SEGMENT_BYTES and min(per_path) < SEGMENT_BYTES * 0.05, per_path


def test_server_logs_are_in_its_workdir_not_the_system(served):
    _, stack = served
    assert stack.access_log.is_file() and not str(stack.access_log).startswith("/var/log")
    assert Path(stack.workdir, "nginx.pid").exists()


def test_serve_in_the_server_namespace(served, tmp_path):
    """`mpstream serve --netns` listens on the namespace's address; a client in the client
    namespace reaches it; SIGINT stops it."""
    topo, stack = served
    mpstream = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "mpstream"
    proc = subprocess.Popen(
        # the topology's name stands for its server namespace
        [str(mpstream), "serve", "--media", str(stack.media_dir), "--netns", topo.name,
         "--port", "8081", "--database-url", f"sqlite:///{tmp_path / 'ns.sqlite3'}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        out = ""
        for line in proc.stdout:
            out += line
            if line.startswith("ready"):
                break
        assert f"API        http://{topo.server_addr}:8081/api/v1" in out, out
        got = topo.run("client", ["curl", "-sf", f"http://{topo.server_addr}:8081/api/v1/health"],
                       wrap=MPTCP_WRAP, capture_output=True, text=True)  # fmt: skip
        assert '"status":"ok"' in got.stdout.replace(" ", "")
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        assert proc.returncode == 0
        ss = topo.run("server", ["ss", "-Mlnt"], capture_output=True, text=True).stdout
        assert ":8081" not in ss
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
