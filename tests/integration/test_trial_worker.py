"""A run's trials share one worker process (`mpstream trial --worker`) and its browser driver,
and nothing else: each trial builds its own network, servers and browser, counts its own bytes,
and a trial that fails part way leaves the next one clean."""

import contextlib
import http.server
import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from mpstream.player.browsers import kept_playwright, open_page
from tests.runs import leftover_namespaces, trial_topologies
from tests.scenarios import balanced_and_single
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(400)


class _Site(http.server.BaseHTTPRequestHandler):
    """A page that sets a cookie and loads a script the browser may cache for an hour; each
    request is noted with the cookie it carried."""

    seen: ClassVar[list[tuple[str, str]]] = []

    def do_GET(self):
        if self.path != "/favicon.ico":  # asked for by the browser on its own
            self.seen.append((self.path, self.headers.get("Cookie", "")))
        if self.path == "/asset.js":
            body, kind = b"window.assetLoaded = true;", "text/javascript"
            extra = {"Cache-Control": "max-age=3600"}
        else:
            body = b"<html><script src='/asset.js'></script><body>page</body></html>"
            kind, extra = "text/html", {"Set-Cookie": "trial=first; Max-Age=3600"}
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _site():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    _Site.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_a_kept_driver_carries_no_cookie_cache_or_storage_to_the_next_browser():
    with _site() as url, kept_playwright() as kept:
        with open_page("chromium", None) as page:
            driver = kept.pw  # started by this first session
            page.goto(f"{url}/page.html", 30)
            page.evaluate("localStorage.setItem('trial', 'first')")
            page.goto(f"{url}/page.html", 30)  # the second load: cookie sent, script cached
            assert page.evaluate("document.cookie") == "trial=first"
        first = list(_Site.seen)
        with open_page("chromium", None) as page:
            page.goto(f"{url}/page.html", 30)
            storage = page.evaluate("localStorage.getItem('trial')")
            cookie = page.evaluate("document.cookie")
        assert driver is not None and kept.pw is driver  # the same driver served both
    # Within the first browser its cookie went back and its script came from its cache: the
    # checks below could fail.
    assert [p for p, _ in first].count("/asset.js") == 1, first
    assert first[-1] == ("/page.html", "trial=first"), first
    second = _Site.seen[len(first):]
    assert second[0] == ("/page.html", ""), second  # no cookie from the first browser
    # Fetched again (with the cookie this load set): no cache entry crossed.
    assert [p for p, _ in second] == ["/page.html", "/asset.js"], second
    assert storage is None and cookie == "trial=first"  # set anew by this load only


def _topologies_by_trial(out: Path) -> dict[str, str]:
    found = {}
    for log in (out / "trials").glob("*/trial.log"):
        for line in log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                said = json.loads(line)
                if isinstance(said, dict) and "topology" in said:
                    found[said["key"]] = said["topology"]
    return found


def _iperf(out: Path, role: str) -> list[int]:
    """iperf3 processes of `role` ("-s", "-c") running in one of the run's namespaces."""
    prefixes = tuple(f"mps-{t}-" for t in trial_topologies(out))
    pids = subprocess.run(["pgrep", "-f", f"iperf3 {role}"], capture_output=True,
                          text=True).stdout.split()
    mine = []
    for pid in pids:
        netns = subprocess.run(["ip", "netns", "identify", pid], capture_output=True,
                               text=True).stdout.strip()
        if prefixes and netns.startswith(prefixes):
            mine.append(int(pid))
    return mine


def test_trials_of_one_worker_are_their_own_and_a_failed_one_leaves_the_next_clean(tmp_path):
    scenario = tmp_path / "iperf-worker.toml"
    scenario.write_text(balanced_and_single("iperf-worker", trials=2, duration_s=4))
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "mpstream.cli", "run", str(scenario),
                             "--out", str(out), "--no-report"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # The first trial fails part way: its iperf3 client is killed mid-transfer.
    wait_until(lambda: bool(_iperf(out, "-c")), 120, "the first trial's iperf3 client", 0.1)
    for pid in _iperf(out, "-c"):
        subprocess.run(["kill", "-9", str(pid)], check=False)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, output  # done, with a failed trial kept

    records = {p.parent.name: json.loads(p.read_text())
               for p in (out / "trials").glob("*/trial.json")}
    assert len(records) == 4, sorted(records)
    first = min(records.values(), key=lambda r: r["order"])
    assert first["status"] == "failed" and "iperf3 exit -9" in first["reason"], first
    later = [r for r in records.values() if r is not first]
    assert all(r["status"] == "ok" for r in later), [(r["key"], r["reason"]) for r in later]

    # One worker ran them all (its pid in every topology's name), each on a network of its
    # own that is gone.
    topologies = _topologies_by_trial(out)
    assert len(set(topologies.values())) == 4, topologies
    assert len({re.sub(r"n\d+$", "", t) for t in topologies.values()}) == 1, topologies
    assert leftover_namespaces(out) == []

    # Each trial counts its own bytes: the second round's are the same size as the first's
    # (4 s at 30 Mbit/s, about 15 MB), not the sum of both.
    by_cond: dict[str, list[int]] = {}
    for r in sorted(later, key=lambda r: r["order"]):
        total = sum(p["rx_bytes"] for p in r["path_bytes"])
        by_cond.setdefault(r["condition"]["label"], []).append(total)
    twice = next(v for v in by_cond.values() if len(v) == 2)  # the one whose first was ok
    assert 0.6 < twice[1] / twice[0] < 1.6, by_cond
