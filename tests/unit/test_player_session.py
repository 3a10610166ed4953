"""Pieces of a playback session that need no browser: the page URL, the namespace wrapper, the
proofs on the wire, the codec checks. The browser itself runs in tests/e2e/test_player_*.py;
the `play` command's checks are in tests/unit/test_play.py."""

import os
import subprocess
import threading
from dataclasses import fields
from types import SimpleNamespace
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from mpstream.errors import UserError
from mpstream.network import Network, PathInfo
from mpstream.player import browsers, session
from mpstream.transports import pathpolicy
from mpstream.transports.base import get_transport


def _request(transport: str = "mptcp", **fields) -> session.PlayRequest:
    return session.PlayRequest(player="dashjs", transport=get_transport(transport),
                               session_id="s-1", duration_s=25.0, **fields)


def test_page_url_carries_every_parameter():
    url = session.page_url("http://10.2.0.2:8080/",
                           _request(scenario="bal anced", trial=3))
    parts = urlsplit(url)
    assert parts.netloc == "10.2.0.2:8080" and parts.path == "/player/index.html"
    assert {k: v[0] for k, v in parse_qs(parts.query).items()} == {
        "src": "/media/dash/manifest.mpd", "player": "dashjs", "session": "s-1",
        "transport": "mptcp", "collector": "/api/v1", "startup_timeout": "30",
        "duration": "25", "scenario": "bal anced", "trial": "3",
    }


def test_page_url_sends_the_optional_parameters_set_in_the_request_order():
    url = session.page_url("http://h:8080", _request(
        "mphttp", collector_url="http://c/api/v1", startup_timeout_s=6.0, buffer_s=12.5,
        target_latency_s=3.0, codec="hevc", abr="bola", abr_params=(("a", 1.5), ("b", 2.0))),
        "http://m/x.mpd")
    assert unquote(urlsplit(url).query).split("&") == [
        "src=http://m/x.mpd", "player=dashjs", "session=s-1", "transport=mphttp",
        "collector=http://c/api/v1", "startup_timeout=6", "seen_by=carrier", "duration=25",
        "buffer=12.5", "target_latency=3", "codec=hevc", "abr=bola", "abr_param=a=1.5",
        "abr_param=b=2"]


@pytest.mark.parametrize(("transport", "seen_by"), [
    ("mptcp", None), ("tcp", None), ("mpquic", "carrier"), ("tcp-hop", "carrier"),
    ("mphttp", "carrier")])
def test_a_transport_carried_beside_the_browser_is_told_to_the_page(transport, seen_by):
    # The server sees only the hop's or the proxy's connections: the page must not show them.
    url = session.page_url("http://10.2.0.2:8080/", _request(transport))
    assert parse_qs(urlsplit(url).query).get("seen_by", [None])[0] == seen_by


@pytest.mark.parametrize(("policy", "held", "spared"), [
    ("deadline", (1,), ["10.1.1.2"]), ("backup", (2, 1), ["10.1.1.2", "10.1.2.2"]),
    ("always", (), []), ("fast-start", (1,), []), ("handover", (1,), [])])
def test_the_page_is_told_the_paths_a_policy_spares(policy, held, spared):
    # Only the policies that keep their paths for when the others cannot carry the video: a
    # path fast-start or handover holds counts for the multipath rule once it is let go.
    paths = [PathInfo(i, f"p{i}", f"10.1.{i}.2", f"p{i}") for i in range(3)]
    request = _request(path_policy=pathpolicy.policy_named(policy), held_paths=held)
    assert session.spared_addresses(paths, request) == spared
    url = session.page_url("http://h:8080", request, spared=spared)
    assert parse_qs(urlsplit(url).query).get("spared", [None])[0] == (",".join(spared) or None)


def test_of_several_failures_the_session_reports_the_first_in_order():
    order = [f.name for f in fields(session.Failures)]
    assert order == ["page", "browser", "collector", "policy", "carrier", "proof", "codec"]
    for k, name in enumerate(order):  # each wins over all after it, empty reasons are none
        later = {other: f"{other} failed" for other in order[k:]}
        assert session.Failures(**later, **{other: "" for other in order[:k]}).first() == (
            f"{name} failed")
    assert session.Failures(page="", codec=None).first() is None
    # A browser that died left no summary and no MPTCP connection: the browser is named.
    died = session.Failures(browser="Chromium exited during the session",
                            collector="the collector has no summary of session s-1",
                            proof="chromium opened no MPTCP connection")
    assert died.first() == "Chromium exited during the session"


