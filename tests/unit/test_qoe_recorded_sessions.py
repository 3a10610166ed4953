"""Real recorded sessions (tests/fixtures/sessions/) fed to the collector's summary endpoint
and to the runner's report: every figure both show is equal."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from mpstream.runner.layout import write_json
from mpstream.runner.report.build import build_report
from mpstream.server.app import create_app

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sessions"
NAMES = ("stalls", "switches", "cut")
# report column -> (summary field, scale): the report shows rates in Mbit/s
SAME = {
    "startup_delay_ms": ("startup_delay_ms", 1), "manifest_ms": ("manifest_ms", 1),
    "first_segment_ms": ("first_segment_ms", 1), "decode_ms": ("decode_ms", 1),
    "stall_count": ("stall_count", 1), "stall_ms": ("stall_ms", 1),
    "longest_stall_ms": ("longest_stall_ms", 1), "rebuffer_ratio": ("rebuffer_ratio", 1),
    "switches": ("switches", 1), "segments": ("segments", 1), "played_s": ("played_s", 1),
    "mean_bitrate_mbps": ("mean_bitrate_bps", 1e-6),
    "download_rate_mbps": ("mean_download_rate_bps", 1e-6),
    "qoe_yin": ("qoe_yin", 1), "qoe_clae": ("qoe_clae", 1), "qoe_duanmu": ("qoe_duanmu", 1),
    "qoe_yu": ("qoe_yu", 1),
}  # fmt: skip


def read(name: str, file: str):
    return json.loads((FIXTURES / name / file).read_text())


@pytest.fixture(scope="module")
def collector_summaries(tmp_path_factory):
    client = create_app(f"sqlite:///{tmp_path_factory.mktemp('c') / 'qoe.sqlite3'}").test_client()
    out = {}
    for name in NAMES:
        session = {k: v for k, v in read(name, "session.json").items() if k != "created_at"}
        assert client.post("/api/v1/sessions", json=session).status_code == 201
        events = read(name, "events.json")
        r = client.post(f"/api/v1/sessions/{session['id']}/events", json={"events": events})
        assert r.status_code == 200 and r.json["stored"] == len(events)
        out[name] = client.get(f"/api/v1/sessions/{session['id']}/summary").json
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    conditions = [read(name, "trial.json")["condition"] for name in NAMES]
    write_json(run / "run.json", {"scenario": "qoe-fixtures", "description": "recorded",
                                  "conditions": conditions})
    for name in NAMES:
        shutil.copytree(FIXTURES / name, run / "trials" / read(name, "trial.json")["key"])
    rep = build_report(run)
    with (rep.out_dir / "trials.csv").open() as fh:
        csv_rows = {r["condition"]: r for r in csv.DictReader(fh)}
    return rep, csv_rows


def test_the_fixtures_are_what_they_say(collector_summaries):
    s = collector_summaries
    assert s["stalls"]["stall_count"] >= 1 and s["stalls"]["stall_ms"] > 1000
    assert s["switches"]["switches"] >= 2
    assert s["cut"]["end_reason"] is None  # the record stops when the only path went down
    assert all(s[n]["startup_delay_ms"] > 0 for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_collector_and_report_agree_on_every_figure(collector_summaries, report, name):
    rep, csv_rows = report
    summary = collector_summaries[name]
    (row,) = rep.per_trial[name]
    for column, (field, scale) in SAME.items():
        want = summary[field]
        assert want is not None, f"{name}: the collector has no {field}"
        assert row[column] == pytest.approx(want * scale, rel=1e-12), f"{name}: {column}"
        assert float(csv_rows[name][column]) == pytest.approx(want * scale, rel=1e-8), column
    capacity = read(name, "trial.json")["capacity_bps"]
    assert row["download_share"] == pytest.approx(summary["mean_download_rate_bps"] / capacity)


def test_report_columns_name_the_scores(report):
    _, csv_rows = report
    columns = " ".join(next(iter(csv_rows.values())))
    for score in ("yin", "clae", "duanmu", "yu"):
        assert f"qoe_{score}" in columns


def test_stall_after_the_throttle_is_counted(report):
    rep, _ = report
    (row,) = rep.per_trial["stalls"]
    assert row["stalls_after_event"] == row["stall_count"] == 1


def test_p1203_input_per_session(report):
    from mpstream.runner.report.build import write_p1203_inputs

    rep, _ = report
    written = {p.stem: json.loads(p.read_text()) for p in write_p1203_inputs(rep)}
    assert set(written) == {read(n, "trial.json")["key"] for n in NAMES}
    stalls = written[read("stalls", "trial.json")["key"]]
    segs = stalls["I13"]["segments"]
    assert len(segs) == rep.per_trial["stalls"][0]["segments"]
    assert all(s["codec"] == "h264" and s["fps"] == 25.0 and s["duration"] > 0 for s in segs)
    assert [s["start"] for s in segs] == sorted(s["start"] for s in segs)
    # the startup delay as a stall at 0, then the recorded stall
    assert len(stalls["I23"]["stalling"]) == 1 + rep.per_trial["stalls"][0]["stall_count"]
    assert stalls["I11"]["segments"], "dash.js fetched separate audio"
