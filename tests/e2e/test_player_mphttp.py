"""dash.js in Chromium plays over `mphttp`: `mpstream play --transport mphttp` on the thesis's
unbalanced paths fetches the media as byte ranges over both (nginx logs them), proven by the
proxy's own count of the bytes each path carried; nothing of the proxy is left afterwards, not
after Ctrl-C and not after kill -9 of `mpstream play` (the proxy ends once its parent is
gone)."""

import json
import os
import signal
import subprocess
import sys

import pytest

from mpstream.netem.teardown import netns_pids
from mpstream.proc import pid_alive
from tests.waiting import command_lines, ctrl_c, namespaces_of, wait_until

pytestmark = pytest.mark.timeout(300)

MPSTREAM = [sys.executable, "-m", "mpstream.cli"]


def play_argv(tiny_media, name: str, duration: str) -> list[str]:
    return [*MPSTREAM, "play", "--media", str(tiny_media), "--player", "dashjs",
            "--profile", "thesis-bandwidth-unbalanced", "--transport", "mphttp",
            "--duration", duration, "--name", name, "--json"]


def proxies(name: str) -> list[int]:
    """The mphttp proxies running in the topology's client namespace."""
    found = []
    for pid in netns_pids(f"mps-{name}-client"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"mpstream.transports.mphttp" in fh.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def test_dashjs_plays_over_mphttp_on_both_paths(tiny_media):
    name = f"ph{os.getpid() % 100000}"
    done = subprocess.run(play_argv(tiny_media, name, "12"), capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["transport"] == "mphttp" and result["errors"] == 0
    assert result["scheduler"] == "finish-together"
    assert result["startup_delay_ms"] > 0 and result["segments"] >= 4
    assert result["transport_implementation"].startswith("mphttp")
    proof = result["proof"]
    assert proof["mphttp_paths"] == 2
    assert proof["mphttp_range_requests"] > proof["mphttp_requests"] / 2
    # Both paths carried media, the 25 Mbit/s one most of it (the kernel's counters).
    rx = [p["rx_bytes"] for p in result["paths"]]
    assert min(rx) > 0.05 * sum(rx) and rx[0] > rx[1], rx
    assert namespaces_of(name) == []


def start_playing(tiny_media, name: str) -> tuple[subprocess.Popen[str], list[int]]:
    """`play --transport mphttp` in a session of its own, once its proxy and the browser run."""
    proc = subprocess.Popen(play_argv(tiny_media, name, "120"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    found = wait_until(lambda: proxies(name), 120, "the mphttp proxy runs", 0.2)
    wait_until(lambda: len(command_lines(f"mps-{name}-client")) >= 4, 60,
               "the browser runs beside the proxy", 0.2)
    return proc, found


def test_ctrl_c_stops_the_proxy(tiny_media):
    name = f"pi{os.getpid() % 100000}"
    proc, found = start_playing(tiny_media, name)
    ctrl_c(proc)
    assert [pid for pid in found if pid_alive(pid)] == []
    assert namespaces_of(name) == []


def test_after_kill_9_the_proxy_ends_and_clean_removes_the_rest(tiny_media):
    name = f"pk{os.getpid() % 100000}"
    proc, found = start_playing(tiny_media, name)
    os.kill(proc.pid, signal.SIGKILL)  # `mpstream play` alone: no teardown runs
    proc.wait()
    try:
        # Its parent gone, the proxy stops by itself, with the topology still up around it.
        wait_until(lambda: not [pid for pid in found if pid_alive(pid)], 10,
                   "the orphaned proxy ends")
    finally:
        # The browser and the topology are left to `mpstream clean`, as after a real kill -9.
        subprocess.run([*MPSTREAM, "clean"], capture_output=True, timeout=120)
    assert namespaces_of(name) == []
