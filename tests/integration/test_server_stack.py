"""nginx + collector on loopback, real processes: MIME types and headers, ranges, CORS, the
structured access log with CMCD, the proxied API, MPTCP on the listener, graceful restart,
PostgreSQL behind the stack, a fuzzing run from the OpenAPI document, clean shutdown."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa

from mpstream.proc import child_pids, pid_alive
from mpstream.qoe.collector import CollectorClient, CollectorRefused
from mpstream.qoe.events import BufferData, BufferEvent
from mpstream.scratch import clean_stale_tempdirs
from mpstream.server.accesslog import read_access_log
from mpstream.server.schemas import MAX_BODY_BYTES
from mpstream.server.stack import SUN_PATH_MAX, ServerStack
from tests.servers import make_tiny_media, throwaway_postgres

REPO = Path(__file__).resolve().parents[2]
SESSION = {
    "id": "stack-1", "player": "hlsjs", "player_version": "1.7.4", "protocol": "hls",
    "manifest": "/media/hls/master.m3u8", "scenario": "loopback", "trial": 0,
    "transport": "mptcp", "user_agent": "pytest", "started_at": "2026-11-22T02:00:00Z",
}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    return make_tiny_media(tmp_path_factory.mktemp("media"))


@pytest.fixture(scope="module")
def stack(media):
    with ServerStack(media, port=free_port()) as s:
        yield s


def log_lines(stack):
    return [json.loads(line) for line in stack.access_log.read_text().splitlines()]


def mptcp_counter(name: str) -> int:
    """A counter of the root namespace's MPTCP MIB (/proc/net/netstat, MPTcpExt line)."""
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for head, values in zip(lines[::2], lines[1::2], strict=True):
        if head.startswith("MPTcpExt:"):
            return int(dict(zip(head.split()[1:], values.split()[1:], strict=True))[name])
    raise AssertionError("no MPTcpExt counters: is MPTCP enabled?")


@pytest.mark.parametrize(
    ("path", "mime", "cache"),
    [
        ("/media/hls/master.m3u8", "application/vnd.apple.mpegurl", "no-cache"),
        ("/media/hls/360p/index.m3u8", "application/vnd.apple.mpegurl", "no-cache"),
        ("/media/hls/360p/seg_000.ts", "video/mp2t", "immutable"),
        ("/media/dash/manifest.mpd", "application/dash+xml", "no-cache"),
        ("/media/dash/init-0.m4s", "video/iso.segment", "immutable"),
        ("/media/dash/chunk-0-00001.m4s", "video/iso.segment", "immutable"),
    ],
)
def test_media_types_and_cache_headers(stack, path, mime, cache):
    r = requests.get(stack.base_url + path)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == mime
    assert cache in r.headers["Cache-Control"]
    if cache == "immutable":
        assert "max-age=31536000" in r.headers["Cache-Control"]
    assert r.headers["Access-Control-Allow-Origin"] == "*"
    assert r.headers["Server"] == "nginx"  # server_tokens off: no version


def test_byte_ranges_keepalive_and_no_listing(stack, media):
    seg = media / "hls" / "360p" / "seg_001.ts"
    with requests.Session() as http:
        url = stack.base_url + "/media/hls/360p/seg_001.ts"
        r = http.get(url, headers={"Range": "bytes=10-29"})
        assert r.status_code == 206 and r.content == seg.read_bytes()[10:30]
        assert r.headers["Content-Range"] == f"bytes 10-29/{seg.stat().st_size}"
        r = http.get(stack.base_url + "/media/hls/360p/")
        assert r.status_code == 403 and "seg_000" not in r.text
        assert http.get(stack.base_url + "/media/../../etc/passwd").status_code in (400, 404)
    entries = [e for e in log_lines(stack) if e["uri"] == "/media/hls/360p/"]
    ranged = [e for e in log_lines(stack) if e["range"] == "bytes=10-29"][-1]
    # both requests on one kept-alive connection
    assert entries[-1]["connection"] == ranged["connection"]
    assert entries[-1]["connection_requests"] == ranged["connection_requests"] + 1


