"""The run pages' API (runner/report/runpages.py) over real run folders made from the golden
fixture's trials: the list, a run's conditions (the report's own figures and intervals, also for
a run that stopped when sure, with no report file read), a trial's timeline, the OpenAPI
document, and names that lead out of the results folder (404, nothing outside read or listed).
The same app behind nginx and gunicorn, in Chromium: tests/e2e/test_run_pages.py."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from mpstream.runner.report.analysis import analyze
from mpstream.runner.report.build import build_report
from mpstream.runner.report.runpages import create_app
from mpstream.runner.report.summary import write_summary
from mpstream.runner.until import Until
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


def test_the_figures_are_the_reports_own_and_no_report_file_is_read(tmp_path):
    run = tmp_path / "results" / "golden"
    shutil.copytree(GOLDEN, run)
    report = build_report(run, tmp_path / "report")
    with (report.out_dir / "conditions.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    # A report in the run folder that says otherwise is not what the pages show.
    (run / "report").mkdir()
    (run / "report" / "conditions.csv").write_text("condition,metric,unit,n,mean,sd,ci95_low,"
                                                   "ci95_high\nunbalanced,stall_ms,ms,9,1,,,\n")
    shutil.copy(report.out_dir / "trials.csv", run / "report" / "trials.csv")
    detail = create_app(tmp_path / "results").test_client().get("/api/runs/golden").json
    assert detail["source"] == "computed from the trials" and detail["intervals"] == "95% CI"
    got = [(c["group"], f) for c in detail["conditions"] for f in c["figures"]]
    assert [(g, f["metric"]) for g, f in got] == [(r["condition"], r["metric"]) for r in rows]
    for (_, f), row in zip(got, rows, strict=True):  # conditions.csv, figure by figure
        assert f["n"] == int(row["n"]) and f["unit"] == row["unit"], row
        for column in ("mean", "sd", "ci95_low", "ci95_high"):
            want = pytest.approx(float(row[column]), rel=1e-9) if row[column] else None
            assert f[column] == want, (row, column)


def _until_run(out: Path) -> Path:
    """A demo run of 3 rounds that stopped when sure on the startup delay, whose rounds' startup
    delays differ (0, 30 and 120 ms above the golden trial's), so that its intervals have a
    width."""
    run = make_run(out, rounds=3)
    spec = json.loads((run / "run.json").read_text())
    spec["until"] = Until.parse("startup_delay_ms:5", 3).as_json()
    (run / "run.json").write_text(json.dumps(spec))
    for trial in (run / "trials").iterdir():
        later = 30 * int(trial.name[1:3]) ** 2
        events = json.loads((trial / "events.json").read_text())
        for e in events:
            if e["type"] == "startup":
                e["data"]["startup_delay_ms"] += later
        (trial / "events.json").write_text(json.dumps(events))
    return run


def test_a_run_that_stopped_when_sure_shows_the_reports_anytime_interval(tmp_path):
    run = _until_run(tmp_path / "results" / "until-run")
    detail = create_app(run.parent).test_client().get("/api/runs/until-run").json
    analysis = analyze(run)
    summary = json.loads(write_summary(build_report(run, tmp_path / "report"), analysis.run,
                                       tmp_path / "summary.json").read_text())
    by_label = {c["label"]: c["metrics"] for c in summary["conditions"]}
    page = figures(detail)
    for group in analysis.groups:
        s = analysis.summaries[group]["startup_delay_ms"]
        f = page[(group.condition, "startup_delay_ms")]
        assert s.n == f["n"] == 3 and s.ci_high - s.ci_low > 400  # Student's t: 310 ms
        assert (f["ci95_low"], f["ci95_high"]) == pytest.approx((s.ci_low, s.ci_high), rel=1e-12)
        assert by_label[group.condition]["startup_delay_ms"]["ci95"] == pytest.approx(
            [f["ci95_low"], f["ci95_high"]], rel=1e-5)
    assert detail["intervals"] == "anytime-valid 95% interval"


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
