"""A real host's changes (netem/hostchanges.py) made by the kernel's own `ip`, in a throwaway
network namespace that plays the host: each kind is applied, the owner dies without undoing
(as after a SIGKILL), and `mpstream clean`'s pass over the state files puts the namespace's
rules, tables, MPTCP endpoints and limits back as they were."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

NS = f"mpshc{os.getpid() % 100000}"
ADDR = "198.51.100.2"

# Run in the namespace: every kind of change through the state file, then exit without undoing.
APPLY = textwrap.dedent(f"""
    import os
    from mpstream.netem.hostchanges import Endpoint, RouteTable, Rule
    from mpstream.netem.hostnet import StateFile, raise_limits

    state = StateFile("test")
    state.apply(RouteTable(4, 9700, (("198.51.100.0/24", "dev", "d0"),)))
    state.apply(Rule(4, 9700, "to", "192.0.2.1", 9700))
    state.apply(Rule(4, 9701, "from", "{ADDR}", 9700))
    state.apply(Endpoint(5, "{ADDR}", ("dev", "d0", "subflow")))
    raise_limits(state, subflows=4, add_addr_accepted=4)
    print(state.path)
    os._exit(0)
""")
CLEAN = "import json; from mpstream.netem import hostnet; print(json.dumps(hostnet.clean()))"


def in_ns(*argv: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["ip", "netns", "exec", NS, *argv], check=True, capture_output=True,
                          text=True, env=env).stdout


def host_state() -> dict[str, str]:
    return {"rules": in_ns("ip", "rule", "show"),
            "tables": in_ns("ip", "route", "show", "table", "all"),
            "endpoints": in_ns("ip", "mptcp", "endpoint", "show"),
            "limits": in_ns("ip", "mptcp", "limits", "show")}


@pytest.fixture
def host():
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        # An interface of the host's with an address: one end of a veth pair (no dummy module
        # on every kernel), both ends up.
        for cmd in (("ip", "link", "set", "lo", "up"),
                    ("ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1"),
                    ("ip", "addr", "add", f"{ADDR}/24", "dev", "d0"),
                    ("ip", "link", "set", "d1", "up"), ("ip", "link", "set", "d0", "up")):
            in_ns(*cmd)
        yield
    finally:
        subprocess.run(["ip", "netns", "del", NS], check=False)


def test_every_kind_of_change_is_undone_from_its_record_after_the_owner_died(host, tmp_path):
    env = {**os.environ, "MPSTREAM_STATE_DIR": str(tmp_path)}
    before = host_state()
    record_file = in_ns(sys.executable, "-c", APPLY, env=env).strip()
    changed = host_state()
    assert "lookup 9700" in changed["rules"] and f"from {ADDR} lookup 9700" in changed["rules"]
    assert "198.51.100.0/24 dev d0 table 9700" in changed["tables"]
    assert f"{ADDR} id 5 subflow dev d0" in changed["endpoints"]
    assert "subflows 4" in changed["limits"]
    record = json.loads(Path(record_file).read_text())
    assert [c["kind"] for c in record["changes"]] == ["table", "rule", "rule", "endpoint",
                                                      "limits"]
    out = json.loads(in_ns(sys.executable, "-c", CLEAN, env=env))
    assert out["problems"] == [] and [u["changes"] for u in out["undone"]] == [5]
    assert host_state() == before
    assert not os.path.exists(record_file)
