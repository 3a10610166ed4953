"""docker-compose.yml, run for real with podman and podman-compose (`make test-compose`).

The images build from a Debian base made here (scripts/container-base.sh), the stack comes up
under a project name of its own with nginx published on a free port of 127.0.0.1, headless
Chromium on the host plays the player page through that port under mptcpize, and then:
nginx's container counted MPTCP connections, the page's QoE events are rows in PostgreSQL,
and `down` leaves no container, pod, network or volume of the project behind, also when the
process holding the stack gets SIGTERM."""

import os
import signal
import subprocess
import sys
import time

import pytest

from mpstream.player.session import MANIFESTS, PlayRequest, page_url
from mpstream.proc import signals_interrupt
from mpstream.transports.base import get_transport
from tests.compose.stack import (
    REPO,
    ComposeStack,
    build_images,
    host_browser,
    leftovers,
    mptcp_counters,
    podman_env,
    remove_leftovers,
)

pytestmark = pytest.mark.timeout(900)

PLAY_S = 8.0


@pytest.fixture(scope="module")
def stack():
    build_images()
    project = f"mpscompose{os.getpid()}"
    with signals_interrupt(), ComposeStack(project, encode_s=12) as running:
        yield running
    assert running.down_result.returncode == 0, running.down_result.stderr[-2000:]
    assert running.left_after_down == {}, "compose down left these behind"
    assert leftovers(project) == {}


def test_services_run_and_report_healthy(stack):
    # podman before 4.6 schedules no health checks; running them proves they are real.
    for service in ("postgres", "collector"):
        stack.wait_healthy(service, timeout_s=90)
    assert stack.exit_code("encoder") == 0
    assert stack.http_get("/api/v1/health")[0] == 200
    assert stack.http_get("/media/dash/manifest.mpd")[0] == 200


def test_player_page_over_mptcp_and_events_reach_postgres(stack):
    stack.wait_healthy("collector", timeout_s=90)
    session = f"compose-{os.getpid()}"
    before = mptcp_counters(stack.container("nginx"))
    url = page_url(stack.base_url, PlayRequest(
        player="dashjs", transport=get_transport("mptcp"), manifest_path=MANIFESTS["dashjs"],
        session_id=session, duration_s=PLAY_S, scenario="compose"))
    with host_browser(mptcp=True) as browser:
        page = browser.new_page()
        page.goto(url, wait_until="load", timeout=60_000)
        page.wait_for_function("window.mpstream && window.mpstream.state === 'done'",
                               timeout=(PLAY_S + 60) * 1000, polling=250)
        report = page.evaluate("window.mpstream.report()")
    assert report.get("failure") is None, report
    after = mptcp_counters(stack.container("nginx"))
    # Chromium's connections were MPTCP end to end, through the published port's NAT.
    assert after["MPCapableSYNRX"] > before["MPCapableSYNRX"], (before, after)
    assert after["MPCapableACKRX"] > before["MPCapableACKRX"], (before, after)

    # The beacons went page -> nginx -> collector -> PostgreSQL: read them back with psql.
    deadline = time.monotonic() + 30
    while True:
        rows = stack.psql(f"SELECT type, count(*) FROM events WHERE session_id = '{session}' "
                          "GROUP BY type ORDER BY type")
        types = dict(line.split("|") for line in rows.splitlines() if line)
        if "end" in types or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert {"manifest", "startup", "segment", "end"} <= set(types), types
    assert int(types["segment"]) >= 2, types
    transport = stack.psql(f"SELECT transport FROM sessions WHERE id = '{session}'")
    assert transport.strip() == "mptcp"


def test_sigterm_takes_the_stack_down():
    build_images()
    project = f"mpscomposeterm{os.getpid()}"
    holder = subprocess.Popen([sys.executable, "-m", "tests.compose.stack", "up", project],
                              cwd=REPO, env=podman_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "up"
        running = leftovers(project)
        assert {"containers", "networks", "volumes"} <= set(running), running
        holder.send_signal(signal.SIGTERM)
        assert holder.wait(timeout=180) == 130
        assert leftovers(project) == {}
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        remove_leftovers(project)  # after a failure above; nothing is left otherwise
