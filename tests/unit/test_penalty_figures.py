"""scripts/penalty_figures.py: the ratio the docs quote for startup delays, from a run folder
built here (trial.json and events.json, as the runner writes them)."""

import json
import statistics

import pytest

from tests.records import trial_record
from tests.scripts import load_script

figures = load_script("penalty_figures")


def _run(tmp_path, startups: dict[str, list[float]]):
    order = 0
    for label, values in startups.items():
        for i, ms in enumerate(values):
            key = f"r{i:02d}-{label}-dashjs"
            d = tmp_path / "trials" / key
            d.mkdir(parents=True)
            (d / "trial.json").write_text(
                trial_record(key, label, round=i, order=order).model_dump_json())
            (d / "events.json").write_text(json.dumps([
                {"seq": 0, "t_ms": 100.0 + ms, "type": "startup",
                 "data": {"startup_delay_ms": ms, "manifest_ms": 0, "first_segment_ms": ms,
                          "decode_ms": 0, "codec": "avc1.64001f", "width": 1280,
                          "height": 720, "bitrate": 1_500_000}}]))
            order += 1
    return tmp_path


def test_bootstrap_ratio_of_constant_samples_is_exact():
    assert figures.bootstrap_ratio([600.0] * 5, [500.0] * 5, resamples=200) == (1.2, 1.2, 1.2)


def test_bootstrap_interval_holds_the_ratio_and_narrows_with_more_trials():
    xs = [480.0, 520.0, 610.0, 455.0, 530.0]
    ys = [470.0, 505.0, 430.0, 515.0, 480.0]
    value, low, high = figures.bootstrap_ratio(xs, ys, resamples=2000)
    assert value == pytest.approx(statistics.mean(xs) / statistics.mean(ys))
    assert low < value < high
    _, low4, high4 = figures.bootstrap_ratio(xs * 4, ys * 4, resamples=2000)
    assert high4 - low4 < 0.75 * (high - low)


def test_ratio_reads_the_startup_delays_of_a_run(tmp_path, capsys):
    run = _run(tmp_path, {"balanced": [500.0, 520.0, 480.0], "single": [400.0, 420.0, 380.0],
                          "other": [9000.0, 9000.0]})
    figures.ratio(run, "balanced", "single")
    out = capsys.readouterr().out
    assert out.startswith("balanced 500 ms (n=3) / single 400 ms (n=3) = 1.250; bootstrap 95% [")


def test_ratio_names_a_condition_without_trials(tmp_path):
    run = _run(tmp_path, {"balanced": [500.0, 520.0]})
    with pytest.raises(SystemExit, match="single has 0"):
        figures.ratio(run, "balanced", "single")


