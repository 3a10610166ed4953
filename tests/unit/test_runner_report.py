"""The report from raw trial folders built here by computation: its numbers must equal what the
raw data says, computed independently in the test."""

import csv
import json
import math
from pathlib import Path

import pytest

from mpstream.qoe.stats import summarize
from mpstream.runner.layout import write_json
from mpstream.runner.report.build import build_report
from mpstream.runner.samplers.kernel import FIELDS

T_975_DF2 = 4.302652729911275  # Student's t, 97.5% quantile, 2 degrees of freedom
SEG_BYTES = 6_000_000
CAPACITY = 30e6


def seg_durations_s(cond: str, k: int) -> list[float]:
    base = 2.0 if cond == "balanced" else 4.0
    return [base + 0.1 * k + 0.05 * i for i in range(6)]


def make_events(cond: str, k: int) -> list[dict]:
    bitrate = 4e6 + k * 1e6  # the rendition on screen throughout
    ev = [{"seq": 0, "t_ms": 10, "type": "startup",
           "data": {"startup_delay_ms": 400.0 + 100 * k + (300 if cond == "single" else 0),
                    "manifest_ms": 100.0, "first_segment_ms": 200.0, "decode_ms": 50.0,
                    "codec": "avc1.64001f", "width": 1280, "height": 720, "bitrate": bitrate}}]
    t = 1000.0
    for i, d in enumerate(seg_durations_s(cond, k)):
        ev.append({"seq": len(ev), "t_ms": t, "type": "segment", "data": {
            "url": f"/media/v/{i}.m4s", "kind": "video", "bitrate": 8e6, "bytes": SEG_BYTES,
            "t_request": t, "t_first_byte": t + 20, "t_done": t + d * 1000, "index": i + 1,
            "duration_s": 6.0}})
        # audio segments must not count as video segments
        ev.append({"seq": len(ev), "t_ms": t, "type": "segment", "data": {
            "url": f"/media/a/{i}.m4s", "kind": "audio", "bitrate": 1.28e5, "bytes": 100_000,
            "t_request": t, "t_first_byte": t + 1, "t_done": t + 5, "index": i + 1,
            "duration_s": 6.0}})
        t += d * 1000 + 500
    for s in range(k):  # trial k stalls k times, 1000 ms + 250 ms × s each
        ev.append({"seq": len(ev), "t_ms": t, "type": "stall_start", "data": {"position": 10.0}})
        ev.append({"seq": len(ev), "t_ms": t + 1000, "type": "stall_end",
                   "data": {"position": 10.0, "duration_ms": 1000.0 + 250 * s}})
    ev.append({"seq": len(ev), "t_ms": t, "type": "quality_switch", "data": {
        "from_bitrate": 1e6, "to_bitrate": bitrate, "width": 1280, "height": 720,
        "codec": "avc1.64001f"}})
    ev.append({"seq": len(ev), "t_ms": t + 1, "type": "end",
               "data": {"reason": "duration", "position": 60.0}})
    return ev


def write_samples(path: Path, host: str, rates: dict[int, float], retrans_per_s: dict[int, int]):
    """Two sockets (one per path), sampled every 0.1 s for 10 s."""
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for step in range(101):
            t = step / 10
            for p in (0, 1):
                w.writerow({k: "" for k in FIELDS} | {
                    "t_s": f"{t:.3f}", "host": host, "path": p, "local": f"10.0.{p}.2:4000{p}",
                    "peer": "10.9.0.1:8080", "state": "ESTAB", "mptcp": 1, "token": "x",
                    "bytes_sent": int(1000 * t), "bytes_acked": 0,
                    "bytes_received": int(rates.get(p, 0) * t), "bytes_retrans": 0,
                    "retrans_total": int(retrans_per_s.get(p, 0) * t), "rtt_ms": 10 + p,
                    "cwnd": 10, "cc": "cubic"})


def link_stats(k: int) -> dict:
    """Trial k's emulator counts: path 0's downlink (the server sends) dropped 10k + 5 of 1000
    packets by its queue, 3 by random loss, 2 by its AQM; its uplink's and a down link's
    drops are not congestion in the data direction."""
    down = {"packets_in": 1000, "dropped_queue_packets": 10 * k + 5, "dropped_loss_packets": 3,
            "dropped_aqm_packets": 2, "dropped_down_packets": 400}
    return {"path0": {"a_to_b": {"packets_in": 10, "dropped_queue_packets": 9}, "b_to_a": down},
            "path1": {"a_to_b": {"packets_in": 0}, "b_to_a": {"packets_in": 0}}}


