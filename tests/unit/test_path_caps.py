"""The server's caps per path (netem/pathcaps.py): their sizes from a path's rate and delay,
the map key and value the BPF program reads, and the caps a topology derives from its profile."""

import struct

import pytest

from mpstream.deployment import deployment_from_dict
from mpstream.errors import UserError
from mpstream.netem import pathcaps
from mpstream.netem.pathcaps import PathCap
from mpstream.netem.profile import load_profile
from mpstream.netem.topology import Topology


def test_a_cap_is_bdps_of_the_path_in_packets_and_never_starves_it():
    # 5 Mbit/s over 10 ms is 6,250 bytes, 4.3 packets of 1448: two of them need 9 packets.
    assert pathcaps.clamp_packets(5e6, 10, 2.0) == 9
    assert pathcaps.clamp_packets(25e6, 10, 2.0) == 44
    assert pathcaps.clamp_packets(1e6, 1, 1.0) == pathcaps.MIN_PACKETS


def test_the_map_key_is_what_the_program_reads():
    # struct clamp_key { __u64 netns; __u32 remote24; __u32 pad; }, little-endian, host order
    raw = bytes(int(b, 16) for b in pathcaps._key_hex(0x1234, "10.1.2.0"))
    assert struct.unpack("<QII", raw) == (0x1234, 0x0A010200, 0)
    # struct path_cap { __u32 cwnd, pacing, sndbuf, pad; }, 0 for not capped
    assert pathcaps._value_hex(PathCap(9, None)) == ["09"] + ["00"] * 15
    assert PathCap.unpacked(PathCap(None, 625_000).packed()) == PathCap(None, 625_000)
    assert struct.unpack("<IIII", PathCap(9, 625_000, 13_032).packed()) == (9, 625_000, 13_032, 0)


def _topology(profile: str, **server) -> Topology:
    dep = deployment_from_dict({"server": server})
    return Topology(load_profile(profile, deployment=dep), "unit", emulated=True)


def test_a_send_buffer_is_bdps_of_the_path_in_whole_packets():
    assert pathcaps.sndbuf_bytes(5e6, 10, 2.0) == 9 * 1448
    assert pathcaps.sndbuf_bytes(1e6, 1, 1.0) == pathcaps.MIN_PACKETS * 1448


def test_a_pacing_cap_is_times_the_path_rate_in_bytes():
    assert pathcaps.pacing_bytes(5e6, 1.0) == 625_000
    assert pathcaps.pacing_bytes(5e6, 1.2) == 750_000
    assert pathcaps.pacing_bytes(1e12, 64) == pathcaps.MAX_PACING


def test_a_topology_caps_each_slower_path_by_its_own_rate_and_delay():
    # 25 and 5 Mbit/s: the 5 Mbit/s path at two of its BDPs, the fastest left alone.
    topo = _topology("thesis-bandwidth-unbalanced", cwnd_clamp_bdp=2.0)
    assert topo.path_caps() == {"10.1.1.0": PathCap(9, None)}
    assert _topology("thesis-bandwidth-unbalanced", cwnd_clamp_bdp=3.0).path_caps() == {
        "10.1.1.0": PathCap(13, None)}
    assert _topology("thesis-bandwidth-unbalanced", pacing_cap=1.0).path_caps() == {
        "10.1.1.0": PathCap(None, 625_000)}
    assert _topology("thesis-bandwidth-unbalanced", cwnd_clamp_bdp=2.0,
                     pacing_cap=1.2).path_caps() == {"10.1.1.0": PathCap(9, 750_000)}
    assert _topology("thesis-bandwidth-unbalanced", sndbuf_bdp=4.0).path_caps() == {
        "10.1.1.0": PathCap(None, None, 18 * 1448)}
    assert _topology("thesis-bandwidth-unbalanced").path_caps() == {}
    # Balanced paths, and a single path, have no slower path to cap.
    for profile in ("thesis-bandwidth-balanced", "thesis-bandwidth-single"):
        assert _topology(profile, cwnd_clamp_bdp=2.0, pacing_cap=1.0).path_caps() == {}


def test_cap_every_path_caps_the_fastest_path_and_a_single_path_too():
    # 25 Mbit/s over 10 ms: 2 BDPs are 62.5 KB, 44 packets; the 5 Mbit/s path 9 as before.
    assert _topology("thesis-bandwidth-unbalanced", cwnd_clamp_bdp=2.0,
                     cap_every_path=True).path_caps() == {
        "10.1.0.0": PathCap(44, None), "10.1.1.0": PathCap(9, None)}
    assert _topology("thesis-bandwidth-single", cwnd_clamp_bdp=2.0,
                     cap_every_path=True).path_caps() == {"10.1.0.0": PathCap(52, None)}
    # Alone it caps nothing: it says where the caps apply, not what they are.
    assert _topology("thesis-bandwidth-single", cap_every_path=True).path_caps() == {}


def test_a_path_without_a_rate_cannot_be_capped():
    dep = deployment_from_dict({"server": {"cwnd_clamp_bdp": 2.0}})
    prof = load_profile("thesis-bandwidth-unbalanced", {"paths.1.rate": None}, deployment=dep)
    with pytest.raises(UserError, match="need a rate on path"):
        Topology(prof, "unit", emulated=True).path_caps()


@pytest.mark.parametrize("setting", ["cwnd_clamp_bdp", "pacing_cap", "sndbuf_bdp"])
@pytest.mark.parametrize("value", [0, -1, 100])
def test_the_settings_are_refused_out_of_range(setting, value):
    with pytest.raises(UserError, match=setting):
        deployment_from_dict({"server": {setting: value}})
