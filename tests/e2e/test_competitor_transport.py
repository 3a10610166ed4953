"""A competing user over any registered transport: beside the trial's client on MPTCP, a
competing player speaks QUIC through the hop (its proxy in the competitor's namespace, the
gateway on the shared server), behind one server link; trial.json records the transport each
spoke and the hop's statistics land in the competitor's folder."""

import json

import pytest

from mpstream.runner.run import run_scenario
from mpstream.runner.scenario import load_scenario

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]  # make test-quic

PROFILE = """mode = "mptcp"
[[paths]]
rate = "10mbit"
delay_ms = 10.0
[[paths]]
rate = "10mbit"
delay_ms = 10.0
[server_link]
rate = "6mbit"
queue_packets = 40
[[competitors]]
name = "quic-user"
transport = "quic"
paths = [{ rate = "10mbit", delay_ms = 10.0 }]
"""


def test_a_competing_player_over_quic_beside_an_mptcp_client(tiny_media, tmp_path):
    (tmp_path / "quic-user.toml").write_text(PROFILE)
    (tmp_path / "s.toml").write_text(f"""name = "quic-competitor"
trials = 1
duration_s = 12
players = ["dashjs"]
[media]
dir = "{tiny_media}"
[[conditions]]
label = "mptcp-vs-quic"
profile = "quic-user.toml"
""")
    out = tmp_path / "run"
    statuses = run_scenario(load_scenario(tmp_path / "s.toml"), out, progress=False)
    assert list(statuses.values()) == ["ok"], statuses
    [trial] = sorted((out / "trials").iterdir())
    record = json.loads((trial / "trial.json").read_text())
    assert record["transport"] == "mptcp"
    assert record["competitors"] == [{"host": "user1", "name": "quic-user", "transport": "quic",
                                      "cross_traffic": False}]
    # The competitor played (it showed a frame) over the hop, whose gateway counted its one
    # QUIC connection; the client's MPTCP was proven on the wire as ever.
    events = json.loads((trial / "user1" / "events.json").read_text())
    assert any(e["type"] == "startup" for e in events)
    summary = json.loads((trial / "user1" / "summary.json").read_text())
    assert summary["proof"]["quic_connections"] == 1, summary
    assert (trial / "user1" / "quic-gateway.jsonl").is_file()
    assert record["proof"]["mp_join"] >= 1
