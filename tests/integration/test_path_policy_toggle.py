"""The path policies' lever for kernel MPTCP: the client's MPTCP endpoint backup flag.
During an MPTCP download (iperf3, server sending), lifting the metered path's backup flag
brings its bytes within a second (MP_PRIO to the server), setting it again stops them within a
second (interface counters); a toggle of an endpoint that is not there is an error, not
silence; and the controller leaves the flag as it found it."""

import os
import subprocess

import pytest

from mpstream.errors import UserError
from mpstream.netem.profile import profile_from_dict
from mpstream.netem.topology import Topology
from mpstream.qoe.events import BufferData, BufferEvent, StartupData, StartupEvent
from mpstream.transports import pathpolicy
from mpstream.transports.base import get_transport
from tests.pathbytes import moved, rx, seconds_until, still

MPTCP_WRAP = get_transport("mptcp").wrap
PATH = {"rate": "15mbit", "delay_ms": 5, "queue_packets": 100}
METERED = 1


def profile():
    prof = profile_from_dict({"mode": "mptcp", "paths": [
        PATH | {"name": "wifi"}, PATH | {"name": "cellular", "metered": True}]},
        name="toggle")
    backup = pathpolicy.policy_named("backup")  # the metered path starts held back
    return backup.starting(prof, backup.held_paths(prof))


def endpoint_flags(topo, endpoint):
    shown = topo.run("client", ["ip", "mptcp", "endpoint", "show", "id", str(endpoint)],
                     capture_output=True, text=True).stdout
    return shown.split()


@pytest.mark.integration
def test_the_backup_flag_moves_a_download_off_the_metered_path_and_back():
    endpoint = pathpolicy.mptcp_endpoint_id(METERED)
    with Topology.up(profile(), f"pp{os.getpid()}") as topo:
        ns = topo.netns("client")
        server = topo.popen("server", ["iperf3", "-s", "-1", "-p", "5203"], wrap=MPTCP_WRAP)
        topo.wait_listening("server", 5203, server=server)
        client = topo.popen("client", ["iperf3", "-c", topo.server_addr, "-R", "-t", "14",
                                       "-p", "5203"], wrap=MPTCP_WRAP, stdout=subprocess.PIPE,
                            text=True)
        try:
            assert seconds_until(moved(topo, 0, rx(topo, 0), 500_000), 10) is not None
            # Held back: the free path carries the download, the metered one nothing.
            before = rx(topo, METERED)
            assert seconds_until(moved(topo, 0, rx(topo, 0), 1_000_000), 5) is not None
            assert rx(topo, METERED) - before < 20_000
            pathpolicy.set_endpoint_backup(ns, endpoint, False)
            joined = seconds_until(moved(topo, METERED, rx(topo, METERED), 150_000), 3)
            pathpolicy.set_endpoint_backup(ns, endpoint, True)
            left = seconds_until(still(topo, METERED), 3)
            with pytest.raises(UserError, match="failed"):
                pathpolicy.set_endpoint_backup(ns, 9, False)
        finally:
            client.kill()
            client.wait()
            server.kill()
            server.wait()
    print(f"metered path joined after {joined} s, quiet (0.4 s window) after {left} s")
    # 150 KB at 15 Mbit/s takes 80 ms: the rest is MP_PRIO reaching the server's scheduler.
    assert joined is not None and joined < 1.0, joined
    # Quiet for 0.4 s means the bytes stopped within (left - 0.4) s of the flag.
    assert left is not None and left - 0.4 < 1.0, left


@pytest.mark.integration
def test_the_controller_restores_the_flag_it_found():
    endpoint = pathpolicy.mptcp_endpoint_id(METERED)
    with Topology.up(profile(), f"pq{os.getpid()}") as topo:
        assert "backup" in endpoint_flags(topo, endpoint)
        startup = StartupData(startup_delay_ms=900.0, manifest_ms=40.0, first_segment_ms=300.0,
                              decode_ms=20.0, codec="avc1.64001f", width=640, height=360,
                              bitrate=800_000.0)
        events = [StartupEvent(seq=0, t_ms=0.0, type="startup", data=startup),
                  *(BufferEvent(seq=seq, t_ms=1000.0 * seq, type="buffer",
                                data=BufferData(level_s=level, position=float(seq)))
                    for seq, level in ((1, 2.0), (2, 1.0)))]
        ctl = pathpolicy.PathPolicyController(
            policy=pathpolicy.policy_named("deadline"), held=[METERED],
            hold=pathpolicy.mptcp_holder(topo.netns("client")),
            events=lambda seq: [e for e in events if e.seq > seq], counters=topo.path_bytes,
            poll_s=0.05)
        with ctl.running():
            assert seconds_until(lambda: ctl.using, 5) is not None, ctl.failure
            assert "backup" not in endpoint_flags(topo, endpoint)
        assert "backup" in endpoint_flags(topo, endpoint)
        assert [t.action for t in ctl.toggles] == ["nobackup"]
