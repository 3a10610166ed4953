"""The run pages' API (runner/report/runpages.py) over real run folders made from the golden
fixture's trials: the list, a run's conditions (from the report's CSV files, or computed when
they are missing or stale, the same figures either way), a trial's timeline, the OpenAPI
document, and names that lead out of the results folder (404, nothing outside read or listed).
The same app behind nginx and gunicorn, in Chromium: tests/e2e/test_run_pages.py."""

import json
import os
import shutil
from pathlib import Path

import pytest

from mpstream.runner.report.runpages import create_app
from tests.runfolder import GOLDEN, make_run

SECRET = "scenario-outside-the-results-folder"


@pytest.fixture
def results(tmp_path):
    out = tmp_path / "results"
    make_run(out / "demo-run")
    return out


@pytest.fixture
def client(results, tmp_path):
    app = create_app(results)
    app.config.update(TESTING=True)
    return app.test_client()


@pytest.fixture
def outside(tmp_path):
    """A run folder outside the results folder, whose scenario must never show."""
    folder = make_run(tmp_path / "elsewhere" / "run", scenario=SECRET)
    return folder


def test_runs_lists_each_run_folder(client, results):
    (results / "not-a-run").mkdir()  # no run.json: not listed
    runs = client.get("/api/runs").json["runs"]
    assert [r["id"] for r in runs] == ["demo-run"]
    run = runs[0]
    assert run["scenario"] == "demo" and run["trials"] == 3 and run["ok"] == 3
    assert run["started"].startswith("2026-11-23T19:")


def test_a_missing_results_folder_lists_no_run(tmp_path):
    client = create_app(tmp_path / "nothing-here").test_client()
    assert client.get("/api/runs").json == {"runs": []}
    assert "No run folder here yet" in client.get("/runs/").get_data(as_text=True)


def figures(detail: dict) -> dict[tuple[str, str], dict]:
    return {(c["label"], f["metric"]): f for c in detail["conditions"] for f in c["figures"]}


def test_run_names_its_conditions_in_the_scenarios_order(client):
    detail = client.get("/api/runs/demo-run").json
    assert [c["label"] for c in detail["conditions"]] == ["balanced", "unbalanced", "single"]
    assert detail["source"] == "computed from the trials"
    assert all(c["trials"] == 1 and c["ok"] == 1 for c in detail["conditions"])
    got = figures(detail)
    # The golden trials' startup delays, as the report wrote them (video-expected/).
    assert got[("unbalanced", "startup_delay_ms")]["mean"] == pytest.approx(244.8)
    assert got[("balanced", "startup_delay_ms")]["n"] == 1
    assert got[("single", "startup_delay_ms")]["ci95_low"] is None  # n=1: no interval
    assert {t["key"] for t in detail["trial_list"]} == {
        "r00-balanced-dashjs", "r00-unbalanced-dashjs", "r00-single-dashjs"}


def test_the_reports_csv_files_are_read_when_newer_than_the_trials(tmp_path):
    run = tmp_path / "results" / "golden"
    shutil.copytree(GOLDEN, run)
    shutil.copytree(GOLDEN.parent / "video-expected", run / "report")
    newest = max(p.stat().st_mtime_ns for p in run.glob("trials/*/trial.json"))
    for written in (run / "report").iterdir():  # as `mpstream report` leaves them: after
        os.utime(written, ns=(newest + 10**9, newest + 10**9))
    client = create_app(tmp_path / "results").test_client()
    from_csv = client.get("/api/runs/golden").json
    assert from_csv["source"] == "report/conditions.csv"
    # A trial written after the report: the figures are computed again, and agree.
    later = newest + 2 * 10**9
    os.utime(run / "trials" / "r00-single-dashjs" / "trial.json", ns=(later, later))
    computed = client.get("/api/runs/golden").json
    assert computed["source"] == "computed from the trials"
    a, b = figures(from_csv), figures(computed)
    for key in (("unbalanced", "startup_delay_ms"), ("single", "mean_bitrate_mbps"),
                ("unbalanced", "path0_bytes_share")):
        assert a[key]["mean"] == pytest.approx(b[key]["mean"], rel=1e-6), key
    assert {t["key"]: t["metrics"]["stall_ms"] for t in from_csv["trial_list"]} == \
        {t["key"]: t["metrics"]["stall_ms"] for t in computed["trial_list"]}


