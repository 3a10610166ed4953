"""One collector for many stacks in turn, as a local run shares one among its trials: each stack's
nginx reaches it through its socket, stopping a stack leaves it answering, each session reads
back only its own events, and it is gone once its block ends."""

import requests

from mpstream.proc import pid_alive
from mpstream.qoe.collector import CollectorClient
from mpstream.server.stack import ServerStack, shared_collector
from tests.integration.test_server_stack import SESSION, free_port
from tests.servers import make_tiny_media

DATA = {"stall_start": {"position": 1.0}, "buffer": {"level_s": 1.0, "position": 1.0}}


def _play_one(media, workdir, socket, session_id: str, kind: str) -> None:
    with ServerStack(media, workdir=workdir, port=free_port(), mptcp=False, one_trial=True,
                     shared_collector=socket) as stack:
        assert stack.collector is None and stack.collector_socket == socket
        r = requests.post(stack.api_url + "/sessions", json={**SESSION, "id": session_id})
        assert r.status_code == 201, r.text
        url = f"{stack.api_url}/sessions/{session_id}/events"
        event = {"seq": 0, "t_ms": 1.0, "type": kind, "data": DATA[kind]}
        r = requests.post(url, json={"events": [event]})
        assert r.json().get("stored") == 1, r.text


def test_stacks_in_turn_share_one_collector(tmp_path):
    media = make_tiny_media(tmp_path / "media")
    with shared_collector(tmp_path / "collector") as socket:
        collector = CollectorClient.over_socket(socket)
        assert collector.health()["status"] == "ok"
        pid = int((tmp_path / "collector" / "collector.pid").read_text())
        _play_one(media, tmp_path / "one", socket, "trial-one", "stall_start")
        # The first stack's nginx is gone; the collector and its socket are not.
        assert pid_alive(pid) and socket.exists()
        _play_one(media, tmp_path / "two", socket, "trial-two", "buffer")
        for session_id, kind in (("trial-one", "stall_start"), ("trial-two", "buffer")):
            events = collector.session(session_id)["events"]
            assert [e["type"] for e in events] == [kind]
        assert not (tmp_path / "one" / "qoe.sqlite3").exists()  # one database, the shared one
    assert not pid_alive(pid)