@pytest.mark.parametrize("mptcp", [True, False])
def test_starter_enters_the_namespace_and_passes_arguments(tmp_path, monkeypatch, mptcp):
    monkeypatch.setattr(browsers, "CHROMIUM", "/bin/echo")
    wrap = get_transport("mptcp" if mptcp else "tcp").wrap
    env = browsers.browser_starter_env("mps-x-client", wrap)
    # Stand-ins for `ip netns exec NS` and `mptcpize run` that log themselves and exec the rest.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, skip in (("ip", 3), ("mptcpize", 1)):
        fake = bin_dir / name
        log = f'echo "{name} $*" >> {tmp_path}/calls'
        fake.write_text(f'#!/bin/sh\n{log}\nshift {skip}\nexec "$@"\n')
        fake.chmod(0o755)
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    out = subprocess.run([str(browsers.BROWSER_STARTER), "--a=b c", "--remote-debugging-pipe"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out == "--a=b c --remote-debugging-pipe\n"
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0].startswith("ip netns exec mps-x-client ")
    assert any(c.startswith("mptcpize run /bin/echo") for c in calls) is mptcp


def test_starter_without_its_command_says_what_is_missing():
    env = {k: v for k, v in os.environ.items() if k != browsers.STARTER_VARIABLE}
    proc = subprocess.run([str(browsers.BROWSER_STARTER)], env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 2 and browsers.STARTER_VARIABLE in proc.stderr


def test_browsers_start_while_other_threads_fork(monkeypatch):
    """Competing players start browsers from several threads. A starter script written per
    launch failed here with ETXTBSY (9 of 300 launches) when another thread forked while it was
    open for writing; the fixed starter is never open for writing."""
    monkeypatch.setattr(browsers, "CHROMIUM", "/bin/true")
    stop = threading.Event()

    def fork_until_stopped() -> None:
        while not stop.is_set():
            subprocess.run(["/bin/true"], check=True)

    forkers = [threading.Thread(target=fork_until_stopped) for _ in range(3)]
    for thread in forkers:
        thread.start()
    failures = []
    try:
        for _ in range(300):
            try:
                subprocess.run([str(browsers.BROWSER_STARTER)], check=True,
                               env=browsers.browser_starter_env(None, None))
            except OSError as exc:
                failures.append(exc)
    finally:
        stop.set()
        for thread in forkers:
            thread.join()
    assert failures == []


@pytest.mark.parametrize("kwargs, field", [
    ({"player": "vlc"}, "player"),
    ({"manifest_path": "media/x.mpd"}, "manifest_path"),
])
def test_bad_arguments_name_the_field(kwargs, field):
    args = {"player": "hlsjs", "manifest_path": "/media/hls/master.m3u8"}
    args.update(kwargs)
    with pytest.raises(UserError, match=field):
        session.check_prerequisites(**args)


def test_path_report_gives_deltas_and_shares():
    topo = SimpleNamespace(paths=[
        SimpleNamespace(index=i, client_addr=f"10.1.{i}.2", client_ifname=f"p{i}") for i in (0, 1)])
    before = [{"rx_bytes": 100, "tx_bytes": 10}, {"rx_bytes": 50, "tx_bytes": 5}]
    after = [{"rx_bytes": 3100, "tx_bytes": 110}, {"rx_bytes": 1050, "tx_bytes": 55}]
    paths = session._path_report(topo, before, after)
    assert [(p["address"], p["rx_bytes"], p["tx_bytes"], p["rx_share"]) for p in paths] == [
        ("10.1.0.2", 3000, 100, 0.75), ("10.1.1.2", 1000, 50, 0.25)]


class _CountersNetwork(Network):
    """A client host whose /proc/net/netstat says `after` (MPTcpExt counters)."""

    server_addr = "10.2.0.2"

    def __init__(self, n_paths: int, after: dict[str, int]):
        self._paths = [PathInfo(i, f"path{i}", f"10.1.{i}.2", f"p{i}") for i in range(n_paths)]
        self.after = after

    @property
    def paths(self):
        return self._paths

    def netns(self, host):
        return None

    def path_bytes(self):
        return []

    def capacity_bps(self, paths):
        return None

    def start_events(self):
        pass

    def down(self):
        pass

    def run(self, host, argv, *, wrap=None, **kw):
        names = " ".join(self.after)
        values = " ".join(str(v) for v in self.after.values())
        text = f"TcpExt: A\nTcpExt: 1\nMPTcpExt: {names}\nMPTcpExt: {values}\n"
        return subprocess.CompletedProcess(argv, 0, text, "")


def test_mptcp_proof_needs_mp_capable_and_a_join_per_extra_path():
    mptcp = get_transport("mptcp")
    before = {"MPCapableSYNACKRX": 5, "MPJoinSynAckRx": 2}
    both = {"MPCapableSYNACKRX": 7, "MPJoinSynAckRx": 4}
    assert mptcp.before(_CountersNetwork(2, before)) == before
    proof = mptcp.prove(_CountersNetwork(2, both), before, "firefox")
    assert (proof.counters, proof.problem) == ({"mp_capable": 2, "mp_join": 2}, None)
    proof = mptcp.prove(_CountersNetwork(2, before), before, "firefox")
    assert proof.counters == {"mp_capable": 0, "mp_join": 0}
    assert "firefox opened no MPTCP connection" in proof.problem
    no_join = {"MPCapableSYNACKRX": 6, "MPJoinSynAckRx": 2}
    assert "no MP_JOIN" in mptcp.prove(_CountersNetwork(2, no_join), before, "chromium").problem
    assert mptcp.prove(_CountersNetwork(1, no_join), before, "chromium").problem is None


def test_tcp_proves_nothing_and_uses_the_single_path():
    tcp = get_transport("tcp")
    network = _CountersNetwork(2, {})
    network.single_path = 1
    assert tcp.paths_in_use(network) == [1]
    assert tcp.prove(network, {}, "chromium").problem is None
    assert get_transport("mptcp").paths_in_use(network) == [0, 1]
    assert tcp.wrap(["curl"]) == ["curl"]
    assert get_transport("mptcp").wrap(["curl"]) == ["mptcpize", "run", "curl"]


def test_hop_transports_use_the_paths_of_their_network_mode():
    network = _CountersNetwork(2, {})
    network.single_path = 1
    assert get_transport("mpquic").paths_in_use(network) == [0, 1]
    assert get_transport("mptcp-hop").paths_in_use(network) == [0, 1]
    assert get_transport("quic").paths_in_use(network) == [1]
    assert get_transport("tcp-hop").paths_in_use(network) == [1]


def test_an_unknown_transport_names_the_registered_ones():
    with pytest.raises(UserError, match="choose one of mptcp, tcp"):
        get_transport("sctp")


@pytest.mark.parametrize("support, refused", [
    ({'video/mp4; codecs="hvc1.1.6.L93.90"': False}, True),
    ({'video/mp4; codecs="hvc1.1.6.L93.90"': True}, False),
])
def test_a_codec_the_browser_cannot_decode_is_refused(monkeypatch, tmp_path, support, refused):
    from mpstream.player import codecs

    monkeypatch.setattr(codecs, "content_types", lambda media, player, codec: list(support))
    monkeypatch.setattr(codecs, "probe_support", lambda browser, types: support)
    if refused:
        with pytest.raises(UserError, match=r"--codec hevc: chromium cannot decode .*hvc1"):
            codecs.check_codec("chromium", "hevc", tmp_path, "dashjs")
    else:
        assert codecs.check_codec("firefox", "hevc", tmp_path, "dashjs") == support
    assert codecs.check_codec("chromium", "auto", tmp_path, "dashjs") == {}


def test_a_codec_the_media_lacks_is_refused_without_a_browser(monkeypatch, tmp_path):
    from mpstream.player import codecs

    monkeypatch.setattr(codecs, "content_types", lambda media, player, codec: [])
    monkeypatch.setattr(codecs, "probe_support", lambda *a: pytest.fail("no browser needed"))
    with pytest.raises(UserError, match="no hevc rendition in its HLS renditions"):
        codecs.check_codec("firefox", "hevc", tmp_path, "hlsjs")


def test_codec_family_of_codec_strings():
    from mpstream.player.codecs import family

    assert [family(c) for c in ("avc1.64001f", "hev1.1.6", "HVC1.1.6.L93.90", "mp4a.40.2",
                                None)] == ["avc", "hevc", "hevc", None, None]


@pytest.mark.parametrize("stalled", [True, False])
def test_a_page_that_timed_out_names_the_kernels_receive_stall_when_there_is_one(
        monkeypatch, stalled):
    """The session's failure when the page did not finish: the kernel's MPTCP receive stall
    first, with its figures, when the client is in one (netem/receivestall.py); the page's
    timeout alone otherwise."""
    import contextlib

    from mpstream.netem.receivestall import ReceiveStall

    stall = ReceiveStall(peer="10.2.0.2:8080", held_bytes=131328, buffer_bytes=131072,
                         waiting_bytes=5541120, retransmissions=210, retransmissions_in_gap=4)
    page = SimpleNamespace(console=[], goto=lambda url, timeout: None,
                           evaluate=lambda script: {"state": "playing"})

    def follow(*args):
        raise browsers.BrowserTimeout("the page did not finish")

    monkeypatch.setattr(session, "open_page",
                        lambda *a, **kw: contextlib.nullcontext(page))
    monkeypatch.setattr(session, "_follow", follow)
    monkeypatch.setattr(session, "_collector", lambda *a: None)
    monkeypatch.setattr(session, "_summary", lambda *a: None)
    checked = []
    monkeypatch.setattr(session, "receive_stall",
                        lambda network: checked.append(network) or (stall if stalled else None))
    network = _CountersNetwork(2, {})
    visit = session._visit(network, None, _request(), "http://10.2.0.2:8080/player/")
    assert checked == [network]
    assert visit.failure.endswith("the player page did not finish the session within 50 s")
    assert visit.failure.startswith("kernel MPTCP receive stall") == stalled
    if stalled:
        assert "131328 bytes" in visit.failure and "210 times" in visit.failure


@pytest.mark.parametrize(("state", "said"), [
    (None, "did not load within 60 s"),
    ("loading", "did not load its player library within 45 s"),
    ("starting", "did not start playing within 45 s"),
    ("playing", "did not finish the session within 50 s"),
])
def test_a_page_that_timed_out_says_which_wait_ran_out(state, said):
    """The page's state says which wait ran out: the page's load, its player library (the
    page is still loading), the first frame, or the session's end."""
    assert session._timed_out(_request(), state) == f"the player page {said}"


def test_what_of_the_player_library_arrived_is_bounded_by_what_the_client_received(
        tmp_path, monkeypatch):
    """The page's files asked for (nginx's access log, a torn last line skipped) against the
    bytes the client's paths received: what the page's other files did not take is the most
    of its library (the chunks it imports) that arrived; nginx's own count is what it wrote
    into its sockets, not what arrived, and is not used."""
    import json

    dist = tmp_path / "dist"
    (dist / "chunks").mkdir(parents=True)
    (dist / "index.html").write_text("x" * 1000)
    (dist / "main.js").write_text("x" * 24000)
    (dist / "chunks" / "dashjs-X.js").write_bytes(b"x" * 861393)
    monkeypatch.setattr(session, "DIST_DIR", dist)
    log = tmp_path / "access.jsonl"
    entries = [{"uri": uri, "status": 200, "body_bytes_sent": sent} for uri, sent in (
        ("/player/index.html", 1000), ("/api/v1/health", 36), ("/player/main.js", 24000),
        ("/player/chunks/dashjs-X.js", 861393))]
    log.write_text("".join(json.dumps(e) + "\n" for e in entries) + '{"uri": "/pl')
    assert session.library_shortfall(log, 240_000) == (
        "at most 215 KB of its 861 KB script /player/chunks/dashjs-X.js arrived, the client's "
        "paths receiving 240 KB in all")
    assert session.library_shortfall(log, 2_000_000) is None  # it could all have arrived
    log.write_text("".join(json.dumps(e) + "\n" for e in entries[:3]))
    assert session.library_shortfall(log, 1000) is None  # no library asked for
    assert session.library_shortfall(tmp_path / "missing.jsonl", 0) is None
