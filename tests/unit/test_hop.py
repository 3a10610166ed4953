"""The QUIC hop's parts that need no network: an unbuilt hop is refused with the command that
builds it, a profile's congestion control maps onto the QUIC library's or is refused, the
gateway's statistics prove (or not) that QUIC carried the session, and the hop's transports are
registered as the trial expects."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mpstream.errors import UserError
from mpstream.paths import REPO_ROOT
from mpstream.proc import ready_line
from mpstream.transports.base import get_transport
from mpstream.transports.hop.programs import (
    HOP_BINARY,
    HopOptions,
    QuicHop,
    hop_missing,
    hop_stale,
    quic_cc,
)


def test_an_unbuilt_hop_is_refused_with_the_build_command(tmp_path):
    missing = tmp_path / "mpstream-quic"
    assert "make quic" in hop_missing(missing)[0]
    hop = QuicHop(network=None, upstream_port=80, options=HopOptions("quic"),  # type: ignore[arg-type]
                  workdir=tmp_path / "w", binary=missing)
    with pytest.raises(UserError, match="make quic"):
        hop.__enter__()
    assert not (tmp_path / "w").exists()


def test_a_built_hop_is_not_missing(tmp_path):
    binary = tmp_path / "mpstream-quic"
    binary.write_text("")
    assert hop_missing(binary) == []


def test_a_hop_older_than_a_source_is_stale(tmp_path):
    """Decided by the clone's own Makefile rule (copied here with the files it names)."""
    shutil.copy(REPO_ROOT / "Makefile", tmp_path / "Makefile")
    binary = tmp_path / "build" / "mpstream-quic"
    source = tmp_path / "quic" / "src" / "holds.rs"
    others = [tmp_path / "quic" / n for n in ("Cargo.toml", "Cargo.lock")]
    others.append(tmp_path / "scripts" / "build-quic.sh")
    for f in (binary, source, *others):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("")
    for f in (source, *others):
        os.utime(f, (1000, 1000))
    os.utime(binary, (2000, 2000))
    assert not hop_stale(tmp_path)
    os.utime(source, (3000, 3000))  # a pulled change to one source
    assert hop_stale(tmp_path)
    binary.unlink()
    assert not hop_stale(tmp_path)  # not built at all is missing, not stale


@pytest.mark.parametrize(("cc", "name"), [(None, "cubic"), ("cubic", "cubic"), ("reno", "newreno"),
                                          ("bbr", "bbr")])
def test_a_profiles_cc_maps_onto_the_librarys(cc, name):
    assert quic_cc(cc) == name


@pytest.mark.parametrize("cc", ["lia", "olia", "vegas"])
def test_a_cc_the_library_lacks_is_refused_with_those_it_has(cc):
    with pytest.raises(UserError, match=f"{cc!r}.*cubic, reno, bbr"):
        quic_cc(cc)


class _TwoPaths:
    paths = (object(), object())


def _hop_with_stats(tmp_path, mode, lines):
    hop = QuicHop(network=_TwoPaths(), upstream_port=80, options=HopOptions(mode),  # type: ignore[arg-type]
                  workdir=tmp_path)
    hop.gateway_stats.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"torn')
    return hop


def test_the_gateways_count_proves_multipath_quic(tmp_path):
    lines = [{"event": "connected", "conn": 7}, {"conn": 7, "path": 0, "sent_bytes": 900},
             {"conn": 7, "path": 1, "sent_bytes": 0}]
    proof = _hop_with_stats(tmp_path, "mpquic", lines).proof()
    assert proof is not None and proof.counters == {"quic_connections": 1, "quic_paths": 1}
    assert "sent on 1 QUIC path(s) of the 2" in str(proof.problem)
    lines.append({"conn": 7, "path": 1, "sent_bytes": 5})
    proof = _hop_with_stats(tmp_path, "mpquic", lines).proof()
    assert proof is not None and proof.problem is None and proof.counters["quic_paths"] == 2
    # One path is all QUIC (single-path) must show.
    proof = _hop_with_stats(tmp_path, "quic", lines[:2]).proof()
    assert proof is not None and proof.problem is None


def test_no_connection_at_the_gateway_is_no_proof(tmp_path):
    proof = _hop_with_stats(tmp_path, "quic", []).proof()
    assert proof is not None and "did not go through the hop" in str(proof.problem)


def test_the_hop_without_quic_leaves_the_proof_to_the_kernels_counters(tmp_path):
    assert _hop_with_stats(tmp_path, "mptcp", []).proof() is None