def test_timeline_carries_the_trials_data_points(client, results):
    tl = client.get("/api/runs/demo-run/trials/r00-unbalanced-dashjs/timeline").json
    events = json.loads((GOLDEN / "trials" / "r00-unbalanced-dashjs" / "events.json").read_text())
    assert tl["clock"] == "trial" and tl["paths"] == ["path0", "path1"]
    assert len(tl["buffer_s"]) == sum(e["type"] == "buffer" for e in events)
    video = [e for e in events if e["type"] == "segment" and e["data"]["kind"] == "video"]
    assert len(tl["segment_rate_bps"]) == len(video)
    # Both paths carried bytes; their sum is what the client's kernel counted (2.2 MB here).
    carried = [sum(v for _, v in pts) * 0.5 / 8 for pts in tl["throughput_bps"]]
    assert all(c > 100_000 for c in carried) and 1.9e6 < sum(carried) < 2.5e6
    # Page events are placed on the samplers' clock: the first segment after the samples start.
    assert 0 < tl["segment_rate_bps"][0][0] < tl["end_s"]
    single = client.get("/api/runs/demo-run/trials/r00-single-dashjs/timeline").json
    assert len(single["paths"]) == len(single["throughput_bps"]) == 1


def test_openapi_document_has_the_run_api(client):
    doc = client.get("/api/v1/openapi.json").json
    for path in ("/runs", "/runs/{run_id}", "/runs/{run_id}/trials/{key}/timeline"):
        assert doc["paths"][path]["servers"] == [{"url": "/api"}]
        assert "200" in doc["paths"][path]["get"]["responses"]
    assert "/sessions" in doc["paths"]  # the collector's paths stay as they were
    assert "RunDetailOut" in doc["components"]["schemas"]


