"""`mpstream trace record` through an emulated path whose truth is known: a fixed rate, and a
trace made here (traces.synthetic). The recorded downlink's mean rate is within 5% of the
configured one, and its 1 s rate series follows the source trace's (correlation above 0.9).
About a minute: run by `make test-real-networks`."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mpstream.netem import traces
from mpstream.netem.record import rate_series
from mpstream.netem.topology import Topology
from tests.waiting import listening, wait_until

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]

MPSTREAM = [sys.executable, "-m", "mpstream.cli"]
SECONDS = 20


def _record(tmp_path, profile_text: str, name: str) -> dict:
    profile = tmp_path / f"{name}.toml"
    profile.write_text(profile_text)
    with Topology.up(profile, name=f"tr{name}{os.getpid() % 10000}") as topo:
        server = topo.popen("server", [*MPSTREAM, "trace", "serve", "--listen",
                                       f"{topo.server_addr}:9871"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: listening(topo.server_ns, 9871) or server.poll() is not None,
                       30, "the trace server listens")
            assert server.poll() is None, "the trace server exited before it listened"
            out = tmp_path / name
            done = topo.run("client", [*MPSTREAM, "trace", "record", "--server",
                                       f"{topo.server_addr}:9871", "--interface",
                                       topo.paths[0].client_ifname, "--duration",
                                       str(SECONDS), "--out", str(out)],
                            capture_output=True, text=True, timeout=SECONDS * 3 + 60)
            assert done.returncode == 0, done.stderr[-2000:]
        finally:
            server.terminate()
            server.wait(10)
    return json.loads(out.with_name(name + ".json").read_text()) | {"out": out}


def test_a_fixed_rate_is_recorded_within_5_percent(tmp_path):
    summary = _record(tmp_path, """
description = "one 8 Mbit/s path"
mode = "tcp"
[[paths]]
name = "p"
rate = "8mbit"
delay_ms = 10.0
queue_packets = 200
""", "fixed")
    assert abs(summary["down"]["mean_bps"] - 8e6) < 0.05 * 8e6, summary
    assert abs(summary["up"]["mean_bps"] - 8e6) < 0.05 * 8e6, summary
    assert 15 < summary["down"]["rtt_ms"] < 200
    # The recorded trace loads as a trace.
    assert abs(traces.mean_bps(summary["out"].with_name("fixed.down")) - 8e6) < 0.05 * 8e6


def test_a_known_trace_is_recorded_with_its_shape(tmp_path):
    source = traces.synthetic(10e6, SECONDS + 10, seed=3, swing=0.6, period_s=8)
    traces.write(tmp_path / "src.down", source)
    traces.write(tmp_path / "src.up", traces.synthetic(4e6, SECONDS + 10, seed=4))
    summary = _record(tmp_path, f"""
description = "one path driven by a made-up trace"
mode = "tcp"
[[paths]]
name = "p"
trace = "{tmp_path / 'src'}"
delay_ms = 10.0
queue_packets = 200
""", "shaped")
    got = rate_series([int(x) for x in summary["out"].with_name("shaped.down").read_text().split()])
    want = rate_series(source)
    # The recording starts at an unknown point of the source's clock: align on the best lag.
    n = len(got) - 2
    lags = range(0, 10)
    corr = [np.corrcoef(got[1:n + 1], want[lag:lag + n])[0, 1] for lag in lags]
    lag = lags[int(np.argmax(corr))]
    window = float(np.mean(want[lag:lag + n]))
    assert abs(float(np.mean(got[1:n + 1])) - window) < 0.05 * window, (got, want[lag:lag + n])
    assert max(corr) > 0.9, corr