def test_peak_notsent_is_the_largest_held_at_one_poll_per_trial(tmp_path, capsys):
    import csv

    from mpstream.runner.samplers.kernel import FIELDS

    run = _run(tmp_path, {"unbalanced": [500.0, 520.0]})
    for i, peak in enumerate((300_000, 410_000)):
        with (run / "trials" / f"r{i:02d}-unbalanced-dashjs" / "samples-server.csv").open(
                "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            w.writeheader()
            for t, notsent in ((0.1, 1_000), (0.2, peak), (0.3, 0)):
                w.writerow({k: "" for k in FIELDS} | {
                    "t_s": t, "host": "server", "path": 1, "local": "10.2.0.2:8080",
                    "peer": "10.1.1.2:5", "state": "ESTAB", "notsent": notsent})
    figures.peak_notsent([run], "unbalanced")
    assert "peak subflow notsent per trial 292-400 KB: 292, 400" in capsys.readouterr().out


def test_path_return_times_the_failed_path_over_the_quic_hop(tmp_path, capsys):
    from mpstream.runner.record import PathLabel

    t0, origin = 1_800_000_000.0, 0.5  # the profile's events start 0.5 s into the trial clock
    d = tmp_path / "trials" / "r00-mpquic-dashjs"
    d.mkdir(parents=True)
    paths = [PathLabel(index=0, name="p0", client_addr="10.1.0.2"),
             PathLabel(index=1, name="p1", client_addr="10.1.1.2")]
    (d / "trial.json").write_text(trial_record(
        "r00-mpquic-dashjs", "mpquic", transport="mpquic", paths=paths, paths_in_use=[0, 1],
        events_started_unix=t0 + origin).model_dump_json())
    (d / "clock.json").write_text(json.dumps({"t0_monotonic": 1.0, "t0_unix": t0}))
    (d / "profile.json").write_text(json.dumps({"events": [
        {"action": "down", "at_s": 20.0, "path": 0}, {"action": "up", "at_s": 40.0, "path": 0}]}))

    def stat(path, t, rx):
        return {"side": "proxy", "conn": 1, "path": path, "local": "10.1.0.2", "rtt_ms": 10.0,
                "udp_rx_bytes": rx, "t": t0 + t}
    lines = [stat(0, 10.0, 1000), stat(0, 10.1, 90_000),  # before the failure
             {"event": "abandoned", "path": 0, "t": t0 + origin + 21.25},
             {"event": "opened", "path": 3, "local": "10.1.0.2", "t": t0 + origin + 45.5},
             stat(3, origin + 45.6, 2000),  # keep-alive traffic only
             stat(3, origin + 46.0, 60_000)]  # data again
    (d / "quic-proxy.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    figures.path_return([tmp_path], "mpquic")
    out = capsys.readouterr().out
    assert "path 0 carries data again 6.00 s after" in out
    assert "abandoned 1.25 s after the failure, opened again 5.50 s after" in out


def _sender_trial(tmp_path, label: str, polls: list[dict]):
    """A one-path trial of `label` whose server's sampler wrote `polls` (each a row's fields
    beyond the empty ones; ESTAB sockets on the server)."""
    import csv

    from mpstream.runner.record import PathLabel
    from mpstream.runner.samplers.kernel import FIELDS

    key = f"r00-{label}-dashjs"
    d = tmp_path / "trials" / key
    d.mkdir(parents=True)
    (d / "trial.json").write_text(trial_record(
        key, label, transport="tcp", paths_in_use=[0],
        paths=[PathLabel(index=0, name="p0", client_addr="10.1.0.2")]).model_dump_json())
    with (d / "samples-server.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for poll in polls:
            w.writerow({k: "" for k in FIELDS}
                       | {"host": "server", "peer": "x", "state": "ESTAB"} | poll)
    return d


def test_link_losses_sets_the_senders_count_beside_the_links_drops(tmp_path, capsys):
    # Two sockets on path 0 retransmitting 3 + 4, and one on path 1 that must not count.
    d = _sender_trial(tmp_path, "single-tcp", [
        {"t_s": t, "path": path, "local": local, "retrans_total": retrans, "cwnd": cwnd}
        for t, local, path, retrans, cwnd in ((0.1, "a", 0, 1, 10), (0.2, "a", 0, 3, 40),
                                              (0.2, "b", 0, 4, 20), (0.3, "c", 1, 9, 99))])
    # The data direction is down (the server sends); the uplink's and an outage's drops differ.
    (d / "link-stats.json").write_text(json.dumps({"path0": {
        "a_to_b": {"packets_in": 50, "dropped_queue_packets": 40},
        "b_to_a": {"packets_in": 1000, "dropped_queue_packets": 6, "dropped_aqm_packets": 1,
                   "dropped_down_packets": 500}}}))
    figures.link_losses([tmp_path], "single-tcp", 0)
    out = capsys.readouterr().out
    assert "sender counted 7 lost, the link dropped 7 of 1000 (0.70%)" in out
    assert "window p10/p50/p90 10/20/40, at most 40 packets" in out


def test_sender_windows_reads_the_window_and_rtt_only_while_a_socket_sends(tmp_path, capsys):
    import csv

    from mpstream.runner.samplers.kernel import FIELDS

    d = tmp_path / "trials" / "r00-375k-wvegas"
    d.mkdir(parents=True)
    (d / "trial.json").write_text(
        trial_record("r00-375k-wvegas", "375k-wvegas", kind="iperf").model_dump_json())
    (d / "iperf.json").write_text(json.dumps(
        {"end": {"sum_received": {"bits_per_second": 55.5e6}, "sum_sent": {}}}))
    with (d / "samples-server.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        # Socket "a" sends between its polls; "b" (a control connection) sits idle with its
        # handshake's RTT, and "c" sends on path 1: neither may count.
        for t, local, path, sent, cwnd, rtt in (
                (0.1, "a", 0, 100, 10, 30.2), (0.2, "a", 0, 900, 60, 31.0),
                (0.3, "a", 0, 2000, 80, 32.5), (0.4, "a", 0, 2600, 70, 30.6),
                (0.1, "b", 0, 5, 10, 29.0), (0.4, "b", 0, 5, 10, 29.0),
                (0.1, "c", 1, 10, 300, 90.0), (0.4, "c", 1, 99, 300, 90.0)):
            w.writerow({k: "" for k in FIELDS} | {
                "t_s": t, "host": "server", "path": path, "local": local, "peer": "x",
                "state": "ESTAB", "bytes_sent": sent, "cwnd": cwnd, "rtt_ms": rtt})
    figures.sender_windows([tmp_path], "375k-wvegas", 0)
    out = capsys.readouterr().out
    assert "55.5 Mbit/s; while sending (3 polls)" in out
    assert "window p10/p50/p90 60/70/80 packets, smoothed RTT 30.6/31.0/32.5 ms, least 30.6" in out


def test_a_summary_holds_each_trials_figures_the_runs_provenance_and_the_command(
        tmp_path, monkeypatch, capsys):
    run = _run(tmp_path / "run", {"balanced": [500.0, 520.0, 480.0],
                                  "single": [400.0, 420.0, 380.0]})
    out = tmp_path / "data" / "ratio-a.json"
    argv = ["scripts/penalty_figures.py", "ratio", str(run), "balanced", "single",
            "--summary", str(out)]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit, match=r"not a run folder \(it has no run\.json\)"):
        figures.main()
    assert not out.exists()
    (run / "run.json").write_text(json.dumps({
        "trials": 3, "environment": {"commit": "abc", "kernel": "6.18", "cpus": 2},
        "scenario_spec": {"name": "startup", "trials": 3, "conditions": [
            {"label": "balanced"}, {"label": "single"}, {"label": "unbalanced"}]}}))
    figures.main()
    data = json.loads(out.read_text())
    assert data["run"]["command"] == (".venv/bin/python scripts/penalty_figures.py ratio "
                                      "RUN_DIR balanced single")
    assert data["run"]["of_run"] == ("mpstream run startup --condition balanced "
                                     "--condition single")
    assert data["run"]["environment"]["commit"] == "abc"
    assert data["run"]["started"] == "2026-11-22T12:00:00+00:00"  # from the trials it read
    balanced = next(c for c in data["conditions"] if c["label"] == "balanced")
    assert [t["startup_delay_ms"] for t in balanced["trials"]] == [500.0, 520.0, 480.0]
    assert balanced["trials"][0]["key"] == "r00-balanced-dashjs"
    assert balanced["metrics"]["startup_ratio"]["mean"] == 1.25
    assert balanced["metrics"]["startup_delay_ms"]["n"] == 3
    # The docs cite it as any summary: the check reads the figure and its trials' spread.
    docsfigures = load_script("docsfigures")
    page = tmp_path / "page.md"
    page.write_text("1.25× <!--fig ratio-a balanced startup_ratio mean--> as late, the "
                    "slowest 520 ms <!--fig ratio-a balanced startup_delay_ms max-->.\n")
    res = docsfigures.check_page(page, data_dir=out.parent)
    assert res.errors == [] and res.inline == 2
    # Rows labelled by a report group (condition/rule) still find their trials, by key.
    from mpstream.runner.report.summary import write_analysis
    grouped = write_analysis(run, argv, {"single/bba0": [{"key": "r01-single-dashjs", "x": 1.0}]},
                             {}, {}, tmp_path / "data" / "grouped.json")
    run_block = json.loads(grouped.read_text())["run"]
    assert run_block["of_run"] == "mpstream run startup --condition single"
    assert run_block["started"] == "2026-11-22T12:00:00+00:00"


def test_rung_rates_gives_each_rungs_median_rate_and_size_per_trial(tmp_path, capsys):
    d = tmp_path / "trials" / "r00-mptcp-dashjs"
    d.mkdir(parents=True)
    (d / "trial.json").write_text(trial_record("r00-mptcp-dashjs", "mptcp").model_dump_json())

    def seg(index, bitrate, kbytes, ms):  # a segment of `kbytes` downloaded in `ms`
        return {"seq": index, "t_ms": 1000.0 * index + ms, "type": "segment", "data": {
            "url": f"/v/{index}.m4s", "kind": "video", "index": index, "bitrate": bitrate,
            "bytes": kbytes * 1000, "t_request": 1000.0 * index,
            "t_first_byte": 1000.0 * index + 10, "t_done": 1000.0 * index + ms,
            "duration_s": 4.0}}

    # Three segments of the 300 kbit/s rung (150 kB at 1.2, 0.6 and 2.4 Mbit/s) and one of the
    # 1.5 Mbit/s rung (600 kB at 2.4 Mbit/s).
    (d / "events.json").write_text(json.dumps([
        seg(0, 300_000, 150, 1000), seg(1, 300_000, 150, 2000), seg(2, 300_000, 150, 500),
        seg(3, 1_500_000, 600, 2000)]))
    rows, _ = figures.rung_rates([tmp_path])
    [trial] = rows["mptcp"]
    assert trial["rate_mbps_300k"] == pytest.approx(1.2)
    assert trial["segments_300k"] == 3 and trial["kbytes_300k"] == 150
    assert trial["rate_mbps_1500k"] == pytest.approx(2.4) and trial["kbytes_1500k"] == 600
    assert "300k: 1.20 Mbit/s (3 of 150 kB)" in capsys.readouterr().out


def test_restart_losses_reads_the_first_second_of_each_download_after_a_pause(tmp_path, capsys):
    # (t, bytes sent so far, losses so far, window): the session's first download (0-0.3 s,
    # not a restart: no pause before it), a pause with a ping, a download at 2.0 s that loses
    # 6 packets in its first second and 1 after it, and one at 4.5 s that loses 2; a socket on
    # path 1 whose losses must not count.
    polls = [(0.1, 20_000, 0, 10), (0.2, 60_000, 1, 40), (0.3, 100_000, 1, 80),
             (1.0, 100_100, 1, 80), (2.0, 140_000, 5, 150), (2.5, 180_000, 7, 200),
             (3.1, 220_000, 8, 100), (3.2, 220_000, 8, 100), (4.5, 260_000, 10, 120)]
    _sender_trial(tmp_path, "single-quic", [
        {"t_s": t, "path": path, "local": local, "bytes_sent": sent,
         "retrans_total": lost * (1 + 2 * path), "cwnd": 999 if path else cwnd}
        for t, sent, lost, cwnd in polls for path, local in ((0, "a"), (1, "c"))])
    rows, _ = figures.restart_losses([tmp_path], "single-quic", 0)
    out = capsys.readouterr().out
    assert "2 downloads after a pause: 8 of 10 losses (80%) in their first second" in out
    (trial,) = rows["single-quic"]
    assert trial["restarts"] == 2 and trial["restart_loss_share"] == 0.8
    # The window kept through each pause (80, then 100) and the largest in each first second
    # (200, then 120): medians of two.
    assert (trial["cwnd_before_restart"], trial["cwnd_restart_peak"]) == (90, 160)
