"""Per-trial wire evidence without the wire: bad capture settings are refused by name, and the
MPTcpExt counter snapshots report before, after and what changed, and a capture counts as
started on tcpdump's "listening on", whatever it said before (the real tcpdump and nstat run in
tests/integration/test_runner_capture.py)."""

import shlex
import subprocess

import pytest

from mpstream.errors import UserError
from mpstream.runner.samplers import capture
from mpstream.runner.samplers.capture import CounterSnapshots, PacketCapture


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"snaplen": 20}, "snaplen"),
    ({"max_packets": 0}, "max_packets"),
])
def test_bad_capture_settings_name_the_setting(tmp_path, kwargs, named):
    with pytest.raises(UserError, match=named):
        PacketCapture([(None, "lo", "x")], tmp_path, **kwargs)


def test_counter_snapshots_keep_before_after_and_the_change(monkeypatch):
    readings = iter([
        {"MPTcpExtMPJoinSynRx": 0, "MPTcpExtMPCapableSYNRX": 3},   # client, before
        {"MPTcpExtMPJoinSynRx": 1, "MPTcpExtMPCapableSYNRX": 3},   # server, before
        {"MPTcpExtMPJoinSynRx": 0, "MPTcpExtMPCapableSYNRX": 4},   # client, after
        {"MPTcpExtMPJoinSynRx": 3, "MPTcpExtMPCapableSYNRX": 3},   # server, after
    ])
    seen = []

    def fake(netns):
        seen.append(netns)
        return next(readings)

    monkeypatch.setattr(capture, "mptcp_counters", fake)
    snaps = CounterSnapshots({"client": "c-ns", "server": "s-ns"})
    snaps.take_before()
    snaps.take_after()
    data = snaps.as_json()
    assert seen == ["c-ns", "s-ns", "c-ns", "s-ns"]
    assert data["hosts"]["client"]["delta"] == {"MPTcpExtMPCapableSYNRX": 1}
    assert data["hosts"]["server"]["delta"] == {"MPTcpExtMPJoinSynRx": 2}
    assert data["hosts"]["server"]["after"]["MPTcpExtMPCapableSYNRX"] == 3
    assert data["t_after"] >= data["t_before"] > 0


def _saying(*lines: str, then: str = "sleep 10"):
    """A process that writes `lines` on stderr, as a starting tcpdump would, then `then`."""
    said = "; ".join(f"echo {shlex.quote(line)} >&2" for line in lines)
    return subprocess.Popen(["sh", "-c", f"{said}; {then}"], stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("before", [
    [],
    ["tcpdump: data link type LINUX_SLL2"],  # what -i any says first
    ["tcpdump: WARNING: any: That device doesn't support promiscuous mode"],  # older libpcaps
])
def test_a_capture_has_started_once_tcpdump_says_it_listens_whatever_came_before(before):
    proc = _saying(*before, "tcpdump: listening on any, link-type LINUX_SLL2")
    try:
        capture._wait_listening(proc, "any")  # returns: no error
    finally:
        proc.kill()
        proc.wait()


def test_a_capture_that_ended_without_listening_is_refused_with_its_words():
    proc = _saying("tcpdump: WARNING: something", "tcpdump: p9: No such device exists",
                   then="exit 1")
    with pytest.raises(UserError, match=r"(?s)did not start: .*WARNING.*No such device"):
        capture._wait_listening(proc, "p9")
    proc.wait()
