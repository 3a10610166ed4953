"""`mpstream serve --results DIR`: the run pages behind nginx. It prints where they are, lists
the run folders of DIR and nothing else: names sent as they are (no client-side clean-up of
`..`, encoded slashes, absolute paths) get 404 and never what lies outside DIR; a --results
folder that does not exist is refused before anything starts."""

import http.client
import signal
import subprocess

import pytest
import requests

from tests.integration.test_server_serve import MPSTREAM, free_port, read_until_ready
from tests.runfolder import make_run

SECRET = "scenario-outside-the-results-folder"
BAD = ["/api/runs/..", "/api/runs/../../etc/passwd", "/api/runs/..%2F..%2Fetc",
       "/api/runs/%2Fetc", "/api/runs/%2Fetc%2Fpasswd", "/api/runs//etc", "/api/runs/%2e%2e",
       "/api/runs/outside", "/runs/outside", "/runs/..%2F..%2Fetc",
       "/api/runs/demo-run/trials/..%2F..%2F..%2Fetc/timeline"]


def raw_get(port: int, path: str) -> tuple[int, str]:
    """GET exactly `path`, unnormalized, as an attacker's client would send it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve-results")
    results = tmp / "results"
    make_run(results / "demo-run")
    make_run(tmp / "elsewhere", scenario=SECRET)
    (results / "outside").symlink_to(tmp / "elsewhere", target_is_directory=True)
    (tmp / "media").mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [MPSTREAM, "serve", "--media", str(tmp / "media"), "--results", str(results),
         "--port", str(port), "--database-url", f"sqlite:///{tmp / 'qoe.sqlite3'}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        yield port, results, read_until_ready(proc)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def test_serve_prints_and_serves_the_run_pages(served):
    port, results, out = served
    assert f"runs       http://127.0.0.1:{port}/runs/ ({results})" in out, out
    base = f"http://127.0.0.1:{port}"
    runs = requests.get(base + "/api/runs", timeout=10).json()["runs"]
    assert [r["id"] for r in runs] == ["demo-run"]
    detail = requests.get(base + "/api/runs/demo-run", timeout=30).json()
    assert [c["label"] for c in detail["conditions"]] == ["balanced", "unbalanced", "single"]
    assert requests.get(base + "/runs/demo-run", timeout=30).status_code == 200
    doc = requests.get(base + "/api/v1/openapi.json", timeout=10).json()
    assert "/runs/{run_id}" in doc["paths"]


@pytest.mark.parametrize("path", BAD)
def test_names_out_of_the_results_folder_get_404(served, path):
    port, _, _ = served
    status, body = raw_get(port, path)
    assert status in (400, 404), (path, status)
    assert "root:" not in body and SECRET not in body


def test_a_missing_results_folder_is_refused_before_anything_starts(tmp_path):
    (tmp_path / "media").mkdir()
    done = subprocess.run(
        [MPSTREAM, "serve", "--media", str(tmp_path / "media"),
         "--results", str(tmp_path / "nowhere"), "--port", str(free_port())],
        capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode != 0
    said = " ".join(done.stderr.split())  # the terminal wraps the message
    assert "--results" in said and "nowhere: no such folder" in said
    assert "ready" not in done.stdout
