"""What carried a person's session, as the server saw it: headless Chromium in the client
namespace of a two-path topology, on the player URL `mpstream serve` prints (no transport
parameter), nginx and the collector in the server namespace. A browser under mptcpize opens
MPTCP connections, which join a subflow over the second path: the HUD says "MPTCP, 2 subflows"
and the collector keeps it with the session. A browser with MPTCP off (its sockets plain TCP,
as a stock browser's) shows TCP. The HUD never says UNKNOWN."""

import os

import pytest

from mpstream.netem.topology import Topology
from mpstream.player.session import browser_in_namespace
from mpstream.server.cli import player_urls
from mpstream.server.stack import ServerStack
from mpstream.transports.base import get_transport
from tests.sessions import collector_get
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HUD_TRANSPORT = "document.querySelector('[data-field=\"transport\"]').textContent"


@pytest.fixture(scope="module")
def served(tiny_media):
    """Two balanced paths; nginx (under mptcpize) and the collector on the server's side."""
    with (Topology.up("thesis-bandwidth-balanced", name=f"ts{os.getpid() % 100000}") as topo,
          ServerStack(tiny_media, netns=topo.server_ns, host=topo.server_addr) as stack):
        yield topo, stack


def _hud_transport(served, transport: str, want: str) -> tuple[str, str]:
    """Open the player URL serve prints in a browser wrapped for `transport`; the HUD's
    transport cell once it says `want` (or what it said last), and the page's session id."""
    topo, stack = served
    url = player_urls(stack, stack.media_dir)[-1]  # the dash.js one
    assert "transport=" not in url
    seen: list[str] = []
    with browser_in_namespace(topo.client_ns, wrap=get_transport(transport).wrap) as browser:
        page = browser.new_page()
        page.goto(url)
        page.wait_for_function("window.mpstream && window.mpstream.config", timeout=30_000)
        session = page.evaluate("window.mpstream.config.session")

        def says_it() -> bool:
            seen.append(page.evaluate(HUD_TRANSPORT))
            assert "UNKNOWN" not in seen[-1].upper(), seen
            return seen[-1] == want

        # The page measures at once and every 5 s: a second subflow joins after the first.
        try:
            wait_until(says_it, 30, f"the HUD's transport said {want!r}", interval_s=0.5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: it said {seen[-3:]}") from None
    return seen[-1], session


def test_a_browser_speaking_mptcp_over_two_paths_shows_mptcp_with_two_subflows(served):
    text, session = _hud_transport(served, "mptcp", "MPTCP, 2 subflows")
    stored = collector_get(served[1], f"/sessions/{session}")
    assert stored["transport"] == "unknown"  # nothing was asked for: the URL names none
    assert (stored["measured_transport"], stored["measured_subflows"]) == ("mptcp", 2)
    assert text == "MPTCP, 2 subflows"


def test_a_browser_with_mptcp_off_shows_tcp(served):
    text, session = _hud_transport(served, "tcp", "TCP (multipath not negotiated)")
    stored = collector_get(served[1], f"/sessions/{session}")
    assert (stored["measured_transport"], stored["measured_subflows"]) == ("tcp", 1)
    assert "MPTCP" not in text
