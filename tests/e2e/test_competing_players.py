"""Competing players, end to end: the trial's client and two competing clients (one MPTCP, one
TCP) play the same media at once from one server behind a shared bottleneck, each in a browser
in its own namespace; every session reaches the collector and the trial folder, and the report
gives the MPTCP users' share and Jain's index from what each player downloaded. Interrupted,
the trial leaves none of the competitors' browsers behind."""

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mpstream.netem.teardown import netns_pids
from mpstream.proc import pid_alive
from mpstream.runner.report.build import build_report
from mpstream.runner.run import run_scenario
from mpstream.runner.scenario import load_scenario
from tests.runs import leftover_namespaces, trial_topologies
from tests.waiting import command_lines, wait_until

pytestmark = [pytest.mark.long, pytest.mark.timeout(900)]  # make test-sharing

MPSTREAM = str(Path(sys.executable).parent / "mpstream")


def three_players_profile(folder: Path) -> Path:
    profile = folder / "three-players.toml"
    profile.write_text("""mode = "mptcp"
[[paths]]
rate = "20mbit"
delay_ms = 5
[[paths]]
rate = "20mbit"
delay_ms = 5
[server_link]
rate = "4mbit"
queue_packets = 40
[[competitors]]
name = "mptcp-user"
mode = "mptcp"
paths = [{ rate = "20mbit", delay_ms = 5 }, { rate = "20mbit", delay_ms = 5 }]
[[competitors]]
name = "tcp-user"
mode = "tcp"
paths = [{ rate = "20mbit", delay_ms = 5 }]
""")
    return profile


def scenario_file(tiny_media: Path, folder: Path, duration_s: float) -> Path:
    three_players_profile(folder)
    path = folder / "three-players.scenario.toml"
    path.write_text(f"""name = "three-players"
trials = 1
duration_s = {duration_s}
players = ["dashjs"]
[media]
dir = "{tiny_media}"
[[conditions]]
label = "lia"
profile = "three-players.toml"
set = {{ cc = "lia" }}
""")
    return path


def test_three_players_share_a_bottleneck_and_the_report_says_how(tiny_media, tmp_path):
    out = tmp_path / "run"
    spec = load_scenario(scenario_file(tiny_media, tmp_path, 12))
    statuses = run_scenario(spec, out, progress=False)
    assert list(statuses.values()) == ["ok"], statuses
    [trial] = sorted((out / "trials").iterdir())
    record = json.loads((trial / "trial.json").read_text())
    assert [c["host"] for c in record["competitors"]] == ["user1", "user2"]
    downloaded = []  # media bytes per player: the client (MPTCP), user1 (MPTCP), user2 (TCP)
    for folder in (trial, trial / "user1", trial / "user2"):
        events = json.loads((folder / "events.json").read_text())
        assert any(e["type"] == "startup" for e in events), folder
        assert sum(1 for e in events if e["type"] == "segment") >= 3, folder
        downloaded.append(sum(e["data"].get("bytes") or 0 for e in events
                              if e["type"] == "segment"))
    # Each competitor spoke its own transport, proven on its own namespace's counters.
    mptcp_user = json.loads((trial / "user1" / "summary.json").read_text())
    tcp_user = json.loads((trial / "user2" / "summary.json").read_text())
    assert mptcp_user["transport"] == "mptcp" and mptcp_user["proof"]["mp_join"] >= 1
    assert [p["address"] for p in mptcp_user["paths"]] == ["10.1.2.2", "10.1.3.2"]
    assert min(p["rx_bytes"] for p in mptcp_user["paths"]) > 50_000
    assert tcp_user["transport"] == "tcp" and not tcp_user.get("failure")
    build_report(out)
    rows = {(r["condition"], r["metric"]): r for r in
            csv.DictReader((out / "report" / "conditions.csv").open())}
    # The report's share and Jain's index, (sum x)^2 / (n sum x^2), are those of the bytes each
    # player's own events say it downloaded.
    share = float(rows[("lia", "mptcp_share")]["mean"])
    assert share == pytest.approx(sum(downloaded[:2]) / sum(downloaded), rel=1e-6)
    assert 0.3 < share < 0.95, share  # two MPTCP users of three
    jain = sum(downloaded) ** 2 / (3 * sum(x * x for x in downloaded))
    assert float(rows[("lia", "jain_index")]["mean"]) == pytest.approx(jain, rel=1e-6)
    assert float(rows[("lia", "tcp_user_bitrate_mbps")]["mean"]) > 0
    assert leftover_namespaces(out) == []


def test_ctrl_c_stops_the_competitors_browsers(tiny_media, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [MPSTREAM, "run", str(scenario_file(tiny_media, tmp_path, 120)), "--out", str(out),
         "--no-report"], start_new_session=True, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    def users() -> list[str] | None:
        # The competitors' namespaces, once the run has announced its trial's topology.
        names = trial_topologies(out)
        return [f"mps-{t}-{u}" for t in names for u in ("user1", "user2")] or None

    try:
        # Interrupted while both competitors play: each one's browser has its page open.
        wait_until(lambda: (found := users()) and all(
            any("--type=renderer" in line for line in command_lines(ns)) for ns in found),
            180, "both competitors' browsers have their page open", 0.5)
        seen = {pid for ns in users() or [] for pid in netns_pids(ns)}
        os.killpg(proc.pid, signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert leftover_namespaces(out) == [], output[-2000:]
    # A browser process orphaned by the kill is reparented to init, which may reap it seconds
    # later: a zombie holds nothing (not the namespace, not a socket), so only the live count.
    assert [pid for pid in seen if pid_alive(pid)] == [], output[-2000:]
