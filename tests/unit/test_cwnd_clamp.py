"""The server's window cap per path (netem/cwndclamp.py): its size from a path's rate and delay,
the map key the BPF program reads, and the caps a topology derives from its profile."""

import struct

import pytest

from mpstream.deployment import deployment_from_dict
from mpstream.errors import UserError
from mpstream.netem import cwndclamp
from mpstream.netem.profile import load_profile
from mpstream.netem.topology import Topology


def test_a_cap_is_bdps_of_the_path_in_packets_and_never_starves_it():
    # 5 Mbit/s over 10 ms is 6,250 bytes, 4.3 packets of 1448: two of them need 9 packets.
    assert cwndclamp.clamp_packets(5e6, 10, 2.0) == 9
    assert cwndclamp.clamp_packets(25e6, 10, 2.0) == 44
    assert cwndclamp.clamp_packets(1e6, 1, 1.0) == cwndclamp.MIN_PACKETS


def test_the_map_key_is_what_the_program_reads():
    # struct clamp_key { __u64 netns; __u32 remote24; __u32 pad; }, little-endian, host order
    raw = bytes(int(b, 16) for b in cwndclamp._key_hex(0x1234, "10.1.2.0"))
    assert struct.unpack("<QII", raw) == (0x1234, 0x0A010200, 0)
    assert cwndclamp._value_hex(9) == ["09", "00", "00", "00"]


def _topology(profile: str, **server) -> Topology:
    dep = deployment_from_dict({"server": server})
    return Topology(load_profile(profile, deployment=dep), "unit", emulated=True)


def test_a_topology_caps_each_slower_path_by_its_own_rate_and_delay():
    # 25 and 5 Mbit/s: the 5 Mbit/s path at two of its BDPs, the fastest left alone.
    topo = _topology("thesis-bandwidth-unbalanced", cwnd_clamp_bdp=2.0)
    assert topo.window_caps() == {"10.1.1.0": 9}
    assert _topology("thesis-bandwidth-unbalanced", cwnd_clamp_bdp=3.0).window_caps() == {
        "10.1.1.0": 13}
    assert _topology("thesis-bandwidth-unbalanced").window_caps() == {}
    # Balanced paths, and a single path, have no slower path to cap.
    assert _topology("thesis-bandwidth-balanced", cwnd_clamp_bdp=2.0).window_caps() == {}
    assert _topology("thesis-bandwidth-single", cwnd_clamp_bdp=2.0).window_caps() == {}


def test_a_path_without_a_rate_cannot_be_capped():
    dep = deployment_from_dict({"server": {"cwnd_clamp_bdp": 2.0}})
    prof = load_profile("thesis-bandwidth-unbalanced", {"paths.1.rate": None}, deployment=dep)
    with pytest.raises(UserError, match="needs a rate on path"):
        Topology(prof, "unit", emulated=True).window_caps()


@pytest.mark.parametrize("value", [0, -1, 100])
def test_the_setting_is_refused_out_of_range(value):
    with pytest.raises(UserError, match="cwnd_clamp_bdp"):
        deployment_from_dict({"server": {"cwnd_clamp_bdp": value}})
