"""Real hosts, no emulator: two network namespaces made here play a server host and a client host
with two interfaces each, joined through a third namespace that bridges each pair of links, as an
access router would (a tbf on its client-facing port is the access link's bottleneck: shaped on
the server's own interface, its drops would be local ones, which the server's TCP meets with a
storm of failed retransmissions no real network makes, stalling MPTCP for whole timeouts).
`mpstream serve --listen` runs on one, `mpstream play --url --interfaces` on the other, as a user
runs them on two machines. The client host's MPTCP endpoints and limits, rules and routes are the
same before and after a session: when it succeeds, when it fails, on Ctrl-C, and after a SIGKILL
once `mpstream clean` has run. Manifests made by ffmpeg with options the encoder does not use
(fMP4 HLS, single-file DASH with byte ranges) play with a full record."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mpstream.netem.teardown import netns_pids
from tests.waiting import command_lines, wait_until

# Two hosts' sessions, their failures and interruptions: minutes of proofs, `make
# test-real-networks`.
pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]

TAG = os.getpid() % 100000
HC, HS, HR = f"rhc{TAG}", f"rhs{TAG}", f"rhr{TAG}"
SRV, PORT = "10.78.1.1", 8093
MPSTREAM = [sys.executable, "-m", "mpstream.cli"]


def sh(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def host_state() -> str:
    """What a session may change on the client host, and must put back."""
    done = sh("ip", "netns", "exec", HC, "sh", "-c",
              "ip rule; ip route show table all; ip -6 rule; ip mptcp endpoint show; "
              "ip mptcp limits show")
    return "\n".join(sorted(done.stdout.splitlines()))


def in_client(*argv: str) -> list[str]:
    return ["ip", "netns", "exec", HC, *argv]


def foreign_media(out: Path) -> None:
    """Two trees made straight by ffmpeg: HLS with fMP4 segments (the encoder writes MPEG-TS)
    and DASH as one file per stream addressed by byte ranges (the encoder writes a template)."""
    src = ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-f", "lavfi",
           "-i", "sine=frequency=440", "-t", "14", "-c:v", "libx264", "-preset", "veryfast",
           "-b:v", "2M", "-g", "50", "-keyint_min", "50", "-sc_threshold", "0",
           "-c:a", "aac", "-b:a", "64k"]  # fmt: skip
    (out / "fhls").mkdir(parents=True)
    sh("ffmpeg", "-v", "error", *src, "-f", "hls", "-hls_time", "2", "-hls_playlist_type",
       "vod", "-hls_segment_type", "fmp4", "-master_pl_name", "master.m3u8",
       str(out / "fhls" / "index.m3u8"))
    (out / "fdash").mkdir()
    sh("ffmpeg", "-v", "error", *src, "-f", "dash", "-seg_duration", "2", "-single_file", "1",
       "-use_template", "0", "-use_timeline", "0", str(out / "fdash" / "manifest.mpd"))


@pytest.fixture(scope="module")
def hosts(tiny_media, tmp_path_factory):
    media = tmp_path_factory.mktemp("realhost-media")
    for sub in ("hls", "dash"):
        (media / sub).symlink_to(tiny_media / sub)
    foreign_media(media)
    state_dir = tmp_path_factory.mktemp("mpstream-state")  # the state root
    for ns in (HC, HS, HR):
        sh("ip", "netns", "add", ns)
    server = None
    try:
        for i in (1, 2):
            for end, ns, name in (("c", HC, f"c{i}"), ("s", HS, f"s{i}")):
                sh("ip", "link", "add", f"r{end}{i}-{TAG}", "type", "veth", "peer", "name",
                   f"rr{end}{i}-{TAG}")
                sh("ip", "link", "set", f"r{end}{i}-{TAG}", "netns", ns, "name", name)
                sh("ip", "link", "set", f"rr{end}{i}-{TAG}", "netns", HR, "name", f"to-{name}")
                sh("ip", "-n", ns, "link", "set", name, "up")
            sh("ip", "-n", HC, "addr", "add", f"10.78.{i}.2/24", "dev", f"c{i}")
            sh("ip", "-n", HS, "addr", "add", f"10.78.{i}.1/24", "dev", f"s{i}")
            sh("ip", "-n", HR, "link", "add", f"br{i}", "type", "bridge")
            for port in (f"to-c{i}", f"to-s{i}"):
                sh("ip", "-n", HR, "link", "set", port, "master", f"br{i}", "up")
            sh("ip", "-n", HR, "link", "set", f"br{i}", "up")
            sh("tc", "-n", HR, "qdisc", "add", "dev", f"to-c{i}", "root", "tbf", "rate",
               "20mbit", "burst", "32kb", "latency", "50ms")
        for ns in (HC, HS, HR):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        # Both default routes, as on a laptop with WiFi and LTE.
        sh("ip", "-n", HC, "route", "add", "default", "via", "10.78.1.1", "dev", "c1",
           "metric", "100")
        sh("ip", "-n", HC, "route", "add", "default", "via", "10.78.2.1", "dev", "c2",
           "metric", "200")
        # IPv6 link-local addresses (and their routes) settle after the links come up.
        deadline = time.monotonic() + 10
        while sh("ip", "-n", HC, "-6", "addr", "show", "tentative").stdout.strip():
            assert time.monotonic() < deadline, "IPv6 duplicate address detection never ended"
            time.sleep(0.1)
        log = open(media.parent / f"serve-{TAG}.log", "w")  # noqa: SIM115
        server = subprocess.Popen(
            ["ip", "netns", "exec", HS, *MPSTREAM, "serve", "--media", str(media),
             "--listen", f"{SRV}:{PORT}", "--database-url", f"sqlite:///{media.parent}/s.db"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while subprocess.run(in_client("curl", "-sf", "-o", "/dev/null",
                                       f"http://{SRV}:{PORT}/media/fdash/manifest.mpd")
                             ).returncode != 0:
            assert server.poll() is None, Path(log.name).read_text()
            assert time.monotonic() < deadline, Path(log.name).read_text()
            time.sleep(0.3)
        yield {"state_dir": state_dir, "serve_log": Path(log.name)}
    finally:
        if server is not None:
            server.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(20)
            if server.poll() is None:
                server.kill()
        for ns in (HC, HS, HR):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def play(hosts, url: str, *args: str, popen: bool = False, timeout: float = 120):
    argv = in_client(*MPSTREAM, "play", "--url", url, *args, "--json")
    env = {**os.environ, "MPSTREAM_STATE_DIR": str(hosts["state_dir"])}
    if popen:
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def result_of(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def shares(result: dict) -> dict[str, int]:
    return {p["interface"]: p["rx_bytes"] for p in result["paths"]}


def assert_complete_record(result: dict) -> None:
    assert result["failure"] is None, result.get("console")
    assert result["startup_delay_ms"] > 0
    assert result["segments"] >= 2
    assert result["errors"] == 0
    assert result["mean_download_rate_bps"] > 0 and result["mean_bitrate_bps"] > 0
    assert result["played_s"] > 2


def test_mptcp_session_over_both_interfaces_leaves_the_host_as_it_was(hosts):
    before = host_state()
    result = result_of(play(hosts, f"http://{SRV}:{PORT}/media/dash/manifest.mpd",
                            "--interfaces", "c1,c2", "--duration", "6"))
    assert host_state() == before
    assert_complete_record(result)
    got = shares(result)
    assert list(got) == ["c1", "c2"]
    assert min(got.values()) > 0.1 * sum(got.values()), got
    assert not list(hosts["state_dir"].glob("host-changes/*.json"))


def test_mphttp_session_over_both_interfaces_needs_nothing_of_the_host(hosts):
    """Client-only multipath HTTP: the proxy binds a connection to each interface itself, so
    the host gets no MPTCP endpoint, rule or table, and the server only serves byte ranges."""
    before = host_state()
    result = result_of(play(hosts, f"http://{SRV}:{PORT}/media/dash/manifest.mpd",
                            "--interfaces", "c1,c2", "--transport", "mphttp", "--duration", "6"))
    assert host_state() == before
    assert_complete_record(result)
    assert result["transport"] == "mphttp" and result["proof"]["mphttp_paths"] == 2
    got = shares(result)
    assert list(got) == ["c1", "c2"]
    assert min(got.values()) > 0.1 * sum(got.values()), got
    assert not [line for line in command_lines(HC) if "mpstream.transports.mphttp" in line]


def test_foreign_fmp4_hls_over_tcp_uses_one_interface(hosts):
    before = host_state()
    result = result_of(play(hosts, f"http://{SRV}:{PORT}/media/fhls/master.m3u8",
                            "--interfaces", "c1,c2", "--transport", "tcp", "--duration", "6"))
    assert host_state() == before
    assert_complete_record(result)
    assert result["player"] == "hlsjs" and result["transport"] == "tcp"
    got = shares(result)
    assert got["c1"] > 500_000 and got["c2"] < 0.02 * got["c1"], got


def test_foreign_single_file_dash_with_byte_ranges_plays(hosts):
    manifest = sh(*in_client("curl", "-sf", f"http://{SRV}:{PORT}/media/fdash/manifest.mpd"))
    assert "mediaRange" in manifest.stdout or "indexRange" in manifest.stdout
    result = result_of(play(hosts, f"http://{SRV}:{PORT}/media/fdash/manifest.mpd",
                            "--interfaces", "c1,c2", "--duration", "6"))
    assert_complete_record(result)
    assert result["player"] == "dashjs"
    assert sum(shares(result).values()) > 500_000


def test_a_failed_session_leaves_the_host_as_it_was(hosts):
    before = host_state()
    done = play(hosts, f"http://{SRV}:{PORT}/media/missing/manifest.mpd", "--interfaces",
                "c1,c2", "--duration", "6")
    assert done.returncode != 0
    assert "failed" in done.stderr, done.stderr[-2000:]
    assert host_state() == before


def _started(hosts, proc: subprocess.Popen) -> None:
    """Wait until the session's changes are in place (its endpoint is listed)."""
    deadline = time.monotonic() + 60
    while "subflow" not in sh(*in_client("ip", "mptcp", "endpoint", "show")).stdout:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # Into the browser's start: Chromium runs in the client host and renders a page.
    wait_until(lambda: any("--type=renderer" in line for line in command_lines(HC)), 60,
               "Chromium renders a page in the client host")