BAD_IDS = ["..", "..%2F..%2Fetc", "%2Fetc", "%2F..", ".hidden", "%2e%2e", "..%2Felsewhere%2Frun"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_name_out_of_the_results_folder_is_404(client, outside, bad):
    for url in (f"/api/runs/{bad}", f"/runs/{bad}", f"/api/runs/{bad}/trials/x/timeline"):
        r = client.get(url)
        assert r.status_code == 404, (url, r.status_code)
        assert SECRET not in r.get_data(as_text=True)


def test_an_absolute_path_is_404(client):
    for url in ("/api/runs//etc", "/api/runs/%2Fetc%2Fpasswd", "/runs//etc"):
        assert client.get(url).status_code == 404, url


def test_symbolic_links_out_of_the_results_folder_are_no_runs(client, results, outside):
    (results / "linked").symlink_to(outside, target_is_directory=True)
    assert [r["id"] for r in client.get("/api/runs").json["runs"]] == ["demo-run"]
    assert client.get("/api/runs/linked").status_code == 404
    assert client.get("/runs/linked").status_code == 404
    assert SECRET not in client.get("/runs/").get_data(as_text=True)
    # A trial folder that is a link, and a trial whose file is a link, are not read either.
    trials = results / "demo-run" / "trials"
    (trials / "r09-linked-dashjs").symlink_to(outside / "trials" / "r00-single-dashjs")
    assert client.get("/api/runs/demo-run/trials/r09-linked-dashjs/timeline").status_code == 404
    assert "r09-linked-dashjs" not in client.get("/api/runs/demo-run").get_data(as_text=True)
    events = trials / "r00-single-dashjs" / "events.json"
    events.unlink()
    events.symlink_to(outside / "trials" / "r00-single-dashjs" / "events.json")
    assert client.get("/api/runs/demo-run/trials/r00-single-dashjs/timeline").status_code == 404
    assert client.get("/api/runs/demo-run").status_code == 404


def test_links_to_folders_of_a_run_are_not_followed(client, results, outside):
    run = results / "demo-run"
    # report/ leading elsewhere: its CSV files are not read (the figures are computed).
    (run / "report").symlink_to(outside / "report", target_is_directory=True)
    (outside / "report").mkdir()
    (outside / "report" / "conditions.csv").write_text(f"condition,metric\n{SECRET},x\n")
    (outside / "report" / "trials.csv").write_text("condition,trial\n")
    detail = client.get("/api/runs/demo-run")
    assert detail.json["source"] == "computed from the trials"
    assert SECRET not in detail.get_data(as_text=True)
    # A link deep in a trial folder (a competing client's events) makes the trial unreadable.
    (run / "trials" / "r00-single-dashjs" / "user1").mkdir()
    (run / "trials" / "r00-single-dashjs" / "user1" / "events.json").symlink_to(
        outside / "trials" / "r00-single-dashjs" / "events.json")
    assert client.get("/api/runs/demo-run/trials/r00-single-dashjs/timeline").status_code == 404
    # trials/ leading elsewhere: the run has no trials at all.
    shutil.rmtree(run / "trials")
    (run / "trials").symlink_to(outside / "trials", target_is_directory=True)
    listed = client.get("/api/runs").json["runs"][0]
    assert listed["trials"] == 0
    assert client.get("/api/runs/demo-run").json["trial_list"] == []
    assert client.get("/api/runs/demo-run/trials/r00-single-dashjs/timeline").status_code == 404


def test_trial_keys_that_lead_elsewhere_are_404(client):
    for key in ("..", "%2E%2E", "..%2F..%2F..", "%2Fetc"):
        url = f"/api/runs/demo-run/trials/{key}/timeline"
        assert client.get(url).status_code == 404, url


def test_a_path_policy_toggle_is_a_path_event_with_its_buffer_and_reason(client, results):
    folder = results / "demo-run" / "trials" / "r00-unbalanced-dashjs"
    t0 = json.loads((folder / "clock.json").read_text())["t0_unix"]
    record = json.loads((folder / "trial.json").read_text())
    reason = "buffer 1.5 s below the low mark 4 s and not filling (2.5 s before)"
    record["path_policy_toggles"] = [{"t_s": 6.0, "t_unix": t0 + 6.25, "path": 1,
                                      "action": "nobackup", "reason": reason, "buffer_s": 1.5}]
    (folder / "trial.json").write_text(json.dumps(record))
    tl = client.get("/api/runs/demo-run/trials/r00-unbalanced-dashjs/timeline").json
    assert {"t_s": 6.25, "path": 1, "what": "policy: joins at 1.5 s buffered",
            "detail": reason} in tl["path_events"]
    page = client.get("/runs/demo-run/trials/r00-unbalanced-dashjs").get_data(as_text=True)
    assert "Path events" in page and reason in page


def test_pages_render_the_run(client):
    listing = client.get("/runs/").get_data(as_text=True)
    assert 'href="/runs/demo-run"' in listing
    page = client.get("/runs/demo-run").get_data(as_text=True)
    for label in ("balanced", "unbalanced", "single", "startup delay"):
        assert label in page
    trial = client.get("/runs/demo-run/trials/r00-balanced-dashjs").get_data(as_text=True)
    assert 'id="timeline-data"' in trial and "r00-single-dashjs" in trial  # the overlay menu


def test_run_page_of_a_missing_run_is_404(client):
    assert client.get("/runs/no-such-run").status_code == 404
    assert client.get("/api/runs/no-such-run").json["error"].startswith("no run")


def test_the_results_folder_can_be_a_link_itself(tmp_path, results):
    link = tmp_path / "linked-results"
    link.symlink_to(results, target_is_directory=True)
    client = create_app(Path(link)).test_client()
    assert client.get("/api/runs/demo-run").status_code == 200


def test_a_profile_events_detail_names_what_it_set():
    from mpstream.runner.report.runfolders import _event_detail

    event = {"at_s": 15.0, "path": 0, "action": "change", "dir": "downlink",
             "set": {"rate": 2000000, "delay_ms": None, "loss": 0.01}}
    assert _event_detail(event) == "downlink, rate 2000000, loss 0.01"
    assert _event_detail({"at_s": 20.0, "path": 1, "action": "down"}) == ""