def test_hop_transports_are_registered_with_their_network_modes():
    modes = {name: (get_transport(name).network_mode, get_transport(name).kernel_mptcp)
             for name in ("mpquic", "quic", "mptcp-hop", "tcp-hop")}
    assert modes == {"mpquic": ("mptcp", False), "quic": ("tcp", False),
                     "mptcp-hop": ("mptcp", False), "tcp-hop": ("tcp", False)}
    assert get_transport("mptcp").cc_refusal("lia") is None
    assert "noq" in str(get_transport("mpquic").cc_refusal("lia"))
    assert get_transport("quic").cc_refusal("bbr") is None
    assert get_transport("mptcp-hop").cc_refusal("lia") is None  # the kernel runs it


def test_the_implementation_the_hop_reports_is_the_library_cargo_pins():
    root = Path(__file__).resolve().parents[2] / "quic"
    pinned = re.search(r'^noq = \{ version = "=([0-9.]+)"', (root / "Cargo.toml").read_text(), re.M)
    said = re.search(r'QUIC_IMPLEMENTATION: &str = "noq ([0-9.]+),',
                     (root / "src" / "main.rs").read_text())
    assert pinned and said and pinned.group(1) == said.group(1)
    locked = re.search(r'name = "noq"\nversion = "([0-9.]+)"', (root / "Cargo.lock").read_text())
    assert locked and locked.group(1) == pinned.group(1)


def test_the_report_says_what_carried_each_transport():
    from types import SimpleNamespace

    from mpstream.runner.report.build import implementations

    def trial(transport, impl):
        return SimpleNamespace(record=SimpleNamespace(transport=transport,
                                                      transport_implementation=impl))

    trials = [trial("mpquic", "noq 1.4.0, draft-ietf-quic-multipath-21"), trial("mptcp", None),
              trial("quic", "noq 1.4.0, draft-ietf-quic-multipath-21"),
              trial("mpquic", "noq 1.4.0, draft-ietf-quic-multipath-21")]
    assert implementations(trials) == {  # type: ignore[arg-type]
        "mpquic": ["noq 1.4.0, draft-ietf-quic-multipath-21"],
        "quic": ["noq 1.4.0, draft-ietf-quic-multipath-21"]}


def test_both_ends_of_the_hop_get_the_scheduler(tmp_path):
    hop = QuicHop(network=None, upstream_port=80,  # type: ignore[arg-type]
                  options=HopOptions("mpquic", scheduler="ecf"), workdir=tmp_path)
    for judges_paths in (False, True):  # the gateway, the proxy
        args = hop._quic_args(tmp_path / "s.jsonl", multipath=True, judges_paths=judges_paths)
        assert args[args.index("--scheduler") + 1] == "ecf"


@pytest.mark.skipif(not HOP_BINARY.is_file(), reason="the QUIC hop is not built (make quic)")
def test_the_hops_default_scheduler_is_the_one_the_options_name():
    listed = [json.loads(line) for line in subprocess.run(
        [str(HOP_BINARY), "schedulers"], capture_output=True, text=True, check=True,
        timeout=10).stdout.splitlines()]
    assert [s["name"] for s in listed if s["default"]] == [HopOptions("mpquic").scheduler]
    assert {"lowest-id", "minrtt", "ecf"} <= {s["name"] for s in listed}


@pytest.mark.skipif(not HOP_BINARY.is_file(), reason="the QUIC hop is not built (make quic)")
def test_the_gateways_control_channel_answers_and_its_failures_are_named(tmp_path):
    """The real gateway, on loopback (no network needed for its control channel): a hold and a
    release are answered, an address that is not one is refused with the gateway's words, and
    a gateway that is gone is an error naming it rather than silence."""
    gateway = subprocess.Popen(
        [str(HOP_BINARY), "gateway", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9",
         "--cert-out", str(tmp_path / "cert.der"), "--hold", "10.1.1.2", "--control-stdin",
         "--stats", str(tmp_path / "gw.jsonl")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hop = QuicHop(network=None, upstream_port=80,  # type: ignore[arg-type]
                  options=HopOptions("mpquic"), workdir=tmp_path)
    hop._gateway = gateway
    try:
        assert ready_line(gateway, 10) is not None
        hop.hold("10.1.1.2", False)
        hop.hold("10.1.1.2", True)
        with pytest.raises(UserError, match=r"refused `hold cellular`: .*not an IP address"):
            hop.hold("cellular", True)
        events = [json.loads(line) for line in (tmp_path / "gw.jsonl").read_text().splitlines()]
        assert [(e["event"], e["held"]) for e in events] == [("release", []),
                                                            ("hold", ["10.1.1.2"])]
    finally:
        hop.close()
    with pytest.raises(UserError, match="gateway"):
        hop.hold("10.1.1.2", False)
