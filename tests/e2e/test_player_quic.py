"""dash.js in Chromium plays over the QUIC hop: `mpstream play --transport mpquic` carries the
media over both emulated paths and `--transport quic` over one, proven by the gateway's own
count of QUIC connections and paths; the multipath rule reads each path from the hop's proxy;
nothing of the hop is left running afterwards; a congestion
control the QUIC library lacks is refused before any topology; Ctrl-C stops the hop, and after
kill -9 `mpstream clean` does."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mpstream.netem.teardown import netns_pids
from mpstream.proc import pid_alive
from tests.e2e.test_player_abr_multipath import rule_reads_each_path_from_the_carrier
from tests.waiting import command_lines, ctrl_c, namespaces_of, wait_until

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]  # make test-quic

MPSTREAM = [sys.executable, "-m", "mpstream.cli"]


def play(tiny_media, transport: str, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MPSTREAM, "play", "--media", str(tiny_media), "--player", "dashjs",
         "--profile", "thesis-bandwidth-balanced", "--transport", transport, "--duration", "10",
         "--name", name, "--json", *extra],
        capture_output=True, text=True, timeout=240)  # fmt: skip


@pytest.mark.parametrize(("transport", "paths"), [("mpquic", 2), ("quic", 1)])
def test_dashjs_plays_over_the_quic_hop(tiny_media, transport, paths):
    name = f"pq{os.getpid() % 100000}{paths}"
    done = play(tiny_media, transport, name)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["transport"] == transport and result["errors"] == 0
    assert result["startup_delay_ms"] > 0 and result["segments"] >= 4
    assert result["proof"] == {"quic_connections": 1, "quic_paths": paths}
    assert result["transport_implementation"] == "noq 1.4.0, draft-ietf-quic-multipath-21"
    rx = [p["rx_bytes"] for p in result["paths"]]
    if paths == 2:
        assert min(rx) > 0.1 * sum(rx), rx
    else:
        assert max(rx) > 0.95 * sum(rx), rx
    assert not any("mpstream-quic" in line
                   for host in ("client", "server") for line in command_lines(f"mps-{name}-{host}"))
    left = subprocess.run(["pgrep", "-f", "mpstream-quic"], capture_output=True, text=True)
    assert left.stdout == "", left.stdout


def test_over_mpquic_the_multipath_rule_reads_each_path_from_the_hops_proxy(tiny_media,
                                                                           tmp_path):
    rule_reads_each_path_from_the_carrier(tiny_media, tmp_path, "mpquic")


def test_a_cc_the_quic_library_lacks_is_refused_before_any_topology(tiny_media, tmp_path):
    profile = tmp_path / "lia.toml"
    profile.write_text('mode = "mptcp"\ncc = "lia"\n[[paths]]\nrate = "10mbit"\n'
                       '[[paths]]\nrate = "10mbit"\n')
    name = f"pr{os.getpid() % 100000}"
    done = subprocess.run(
        [*MPSTREAM, "play", "--media", str(tiny_media), "--player", "dashjs",
         "--profile", str(profile), "--transport", "mpquic", "--duration", "5", "--name", name],
        capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode != 0
    assert "'lia' is not one the QUIC library (noq) has" in done.stderr
    assert "cubic, reno, bbr" in done.stderr
    assert namespaces_of(name) == []


def hop_pids() -> set[int]:
    """The hop's processes wherever they run (their binary is build/mpstream-quic)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(entry / "exe")).name == "mpstream-quic":
                    found.add(int(entry.name))
    return found


def start_playing(tiny_media, name: str) -> tuple[subprocess.Popen[str], set[int]]:
    """`play --transport mpquic` in a session of its own, once its hop runs: (play, hop pids)."""
    proc = subprocess.Popen(
        [*MPSTREAM, "play", "--media", str(tiny_media), "--player", "dashjs",
         "--profile", "thesis-bandwidth-balanced", "--transport", "mpquic", "--duration", "120",
         "--name", name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)  # fmt: skip
    def both_ends() -> dict[str, set[int]] | None:
        # The gateway starts first and the proxy once it is ready: wait for one of each, not
        # for any hop process (a lone gateway would be truthy too).
        found = {host: {pid for pid in hop_pids() if pid in netns_pids(f"mps-{name}-{host}")}
                 for host in ("client", "server")}
        return found if all(found.values()) else None

    ends = wait_until(both_ends, 120, "the hop's proxy and gateway run", 0.2)
    ours = ends["client"] | ends["server"]
    wait_until(lambda: len(netns_pids(f"mps-{name}-client")) >= 4, 60,
               "the browser runs beside the proxy", 0.2)
    return proc, set(ours)


def test_ctrl_c_stops_the_hop(tiny_media):
    name = f"pc{os.getpid() % 100000}"
    proc, hop = start_playing(tiny_media, name)
    ctrl_c(proc)
    assert len(hop) == 2
    assert [pid for pid in hop if pid_alive(pid)] == []
    assert namespaces_of(name) == []


def test_kill_9_then_clean_leaves_no_hop(tiny_media):
    name = f"pk{os.getpid() % 100000}"
    proc, hop = start_playing(tiny_media, name)
    # play's trial folder, with the hop's files and the server stack's in it
    tempdirs = f"mps-play-{proc.pid}-*"
    assert list(Path(tempfile.gettempdir()).glob(tempdirs))
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # The hop runs in sessions of its own: the kill leaves it, and clean removes it.
    assert {pid for pid in hop if pid_alive(pid)} == hop
    done = subprocess.run([*MPSTREAM, "clean"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    wait_until(lambda: not any(pid_alive(pid) for pid in hop), 10, "the hop is gone")
    assert not list(Path(tempfile.gettempdir()).glob(tempdirs))
    assert namespaces_of(name) == []
