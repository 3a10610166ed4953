"""Per-trial wire evidence without the wire: bad capture settings are refused by name, and the
MPTcpExt counter snapshots report before, after and what changed (the real tcpdump and nstat run
in tests/integration/test_runner_capture.py)."""

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