# trial.json as mpstream wrote it before records were versioned (version 1)
STARTED = "2026-11-01T10:00:00+00:00"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("run")
    conds = [{"label": "balanced", "profile": "x", "reference": "thesis/bandwidth/balanced",
              "transport": None, "set": {}},
             {"label": "single", "profile": "y", "reference": "thesis/bandwidth/single",
              "transport": "tcp", "set": {}}]
    write_json(run / "run.json", {"scenario": "unit", "description": "d", "conditions": conds})
    order = 0
    for k in range(3):
        for cond in conds:
            key = f"r{k:02d}-{cond['label']}-dashjs"
            d = run / "trials" / key
            d.mkdir(parents=True)
            meta = {"key": key, "round": k, "order": order, "kind": "video", "condition": cond,
                    "player": "dashjs", "status": "ok", "capacity_bps": CAPACITY,
                    "sender": "server", "started_at": STARTED,
                    "paths": [{"index": 0, "name": "path0"}, {"index": 1, "name": "path1"}]}
            order += 1
            write_json(d / "trial.json", meta)
            write_json(d / "events.json", make_events(cond["label"], k))
            write_samples(d / "samples-client.csv", "client", {0: 3e6, 1: 1e6}, {})
            write_samples(d / "samples-server.csv", "server", {}, {0: 2, 1: 1 + k})
            if cond["label"] == "balanced":  # the emulators' counts (the other kept none)
                write_json(d / "link-stats.json", link_stats(k))
    bad = run / "trials" / "r03-single-dashjs"
    bad.mkdir()
    write_json(bad / "trial.json", {"key": bad.name, "round": 3, "order": 99,
                                    "condition": conds[1], "player": "dashjs",
                                    "status": "failed", "reason": "nginx did not start",
                                    "started_at": STARTED})
    (run / "trials" / "r04-single-dashjs").mkdir()  # interrupted: no trial.json, not counted
    return run


@pytest.fixture(scope="module")
def report(run_dir):
    return build_report(run_dir)


def conditions_csv(run_dir) -> dict[tuple[str, str], dict]:
    with (run_dir / "report" / "conditions.csv").open() as fh:
        return {(r["condition"], r["metric"]): r for r in csv.DictReader(fh)}


def expected_rate_mbps(cond: str, k: int) -> float:
    rates = [SEG_BYTES * 8 / d for d in seg_durations_s(cond, k)]
    return sum(rates) / len(rates) / 1e6


def test_download_rate_mean_sd_and_ci_match_the_raw_segments(run_dir, report):
    rows = conditions_csv(run_dir)
    for cond in ("balanced", "single"):
        per_trial = [expected_rate_mbps(cond, k) for k in range(3)]
        mean = sum(per_trial) / 3
        sd = math.sqrt(sum((x - mean) ** 2 for x in per_trial) / 2)
        half = T_975_DF2 * sd / math.sqrt(3)
        r = rows[(cond, "download_rate_mbps")]
        assert int(r["n"]) == 3
        assert float(r["mean"]) == pytest.approx(mean, rel=1e-5)
        assert float(r["sd"]) == pytest.approx(sd, rel=1e-5)
        assert float(r["ci95_low"]) == pytest.approx(mean - half, rel=1e-5)
        assert float(r["ci95_high"]) == pytest.approx(mean + half, rel=1e-5)
        share = rows[(cond, "download_share")]
        assert float(share["mean"]) == pytest.approx(mean * 1e6 / CAPACITY, rel=1e-5)


def test_qoe_metrics_match_the_events(run_dir, report):
    rows = conditions_csv(run_dir)
    # startup: 400, 500, 600 ms (balanced)
    assert float(rows[("balanced", "startup_delay_ms")]["mean"]) == pytest.approx(500)
    assert float(rows[("single", "startup_delay_ms")]["mean"]) == pytest.approx(800)
    # trial k stalls k times: 0, 1, 2 stalls; stall time 0, 1000, 1000 + 1250
    assert float(rows[("balanced", "stall_count")]["mean"]) == pytest.approx(1.0)
    assert float(rows[("balanced", "stall_ms")]["mean"]) == pytest.approx((1000 + 2250) / 3)
    assert float(rows[("balanced", "longest_stall_ms")]["mean"]) == pytest.approx(
        (0 + 1000 + 1250) / 3)
    ratios = [s / (s + 60_000) for s in (0, 1000, 2250)]
    assert float(rows[("balanced", "rebuffer_ratio")]["mean"]) == pytest.approx(
        sum(ratios) / 3, rel=1e-5)
    assert float(rows[("balanced", "mean_bitrate_mbps")]["mean"]) == pytest.approx(5.0)
    assert float(rows[("balanced", "switches")]["mean"]) == pytest.approx(1.0)
    assert float(rows[("balanced", "segments")]["mean"]) == pytest.approx(6.0)


