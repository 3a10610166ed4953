"""`mpstream serve`: waits until nginx and the collector answer, prints the URLs, and on Ctrl-C
(SIGINT) stops both with nothing left behind."""

import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

from mpstream.proc import pid_alive
from tests.servers import make_tiny_media

REPO = Path(__file__).resolve().parents[2]
MPSTREAM = str(REPO / ".venv" / "bin" / "mpstream")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> set[int]:
    """Every live process below pid (nginx and gunicorn run in their own sessions, so the
    process tree, not the group, finds them)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
    return found


def read_until_ready(proc: subprocess.Popen, timeout_s: float = 90) -> str:
    """What `serve` printed up to its `ready` line (or its end, or the timeout)."""
    lines = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("ready"):
            break
    return "".join(lines)


def start_serve(media: Path, port: int, tmp_path: Path) -> subprocess.Popen:
    """`mpstream serve` of `media` on `port`, its database in `tmp_path`, its output piped."""
    return subprocess.Popen(
        [MPSTREAM, "serve", "--media", str(media), "--port", str(port),
         "--database-url", f"sqlite:///{tmp_path / 'serve.sqlite3'}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    return make_tiny_media(tmp_path_factory.mktemp("media"), seconds=4)


def test_serve_prints_urls_and_stops_cleanly_on_sigint(media, tmp_path):
    port = free_port()
    proc = start_serve(media, port, tmp_path)
    try:
        out = read_until_ready(proc)
        assert "ready" in out, out
        base = f"http://127.0.0.1:{port}"
        assert f"dashboard  {base}/dashboard/" in out
        assert f"API        {base}/api/v1" in out
        assert f"{base}/player/index.html?src=%2Fmedia%2Fhls%2Fmaster.m3u8&player=hlsjs" in out
        assert "dashjs" in out  # the DASH manifest is offered too
        # both answer, through nginx
        assert requests.get(f"{base}/api/v1/health", timeout=5).status_code == 200
        assert requests.get(f"{base}/media/hls/master.m3u8", timeout=5).status_code == 200
        daemons = descendants(proc.pid)
        assert len(daemons) >= 4  # nginx master + workers, gunicorn master + workers
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, rest
        assert "stopped nginx and the collector" in rest
        assert [p for p in daemons if pid_alive(p)] == []
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{base}/", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_without_media_says_what_to_do(tmp_path):
    done = subprocess.run(
        [MPSTREAM, "serve", "--media", str(tmp_path / "nothing")], capture_output=True, text=True
    )
    assert done.returncode == 2
    message = " ".join(done.stderr.split())  # rich wraps long lines
    assert "does not exist" in message and "mpstream encode" in message
    assert "Traceback" not in done.stderr


def test_serve_on_a_busy_port_says_so(media, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [MPSTREAM, "serve", "--media", str(media), "--port", str(port),
             "--database-url", f"sqlite:///{tmp_path / 'busy.sqlite3'}"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    message = " ".join(done.stderr.split())
    assert done.returncode == 2 and "already in use" in message and "--port" in message
    assert "Traceback" not in done.stderr


def test_serve_on_a_folder_without_manifests_warns_and_prints_no_player_url(tmp_path):
    empty = tmp_path / "not-media"
    empty.mkdir()
    proc = start_serve(empty, free_port(), tmp_path)
    try:
        out = read_until_ready(proc)
        assert "ready" in out, out
        message = " ".join(out.split())  # rich wraps long lines
        assert f"warning {empty} has no hls/master.m3u8 nor dash/manifest.mpd" in message
        assert "mpstream encode sample --out DIR" in message
        assert "player/index.html" not in out
        assert not [line for line in out.splitlines() if line.startswith("player")], out
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