def test_cors_preflight(stack):
    r = requests.options(
        stack.base_url + "/media/dash/manifest.mpd",
        headers={"Origin": "http://elsewhere", "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "range"},
    )  # fmt: skip
    assert r.status_code == 204
    assert "Range" in r.headers["Access-Control-Allow-Headers"]
    r = requests.options(stack.api_url + "/sessions",
                         headers={"Access-Control-Request-Method": "POST"})
    assert r.status_code == 204 and "POST" in r.headers["Access-Control-Allow-Methods"]


def test_access_log_is_structured_and_carries_cmcd(stack):
    cmcd_query = "bl=2000,br=800,d=2000,ot=v,sid=\"abc\""
    requests.get(stack.base_url + "/media/dash/chunk-0-00002.m4s", params={"CMCD": cmcd_query})
    requests.get(
        stack.base_url + "/media/dash/chunk-0-00003.m4s",
        headers={"CMCD-Request": "bl=2100", "CMCD-Object": "br=800,d=2000,ot=v",
                 "CMCD-Session": 'sid="abc"', "CMCD-Status": "rtp=1600"},
    )  # fmt: skip
    by_uri = {e["uri"]: e for e in read_access_log(stack.access_log)}
    q = by_uri["/media/dash/chunk-0-00002.m4s"]
    assert requests.utils.unquote(q["cmcd"]) == cmcd_query
    h = by_uri["/media/dash/chunk-0-00003.m4s"]
    assert (h["cmcd_request"], h["cmcd_object"], h["cmcd_session"], h["cmcd_status"]) == (
        "bl=2100", "br=800,d=2000,ot=v", 'sid="abc"', "rtp=1600",
    )  # fmt: skip
    for field in ("msec", "request_time", "bytes_sent", "connection", "connection_requests",
                  "status", "remote_addr"):  # fmt: skip
        assert field in h
    assert h["status"] == 200 and h["bytes_sent"] > 1000 and h["remote_addr"] == "127.0.0.1"
    assert q["cmcd_data"] == {"bl": 2000, "br": 800, "d": 2000, "ot": "v", "sid": "abc"}
    assert h["cmcd_data"] == {"bl": 2100, "br": 800, "d": 2000, "ot": "v", "sid": "abc",
                              "rtp": 1600}  # fmt: skip
    assert re.fullmatch(r"\d+\.\d{3}", f"{h['msec']:.3f}")


def test_api_is_proxied_and_limits_hold(stack):
    assert requests.post(stack.api_url + "/sessions", json=SESSION).status_code == 201
    batch = {"events": [
        {"seq": i, "t_ms": float(i), "type": "buffer", "data": {"level_s": 1.0, "position": i}}
        for i in range(50)
    ]}  # fmt: skip
    url = f"{stack.api_url}/sessions/{SESSION['id']}/events"
    assert requests.post(url, json=batch).json() == {"stored": 50, "duplicates": 0}
    assert requests.post(url, json=batch).json() == {"stored": 0, "duplicates": 50}
    # Past the collector's limit: refused by nginx itself, in JSON, the collector never asked
    # (it would answer before reading the body, and the reset for the unread bytes could beat
    # its answer to nginx: a 502 under load).
    for size in (MAX_BODY_BYTES + 10, 3 * MAX_BODY_BYTES):
        r = requests.post(url, data=b'{"events": [' + b" " * size + b"]}")
        assert r.status_code == 413 and "larger than nginx accepts" in r.json()["error"]
    # (The collector's own limit, for a client of its socket: tests/unit/test_server_api.py.)
    r = requests.post(url, json={"events": [{"seq": 0}]})
    assert r.status_code == 422 and r.json()["field"] == "events[0].type"
    assert "buffer" in requests.get(stack.dashboard_url + f"sessions/{SESSION['id']}").text
    assert requests.get(stack.base_url + "/", allow_redirects=False).status_code == 302


def test_the_collectors_client_posts_and_reads_what_came_after_a_seq(stack):
    """Through nginx and straight over the collector's socket, as the player's driver and the
    path-policy controller use it: typed events posted, only those after a seq read back."""
    session = {**SESSION, "id": "stack-client"}
    assert requests.post(stack.api_url + "/sessions", json=session).status_code == 201
    through_nginx = CollectorClient.at(stack.api_url)
    over_socket = CollectorClient.over_socket(stack.collector_socket)
    buffers = [BufferEvent(seq=i, t_ms=100.0 * i, type="buffer",
                           data=BufferData(level_s=10.0 - i, position=float(i)))
               for i in range(6)]
    assert through_nginx.post_events("stack-client", buffers[:3]) == {"stored": 3,
                                                                      "duplicates": 0}
    assert over_socket.post_events("stack-client", buffers[2:]) == {"stored": 3,
                                                                    "duplicates": 1}
    for client in (through_nginx, over_socket):
        assert client.events_since("stack-client", after=3) == buffers[4:]
        assert client.events_since("stack-client") == buffers
        assert [e["seq"] for e in client.session("stack-client")["events"]] == list(range(6))
        assert client.summary("stack-client")["session"] == "stack-client"
        assert "stack-client" in [s["id"] for s in client.sessions(scenario="loopback")]
        with pytest.raises(CollectorRefused) as refused:
            client.events_since("no-such-session")
        assert refused.value.status == 404
    # The old read of every event is still served, and agrees.
    whole = requests.get(f"{stack.api_url}/sessions/stack-client").json()["events"]
    assert whole == over_socket.session("stack-client")["events"]


def test_listener_is_mptcp_and_both_client_kinds_work(stack, media):
    listeners = subprocess.run(["ss", "-Mlnt"], capture_output=True, text=True).stdout
    assert re.search(rf"^mptcp\s+LISTEN.*127\.0\.0\.1:{stack.port}\b", listeners, re.M)
    url = stack.base_url + "/media/hls/360p/seg_000.ts"
    before = mptcp_counter("MPCapableSYNRX")
    got = subprocess.run(["mptcpize", "run", "curl", "-sf", url], capture_output=True)
    assert got.returncode == 0 and got.stdout == (media / "hls/360p/seg_000.ts").read_bytes()
    assert mptcp_counter("MPCapableSYNRX") > before  # the server side accepted MP_CAPABLE
    # a plain TCP client (no mptcpize) is served by the same listener
    got = subprocess.run(["curl", "-sf", url], capture_output=True)
    assert got.returncode == 0 and got.stdout == (media / "hls/360p/seg_000.ts").read_bytes()


def _listener_sndbuf(port: int) -> int:
    out = subprocess.run(["ss", "-Mlntm"], capture_output=True, text=True).stdout
    block = re.search(rf"127\.0\.0\.1:{port}\b.*?\n\s*skmem:\(([^)]*)\)", out, re.S)
    assert block, out
    return int(re.search(r"\btb(\d+)", block.group(1)).group(1))


def test_send_options_reach_the_listening_socket(stack, media):
    from mpstream.sending import SendOptions

    with ServerStack(media, port=free_port(),
                     send=SendOptions(sndbuf="1m", tcp_nopush=True)) as tuned:
        # SO_SNDBUF as nginx set it (the kernel doubles what it is given); the default stack's
        # listener keeps the kernel's own size
        assert _listener_sndbuf(tuned.port) == 2 * 1024 * 1024
        assert _listener_sndbuf(stack.port) != 2 * 1024 * 1024
        assert tuned.describe()["send"] == {"tcp_nopush": True, "tcp_nodelay": True,
                                            "sndbuf": "1m"}
        url = tuned.base_url + "/media/hls/360p/seg_000.ts"
        got = subprocess.run(["mptcpize", "run", "curl", "-sf", url], capture_output=True)
        assert got.stdout == (media / "hls/360p/seg_000.ts").read_bytes()


def test_collector_graceful_restart_keeps_answering(stack):
    master = stack.collector.pid
    old = child_pids(master)
    assert len(old) >= 2
    stack.reload_collector()
    failures, deadline = 0, time.monotonic() + 30
    while time.monotonic() < deadline:
        failures += requests.get(stack.api_url + "/health").status_code != 200
        now = child_pids(master)
        if now and not now & old and len(now) == len(old):
            break
        time.sleep(0.05)
    assert not (child_pids(master) & old), "old workers still running after HUP"
    assert failures == 0


@pytest.mark.long  # make test-api
def test_stack_on_postgresql(media, tmp_path):
    with throwaway_postgres() as url, ServerStack(media, port=free_port(), database_url=url) as s:
        body = {**SESSION, "id": "pg-1"}
        assert requests.post(s.api_url + "/sessions", json=body).status_code == 201
        ev = {"seq": 0, "t_ms": 5.0, "type": "stall_start", "data": {"position": 1.0}}
        r = requests.post(s.api_url + "/sessions/pg-1/events", json={"events": [ev]})
        assert r.json() == {"stored": 1, "duplicates": 0}
        assert requests.get(s.api_url + "/health").json()["database"] == "postgresql"
        # PostgreSQL's text cannot hold NUL: refused before it reaches the database
        assert requests.get(s.api_url + "/sessions?scenario=a%00b").status_code == 400
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            assert conn.execute(sa.text("select type from events")).scalars().all() == [
                "stall_start"
            ]
        engine.dispose()
        fuzz(s.api_url, tmp_path, examples=10)  # PostgreSQL is stricter than SQLite


def fuzz(api_url: str, cwd: Path, examples: int) -> None:
    """schemathesis from the served OpenAPI document: no input may yield a 5xx."""
    st = shutil.which("schemathesis", path=str(REPO / ".venv" / "bin")) or "schemathesis"
    done = subprocess.run(
        [st, "run", api_url + "/openapi.json", "--url", api_url,
         "--checks", "not_a_server_error,response_schema_conformance",
         "--max-examples", str(examples), "--seed", "1",
         "--phases", "examples,coverage,fuzzing", "--workers", "2",
         "--generation-database", "none", "--no-color"],
        capture_output=True, text=True, timeout=600, cwd=cwd,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:]
    assert "No issues found" in done.stdout
    cases = re.search(r"(\d+) generated, (\d+) passed", done.stdout)
    assert cases and int(cases.group(2)) >= 200, done.stdout[-2000:]  # it really ran


@pytest.mark.long  # make test-api
def test_fuzzing_from_openapi_finds_no_server_error(stack, tmp_path):
    fuzz(stack.api_url, tmp_path, examples=25)


def test_rate_limit_then_stop_leaves_nothing_behind(media):
    port = free_port()
    s = ServerStack(media, port=port, api_rate=2, api_burst=3)
    s.start()
    # nginx's request-rate limit on the API: past the burst, 429 in JSON; media is not limited
    codes = [requests.get(s.api_url + "/sessions").status_code for _ in range(12)]
    assert codes[:3] == [200] * 3 and 429 in codes
    r = requests.get(s.api_url + "/sessions")
    assert r.status_code == 429 and "too many" in r.json()["error"]
    assert requests.get(s.base_url + "/media/hls/master.m3u8").status_code == 200
    pids = {s.nginx.pid, s.collector.pid} | child_pids(s.nginx.pid) | child_pids(s.collector.pid)
    workdir = s.workdir
    s.stop()
    alive = [p for p in pids if pid_alive(p)]
    assert alive == []
    assert not workdir.exists()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/", timeout=2)


def test_a_killed_owner_takes_the_daemons_down(media, tmp_path):
    """If mpstream dies without cleaning up (kill -9), the kernel's parent-death signal
    stops nginx and gunicorn."""
    port = free_port()
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from mpstream.server.stack import ServerStack\n"
        f"s = ServerStack(Path({str(media)!r}), port={port}); s.start()\n"
        "print(s.nginx.pid, s.collector.pid, s.workdir, flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen([str(REPO / ".venv/bin/python"), "-c", script],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        *pids, workdir = owner.stdout.readline().split()
        pids = [int(p) for p in pids]
        assert len(pids) == 2 and Path(workdir).is_dir()
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.1)
        assert not any(Path(f"/proc/{p}").exists() for p in pids)
        # its work directory is swept by the next stack (or explicitly)
        assert any(workdir in line for line in clean_stale_tempdirs(purposes=("server",)))
        assert not Path(workdir).exists()
    finally:
        if owner.poll() is None:
            owner.kill()