def test_kernel_metrics_match_the_samples(run_dir, report):
    rows = conditions_csv(run_dir)
    # client: path 0 receives 3 MB/s, path 1 1 MB/s -> 75% / 25%
    assert float(rows[("balanced", "path0_bytes_share")]["mean"]) == pytest.approx(0.75, rel=1e-3)
    assert float(rows[("balanced", "path1_bytes_share")]["mean"]) == pytest.approx(0.25, rel=1e-3)
    # server: path 0 retransmits 2/s; path 1 1, 2, 3 /s over trials
    assert float(rows[("single", "path0_retrans_per_s")]["mean"]) == pytest.approx(2.0, rel=1e-3)
    assert float(rows[("single", "path1_retrans_per_s")]["mean"]) == pytest.approx(2.0, rel=1e-3)
    assert float(rows[("single", "path1_retrans_per_s")]["sd"]) == pytest.approx(1.0, rel=1e-3)
    assert float(rows[("single", "retrans_per_s")]["mean"]) == pytest.approx(4.0, rel=1e-3)
    assert float(rows[("single", "path1_rtt_ms")]["mean"]) == pytest.approx(11.0)
    # the link's drops in the data direction: (10k + 5 + 3 + 2) / 1000 over k = 0, 1, 2
    assert float(rows[("balanced", "path0_link_drop_share")]["mean"]) == pytest.approx(0.02)
    assert ("balanced", "path1_link_drop_share") not in rows  # nothing entered it: no figure
    assert rows[("single", "path0_link_drop_share")]["n"] == "0"  # no counts kept


def test_a_paths_rtt_is_the_one_its_data_saw():
    """Each poll counts by the bytes its socket sent since its previous poll: an idle socket
    beside the data's (iperf3's control connection) and a socket's first poll count for
    nothing, and a poll that moved three times the bytes counts three times."""
    from mpstream.runner.metrics.common import data_weighted_rtt_ms

    def row(t, local, sent, rtt, path=0, state="ESTAB"):
        return {"t_s": t, "path": path, "local": local, "peer": "p", "state": state,
                "bytes_sent": sent, "rtt_ms": rtt}

    rows = [row(0.0, "data", 0, 99.0), row(0.0, "idle", 3, 36.0),
            row(0.1, "data", 1000, 30.0), row(0.1, "idle", 3, 36.0),
            row(0.2, "data", 4000, 34.0), row(0.2, "idle", 3, 36.0),
            row(0.2, "other-path", 9000, 80.0, path=1),
            row(0.3, "data", 5000, 50.0, state="FIN-WAIT-1")]
    assert data_weighted_rtt_ms(rows, 0) == pytest.approx((30.0 * 1000 + 34.0 * 3000) / 4000)
    assert math.isnan(data_weighted_rtt_ms(rows, 1))  # one poll of its socket: nothing moved
    assert math.isnan(data_weighted_rtt_ms(rows, 2))