def test_ctrl_c_restores_the_host(hosts):
    before = host_state()
    proc = play(hosts, f"http://{SRV}:{PORT}/media/dash/manifest.mpd", "--interfaces", "c1,c2",
                "--duration", "60", popen=True)
    _started(hosts, proc)
    assert host_state() != before
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert host_state() == before
    assert not list(hosts["state_dir"].glob("host-changes/*.json"))
    deadline = time.monotonic() + 10
    while netns_pids(HC) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not netns_pids(HC), "processes left in the client host"


def test_sigkill_then_mpstream_clean_restores_the_host(hosts):
    before = host_state()
    proc = play(hosts, f"http://{SRV}:{PORT}/media/dash/manifest.mpd", "--interfaces", "c1,c2",
                "--duration", "60", popen=True)
    _started(hosts, proc)
    # The page and collector's folder, named after the session's process (ip netns exec execs).
    page_dirs = f"mps-play-url-{proc.pid}-*"
    assert list(Path(tempfile.gettempdir()).glob(page_dirs))
    proc.kill()
    proc.communicate(timeout=30)
    assert host_state() != before, "nothing to clean: the test did not kill in time"
    assert list(hosts["state_dir"].glob("host-changes/*.json"))
    env = {**os.environ, "MPSTREAM_STATE_DIR": str(hosts["state_dir"])}
    done = subprocess.run(in_client(*MPSTREAM, "clean"), env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "undone" in done.stdout
    assert host_state() == before
    assert not list(hosts["state_dir"].glob("host-changes/*.json"))
    assert not list(Path(tempfile.gettempdir()).glob(page_dirs))
    # The browser and the page's server died with their owner.
    deadline = time.monotonic() + 15
    while netns_pids(HC) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not netns_pids(HC), "processes left in the client host"


def test_paths_check_measures_each_interface_then_the_aggregate(hosts):
    before = host_state()
    env = {**os.environ, "MPSTREAM_STATE_DIR": str(hosts["state_dir"])}
    done = subprocess.run(
        in_client(*MPSTREAM, "paths", "check", "--url",
                  f"http://{SRV}:{PORT}/media/dash/manifest.mpd", "--interfaces", "c1,c2",
                  "--seconds", "4", "--json"),
        env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert host_state() == before
    # Each download's connection is gone when the next one (or whatever follows) starts.
    left = sh(*in_client("ss", "-HntM", "state", "all", "exclude", "time-wait",
                         f"dst {SRV}")).stdout
    assert not left.strip(), left
    out = json.loads(done.stdout)
    # Each link is a 20 Mbit/s bottleneck: alone, each gives about that; together, more. (A loss
    # MPTCP repairs by a timeout stalls both links for a few hundred milliseconds: 4 s keep that
    # from hiding the second link's share.)
    rates = {i["interface"]: i["throughput_bps"] for i in out["interfaces"]}
    assert all(12e6 < r < 22e6 for r in rates.values()), rates
    assert all(i["rtt_ms"] > 0 for i in out["interfaces"])
    agg = out["aggregate"]
    assert agg["throughput_bps"] > 1.4 * max(rates.values()), (agg, rates)
    assert min(agg["interface_rx_bytes"].values()) > 0.2 * sum(agg["interface_rx_bytes"].values())


def test_runner_real_condition_checks_the_paths_around_the_trial(hosts, tmp_path):
    url = f"http://{SRV}:{PORT}/media/dash/manifest.mpd"
    (tmp_path / "real.toml").write_text(f"""
name = "real-test"
trials = 1
duration_s = 5
players = ["dashjs"]

[[conditions]]
label = "two-links"
kind = "real"
url = "{url}"
interfaces = "c1,c2"
check_s = 1
""")
    before = host_state()
    env = {**os.environ, "MPSTREAM_STATE_DIR": str(hosts["state_dir"])}
    out = tmp_path / "run"
    done = subprocess.run(in_client(*MPSTREAM, "run", str(tmp_path / "real.toml"), "--out",
                                    str(out)), env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert host_state() == before
    [trial] = list((out / "trials").glob("*/trial.json"))
    meta = json.loads(trial.read_text())
    assert meta["status"] == "ok", meta.get("reason")
    for when in ("before", "after"):
        check = meta["path_checks"][when]
        assert [i["interface"] for i in check["interfaces"]] == ["c1", "c2"]
        assert all(i["throughput_bps"] > 1e6 for i in check["interfaces"]), check
    assert json.loads((trial.parent / "summary.json").read_text())["segments"] >= 2
    assert (trial.parent / "events.json").is_file()
    html = (out / "report" / "report.html").read_text()
    assert "Real paths" in html and "mptcp aggregate" in html