def test_collector_socket_is_open_to_nginx_workers_only(media):
    """Private media: workers run as the owner, the socket stays owner-only. World-readable
    media: workers run as www-data, whose group alone gets the socket; requests pass either way."""
    import grp
    import stat

    private_mode = None
    with ServerStack(media, port=free_port()) as s:
        st = s.collector_socket.stat()
        private_mode = stat.S_IMODE(st.st_mode)
        assert requests.get(s.api_url + "/health", timeout=5).status_code == 200
    assert private_mode == 0o700
    public = Path(tempfile.mkdtemp(prefix="mps-public-media-"))
    try:
        public.chmod(0o755)
        shutil.copytree(media, public / "m")
        subprocess.run(["chmod", "-R", "a+rX", str(public)], check=True)
        with ServerStack(public / "m", port=free_port()) as s:
            st = s.collector_socket.stat()
            assert stat.S_IMODE(st.st_mode) == 0o660
            assert grp.getgrgid(st.st_gid).gr_name == "www-data"
            assert requests.get(s.api_url + "/health", timeout=5).status_code == 200
            s.stop_collector()
            s.start_collector()  # a restarted collector's new socket is shared again
            st = s.collector_socket.stat()
            assert stat.S_IMODE(st.st_mode) == 0o660
            assert requests.get(s.api_url + "/health", timeout=5).status_code == 200
    finally:
        shutil.rmtree(public)


