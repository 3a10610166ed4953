"""`mpstream play` as a user runs it: one JSON object with the fields the issue lists, and
Ctrl-C in the middle of a session leaves no browser, server or namespace behind."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mpstream.netem.teardown import netns_pids
from mpstream.proc import pid_alive
from tests.sessions import playing, stack_of
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

MPSTREAM = [sys.executable, "-m", "mpstream.cli"]


def _namespaces(name: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(f"mps-{name}-")]


def test_play_json_reports_summary_and_paths(tiny_media):
    name = f"pc{os.getpid() % 100000}"
    done = subprocess.run(
        [*MPSTREAM, "play", "--media", str(tiny_media), "--player", "hlsjs",
         "--profile", "thesis-bandwidth-balanced", "--transport", "tcp", "--duration", "8",
         "--name", name, "--json"],
        capture_output=True, text=True, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    for field in ("session", "player", "transport", "codec", "startup_delay_ms", "stall_count",
                  "stall_ms", "segments", "mean_download_rate_bps", "mean_bitrate_bps",
                  "errors", "paths"):
        assert field in result, field
    assert result["player"] == "hlsjs" and result["transport"] == "tcp"
    assert result["codec"].startswith("avc1.") and result["errors"] == 0
    assert [p["address"] for p in result["paths"]] == ["10.1.0.2", "10.1.1.2"]
    assert max(p["rx_bytes"] for p in result["paths"]) > 100_000
    assert _namespaces(name) == []


def test_ctrl_c_tears_everything_down(tiny_media):
    name = f"pi{os.getpid() % 100000}"
    session_id = f"e2e-cli-int-{os.getpid()}"
    proc = subprocess.Popen(
        [*MPSTREAM, "play", "--media", str(tiny_media), "--player", "dashjs",
         "--profile", "thesis-bandwidth-balanced", "--duration", "120", "--name", name,
         "--session", session_id],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)  # fmt: skip
    client_ns = f"mps-{name}-client"
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        # Wait for the browser: several processes (browser, renderer, GPU, network) in the
        # client namespace, then a few seconds of playback.
        while time.monotonic() < deadline and len(seen) < 3:
            if client_ns in _namespaces(name):
                seen |= set(netns_pids(client_ns))
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.5)
        assert len(seen) >= 3, "Chromium never started in the client namespace"
        wait_until(lambda: playing(stack_of(proc.pid, tiny_media), session_id), 60,
                   "the session plays", 0.5)
        seen |= set(netns_pids(client_ns))
        # What a terminal does on Ctrl-C: SIGINT to the whole foreground process group.
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, proc.stderr.read()
    assert _namespaces(name) == []
    assert [pid for pid in seen if pid_alive(pid)] == []