def test_per_second_series_and_segments_csv(run_dir, report):
    with (run_dir / "report" / "paths_per_second.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    r0 = [r for r in rows if r["trial"] == "r00-balanced-dashjs" and r["path"] == "0"]
    # bins 0..9 carry 3 MB each (the sample at t=10.0 opens bin 10 with 0.1 s worth)
    assert sum(int(r["bytes_received"]) for r in r0) == 30_000_000
    assert all(abs(int(r["bytes_received"]) - 3_000_000) <= 1 for r in r0 if r["second"] != "10"
               and r["second"] != "0")
    with (run_dir / "report" / "segments.csv").open() as fh:
        segs = list(csv.DictReader(fh))
    mine = [s for s in segs if s["trial"] == "r01-single-dashjs"]
    assert [int(s["segment_index"]) for s in mine] == [1, 2, 3, 4, 5, 6]
    d = seg_durations_s("single", 1)
    assert [float(s["download_rate_bps"]) for s in mine] == pytest.approx(
        [SEG_BYTES * 8 / x for x in d], abs=1)


def test_reference_table_sets_published_beside_ours(run_dir, report):
    with (run_dir / "report" / "reference.csv").open() as fh:
        ref = {(r["condition"], r["metric"]): r for r in csv.DictReader(fh)}
    bal = ref[("balanced", "download_rate_mbps")]
    assert float(bal["published"]) == pytest.approx(17.6)
    assert float(bal["ours_mean"]) == pytest.approx(
        sum(expected_rate_mbps("balanced", k) for k in range(3)) / 3, rel=1e-5)
    assert float(ref[("single", "download_share")]["published"]) == pytest.approx(8.6 / 30)


def test_failed_trials_are_listed_not_counted(run_dir, report):
    assert [f["key"] for f in report.failed] == ["r03-single-dashjs"]
    assert len(report.per_trial["single"]) == 3
    with (run_dir / "report" / "trials.csv").open() as fh:
        trials = list(csv.DictReader(fh))
    assert len(trials) == 7
    assert next(t for t in trials if t["trial"] == "r03-single-dashjs")["reason"] == \
        "nginx did not start"


def test_html_is_self_contained_with_every_figure(run_dir, report):
    html = report.html.read_text()
    pngs = sorted(p.name for p in (run_dir / "report").glob("*.png"))
    assert pngs == ["metrics.png", "path-share.png", "retransmissions-per-path.png",
                    "segment-download-rate.png"]
    for p in pngs:
        assert (run_dir / "report" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert html.count("data:image/png;base64,") == len(pngs)
    assert "src=\"http" not in html and "<script" not in html
    assert "nginx did not start" in html and "17.6" in html


def test_summarize_edge_cases():
    assert summarize([]).n == 0 and math.isnan(summarize([]).mean)
    one = summarize([3.0, float("nan")])
    assert one.n == 1 and one.mean == 3.0 and math.isnan(one.sd) and math.isnan(one.ci_low)
    s = summarize([1.0, 2.0, 3.0])
    assert s.half_width == pytest.approx(T_975_DF2 * 1.0 / math.sqrt(3))


def test_report_of_a_folder_that_is_not_a_run_says_so(tmp_path):
    from mpstream.errors import UserError

    with pytest.raises(UserError, match="not a run folder"):
        build_report(tmp_path)
    write_json(tmp_path / "run.json", {"scenario": "x"})
    with pytest.raises(UserError, match="no finished trials"):
        build_report(tmp_path)
    assert json.loads((tmp_path / "run.json").read_text())["scenario"] == "x"


def test_a_stall_still_open_at_the_end_counts_until_the_last_event():
    from mpstream.qoe.metrics import stalls

    ev = [
        {"seq": 0, "t_ms": 1000, "type": "stall_start", "data": {"position": 1}},
        {"seq": 1, "t_ms": 1500, "type": "stall_end", "data": {"position": 1, "duration_ms": 500}},
        {"seq": 2, "t_ms": 20_000, "type": "stall_start", "data": {"position": 19}},
        {"seq": 3, "t_ms": 32_500, "type": "end", "data": {"reason": "duration", "position": 19}},
    ]
    assert [s.duration_ms for s in stalls(ev)] == [500.0, 12_500.0]
    assert [s.duration_ms for s in stalls(ev[:2])] == [500.0]


def test_groups_name_the_browser_and_codec_only_when_they_vary(tmp_path):
    from mpstream.runner.report.build import group_of, varying_factors
    from tests.records import trial_data

    def rec(key, **fields):
        return trial_data(tmp_path, key, "bal", player="dashjs", **fields)

    old = rec("r00-bal-dashjs")  # a trial from before browsers existed
    ff = rec("r00-bal-dashjs-firefox-hevc", browser="firefox", codec="hevc")
    cr = rec("r00-bal-dashjs-avc", browser="chromium", codec="avc")
    assert varying_factors([old]) == frozenset()
    assert group_of(old, varying_factors([old])) == "bal"
    several = varying_factors([old, ff, cr])
    assert several == {"browser", "codec"}
    assert [group_of(r, several) for r in (old, ff, cr)] == [
        "bal/chromium/auto", "bal/firefox/hevc", "bal/chromium/avc"]
    assert group_of(ff, True) == "bal/dashjs"


def test_explanations_join_the_evidence_per_condition(tmp_path):
    from mpstream.qoe.stats import summarize
    from mpstream.runner.report.build import explanations

    summaries = {
        "unbalanced": {"startup_delay_ms": summarize([1000.0, 1200.0]),
                       "first_segment_ms": summarize([900.0]),
                       "first_segment_held_ms": summarize([300.0, 100.0]),
                       "download_share": summarize([0.87]),
                       "held_share": summarize([0.03]),
                       "path0_rtt_ms": summarize([40.0]), "path1_rtt_ms": summarize([153.0]),
                       "path1_first_segment_share": summarize([0.3, 0.2])},
        "single": {"startup_delay_ms": summarize([500.0]), "path0_rtt_ms": summarize([40.0])},
        "iperf": {"throughput_mbps": summarize([28.0])},  # no player: nothing to explain
    }
    lines = explanations(list(summaries), summaries)
    assert lines == [
        "unbalanced: startup 1100 ms; the first video segment 900 ms of it; the sender held "
        "data back 200 ms during that segment; segments came at 87.0% of the path sum; held "
        "3.0% of segment time; slowest path's RTT 153 ms (path1); path1 carried 25% of the "
        "bytes of the first segment.",
        "single: startup 500 ms.",
    ]


def test_path_check_rows_list_each_interface_then_the_aggregate(tmp_path):
    from mpstream.runner.record import PathCheck
    from mpstream.runner.report.build import path_check_rows
    from tests.records import trial_data

    check = PathCheck.model_validate({
        "url": "http://192.0.2.1/m.mpd", "probe_url": "http://192.0.2.1/probe/blob",
        "seconds": 3.0, "errors": ["wlan0: timed out"],
        "interfaces": [{"interface": "eth0", "address": "192.0.2.2", "rtt_ms": 1.5,
                        "throughput_bps": 9.4e8, "bytes": 1, "seconds": 3.0},
                       {"interface": "wlan0", "address": "192.0.2.3", "error": "timed out"}],
        "aggregate": {"transport": "mptcp", "rtt_ms": 1.6, "throughput_bps": 9.5e8,
                      "interface_rx_bytes": {"eth0": 10, "wlan0": 0}}})
    rec = trial_data(tmp_path, "r00-real-dashjs", "real", path_checks={"before": check})
    rows = path_check_rows([rec])
    assert [(r["when"], r["what"]) for r in rows] == [
        ("before", "eth0"), ("before", "wlan0"), ("before", "mptcp aggregate")]
    assert rows[0]["mbps"] == pytest.approx(940.0) and rows[1]["error"] == "timed out"
    assert rows[1]["mbps"] is None and rows[2]["rtt_ms"] == 1.6


def test_a_numeric_sweep_is_found_with_a_line_per_other_setting():
    from mpstream.runner.report.build import numeric_sweep
    from mpstream.runner.scenario import load_scenario

    conds = [c.model_dump(mode="json") for c in load_scenario("mpcc-buffer-sweep").all_conditions()]
    key, xs, lines = numeric_sweep(conds)
    assert key == "paths.*.downlink.queue_bytes"
    assert xs["550k-bbr"] == 550000.0 and xs["1000k-lia"] == 1e6
    assert lines["550k-bbr"] == "bbr" and lines["1000k-lia"] == "lia"
    # Not a sweep: no settings, a setting with two values, or settings that differ.
    assert numeric_sweep([{"label": "a", "set": {}}] * 3) is None
    two = [{"label": f"c{i}", "set": {"x": i % 2}} for i in range(4)]
    assert numeric_sweep(two) is None
    mixed = [{"label": f"c{i}", "set": {"x": i}} for i in range(3)] + [{"label": "d", "set": {}}]
    assert numeric_sweep(mixed) is None


def _sweep_report(tmp_path):
    from mpstream.runner.report import build as report_mod

    conds = [{"label": f"{b}k-{cc}", "set": {"cc": cc, "q": b * 1000}}
             for b in (1, 2, 3) for cc in ("lia", "cubic")]
    groups = [report_mod.Group(c["label"]) for c in conds][:-1]  # 3k-cubic has no trial yet
    summaries = {g: {"throughput_mbps": summarize([float(i), float(i) + 2]),
                     "retrans_per_s": summarize([1.0]),  # not one of a sweep's metrics
                     "path0_rtt_ms": summarize([10.0 * i])} for i, g in enumerate(groups)}
    order = ["throughput_mbps", "retrans_per_s", "path0_rtt_ms"]
    rep = report_mod.Analysis(tmp_path, {"scenario": "sweep"}, [], frozenset(), 0, {}, groups,
                              {}, {}, summaries, order, [], {}, {})
    rep.sweep = report_mod.sweep_of(groups, summaries, order, conds)
    return rep


def test_a_sweep_gathers_each_conditions_summary_at_its_swept_value(tmp_path):
    sweep = _sweep_report(tmp_path).sweep
    assert sweep.setting == "q" and sweep.values() == [1000.0, 2000.0, 3000.0]
    assert [m for m, _ in sweep.titles] == ["throughput_mbps", "path0_rtt_ms"]
    assert sweep.titles[1][1] == "sender's smoothed RTT, path 0 (ms)"
    assert sweep.points["throughput_mbps"]["cubic"][2000.0].mean == 4.0  # 2k-cubic: [3, 5]
    assert sweep.points["path0_rtt_ms"]["lia"][3000.0].mean == 40.0
    assert 3000.0 not in sweep.points["throughput_mbps"]["cubic"]


def test_the_sweep_csv_has_a_row_per_metric_line_and_value(tmp_path):
    from mpstream.runner.report.csvfiles import write_sweep_csv

    rep = _sweep_report(tmp_path)
    write_sweep_csv(rep.sweep, tmp_path / "sweep.csv")
    rows = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert len(rows) == 2 * 5  # two metrics, five conditions with trials
    row = next(r for r in rows if r["line"] == "cubic" and r["value"] == "2000"
               and r["metric"] == "throughput_mbps")
    assert (row["setting"], row["unit"], row["n"], row["mean"]) == ("q", "Mbit/s", "2", "4")
    assert float(row["ci95_low"]) < 4 < float(row["ci95_high"])


def test_a_sweeps_terminal_tables_have_a_row_per_value_and_a_column_per_line(tmp_path):
    from rich.console import Console

    from mpstream.runner.report.table import print_sweep_tables

    console = Console(record=True, width=200)
    print_sweep_tables(_sweep_report(tmp_path).sweep, console)
    text = console.export_text()
    assert text.count("against q") == 2
    thr = text[:text.index("RTT")]
    row_2k = next(line for line in thr.splitlines() if line.strip("│ ").startswith("2k"))
    # 2k-lia is [2, 4] and 2k-cubic [3, 5]: the means with their half-widths, lia first.
    cells = [c.strip() for c in row_2k.split("│") if c.strip()]
    assert cells[1].startswith("3.0 ±") and cells[2].startswith("4.0 ±")
    row_3k = next(line for line in thr.splitlines() if line.strip("│ ").startswith("3k"))
    assert row_3k.rstrip(" │").endswith("–")  # no 3k-cubic trial


def test_the_html_report_tables_a_sweep_by_value_and_line(tmp_path):
    from mpstream.runner.report import build as report_mod

    rep = _sweep_report(tmp_path)
    report_mod.write_html(rep, tmp_path / "r.html", [])
    page = " ".join((tmp_path / "r.html").read_text().split())
    assert "<h2>Against q</h2>" in page and page.count("<h3>") == 2
    # 2k-cubic is [3, 5]: its cell in the throughput table's 2k row, after 2k-lia's.
    row = page[page.index("<tr><td>2k</td>"):]
    row = row[:row.index("</tr>")]
    assert row.index("3.0 ±") < row.index("4.0 ± 1.4 [") and "(n=2)" in row
    row_3k = page[page.index("<tr><td>3k</td>"):]
    assert row_3k[:row_3k.index("</tr>")].endswith("<td>–</td>")  # no 3k-cubic trial


def test_the_sweep_figure_is_drawn_from_the_report(tmp_path, monkeypatch):
    from mpstream.runner.report import build as report_mod
    from mpstream.runner.report import plots

    rep = _sweep_report(tmp_path)
    seen = {}

    def capture(path, x_name, points, titles, x_tick):
        seen.update(path=path, x=x_name, points=points, tick=x_tick(2000.0))
        return path

    monkeypatch.setattr(plots, "sweep_lines", capture)
    assert tmp_path / "sweep.png" in report_mod.write_figures(rep, tmp_path)
    assert seen["x"] == "q" and seen["tick"] == "2k" and seen["points"] is rep.sweep.points


def test_the_sweep_figure_is_drawn(tmp_path):
    from mpstream.runner.report import plots

    s = summarize([1.0, 2.0])
    out = plots.sweep_lines(tmp_path / "sweep.png", "q", {"m": {"lia": {1.0: s, 2.0: s}}},
                            [("m", "m (x)")], str)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