def test_a_kept_workdir_loses_only_what_a_running_nginx_needs(media, tmp_path):
    # A trial keeps its server folder (logs, config, database); the gigabyte probe file is
    # sparse here but would be copied whole by a tar from a cluster host, so it goes at stop.
    workdir = tmp_path / "server"
    s = ServerStack(media, port=free_port(), workdir=workdir)
    s.start()
    assert requests.get(s.base_url + "/probe/blob", headers={"Range": "bytes=0-9"},
                        timeout=5).status_code == 206
    assert (workdir / "probe.blob").exists() and (workdir / "tmp").is_dir()
    s.stop()
    left = sorted(p.name for p in workdir.iterdir())
    assert "probe.blob" not in left and "tmp" not in left
    assert {"logs", "nginx.conf"} <= set(left), left
    assert (workdir / "logs" / "access.jsonl").stat().st_size > 0


def test_a_workdir_too_deep_for_a_socket_path_still_serves_the_collector(media, tmp_path):
    # A cluster host's copy of a trial with a long key put the socket past the kernel's 107
    # bytes, and the collector could not bind. Its socket then lives in the temp dir, under a
    # name every handle on that workdir derives, and goes at stop.
    workdir = tmp_path / ("d" * 60) / "trials" / "r00-mptcp-unbalanced-dashjs-robustmpc" / "server"
    assert len(str(workdir / "collector.sock")) > SUN_PATH_MAX
    s = ServerStack(media, port=free_port(), workdir=workdir)
    s.start()
    try:
        sock = s.collector_socket
        assert sock.parent == Path(tempfile.gettempdir()) and len(str(sock)) <= SUN_PATH_MAX
        assert ServerStack(media, workdir=workdir).collector_socket == sock
        assert CollectorClient.over_socket(sock).health()["status"] == "ok"
        assert requests.get(s.api_url + "/health", timeout=5).status_code == 200
    finally:
        s.stop()
    assert not sock.exists()
    short = ServerStack(media, workdir=tmp_path / "server")
    assert short.collector_socket == tmp_path / "server" / "collector.sock"
