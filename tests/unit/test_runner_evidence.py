"""The per-segment evidence from a trial folder built here: page, nginx and kernel times are put
on the samplers' clock, and each path's bytes during a segment come from the client samples."""

import csv
import json
import math

import numpy as np
import pytest

from mpstream.runner.layout import TrialData
from mpstream.runner.metrics.evidence import trial_evidence, write_clock
from mpstream.runner.report.figures import timeline_figure
from mpstream.runner.samplers.kernel import FIELDS
from tests.records import trial_data

T0_UNIX = 1_700_000_000.0
PAGE_TO_UNIX = T0_UNIX + 0.5  # the page's performance.now() = 0 half a second after t0


def _trial(tmp_path) -> TrialData:
    write_clock(tmp_path, 100.0, T0_UNIX)
    events = [
        {"seq": 0, "t_ms": 100, "type": "manifest",
         "data": {"url": "http://10.2.0.2/media/dash/manifest.mpd", "t_request": 100.0,
                  "t_done": 120.0, "bytes": 3000}},
        {"seq": 1, "t_ms": 1000, "type": "segment",
         "data": {"url": "http://10.2.0.2/media/dash/v1/1.m4s", "kind": "video", "index": 1,
                  "bytes": 700_000, "t_request": 1000.0, "t_first_byte": 1300.0,
                  "t_done": 2000.0}},
        # a re-download of segment 1: the evidence is of the last one, as the rates are
        {"seq": 2, "t_ms": 2500, "type": "segment",
         "data": {"url": "http://10.2.0.2/media/dash/v1/1.m4s", "kind": "video", "index": 1,
                  "bytes": 700_000, "t_request": 2500.0, "t_first_byte": 2520.0,
                  "t_done": 3000.0}},
    ]
    log = [
        # manifest: arrived at page 100 ms (the anchor), answered in 20 ms
        {"msec": PAGE_TO_UNIX + 0.120, "request_time": 0.020, "uri": "/media/dash/manifest.mpd",
         "connection": 1},
        {"msec": PAGE_TO_UNIX + 1.990, "request_time": 0.985, "uri": "/media/dash/v1/1.m4s",
         "connection": 1},
        {"msec": PAGE_TO_UNIX + 2.995, "request_time": 0.490, "uri": "/media/dash/v1/1.m4s",
         "connection": 1},
    ]
    (tmp_path / "access.log").write_text("".join(json.dumps(r) + "\n" for r in log))
    with (tmp_path / "samples-client.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        # path 0: 10 kB each 0.1 s from t=0; path 1: 5 kB each 0.1 s from t=3.0 on
        for step in range(51):
            t = step / 10
            w.writerow({k: "" for k in FIELDS} | {
                "t_s": f"{t:.3f}", "host": "client", "path": 0, "local": "10.1.0.2:1",
                "peer": "10.2.0.2:80", "state": "ESTAB", "bytes_received": 10_000 * step})
            if t >= 3.0:
                w.writerow({k: "" for k in FIELDS} | {
                    "t_s": f"{t:.3f}", "host": "client", "path": 1, "local": "10.1.1.2:2",
                    "peer": "10.2.0.2:80", "state": "ESTAB",
                    "bytes_received": 5_000 * (step - 29)})
    with (tmp_path / "samples-server.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for step in range(51):
            w.writerow({k: "" for k in FIELDS} | {
                "t_s": f"{step / 10:.3f}", "host": "server", "path": 0, "local": "10.2.0.2:80",
                "peer": "10.1.0.2:1", "state": "ESTAB", "bytes_sent": 20_000 * step,
                "bytes_acked": 20_000 * step - 5_000, "cwnd": 10 + step})
    return trial_data(tmp_path, files={"events": events})


def test_segment_times_on_the_trial_clock_and_bytes_per_path(tmp_path):
    rec = _trial(tmp_path)
    (row,) = trial_evidence(rec, 2).segments
    assert row["segment_index"] == 1 and row["bytes"] == 700_000
    # page times: the manifest's page request (100 ms) is nginx's arrival of it (0.6 s on the
    # trial clock), so page ms t is trial second 0.5 + t / 1000.
    assert row["request_page_s"] == pytest.approx(3.0)
    assert row["first_byte_s"] == pytest.approx(3.02)
    assert row["last_byte_s"] == pytest.approx(3.5)
    # nginx: the second log line of that URI is this download (arrival 3.495 - 0.490 + 0.5)
    assert row["request_nginx_s"] == pytest.approx(3.005)
    assert row["nginx_request_time_s"] == pytest.approx(0.49)
    # samples after 3.0 up to 3.5 + 0.1: 6 samples; path 1's first sample (t=3.0) is at the
    # request, not after it, and its socket counts from zero: 6 samples of 5 kB
    assert row["bytes_path0"] == 60_000
    assert row["bytes_path1"] == 30_000


def test_timeline_figure_is_written(tmp_path):
    rec = _trial(tmp_path)
    out = timeline_figure(rec, trial_evidence(rec, 2), 2, tmp_path / "t.png")
    assert out is not None and out.stat().st_size > 5_000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_live_sessions_latency_and_catch_up_are_on_its_timeline(tmp_path):
    rec = _trial(tmp_path)
    rec.events.extend({"seq": 3 + i, "t_ms": 1100 + 1000 * i, "type": "live_latency",
                       "data": {"latency_s": lat, "target_s": 1.0, "playback_rate": rate}}
                      for i, (lat, rate) in enumerate([(1.4, 1.2), (1.1, 1.05), (1.0, 1.0),
                                                       (0.8, 0.9)]))
    evidence = trial_evidence(rec, 2)
    # on the trial clock, a second apart
    times = [t for t, _, _ in evidence.live_latency]
    assert np.diff(times) == pytest.approx([1.0, 1.0, 1.0], abs=1e-3)
    assert [(lat, rate) for _, lat, rate in evidence.live_latency] == [
        (1.4, 1.2), (1.1, 1.05), (1.0, 1.0), (0.8, 0.9)]
    (tmp_path / "plain").mkdir()
    other = _trial(tmp_path / "plain")
    plain = timeline_figure(other, trial_evidence(other, 2), 2, tmp_path / "plain.png")
    live = timeline_figure(rec, evidence, 2, tmp_path / "live.png")
    assert live.read_bytes() != plain.read_bytes()


def _rewrite(path, rows):
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: "" for k in FIELDS} | r)


def test_held_time_counts_polls_with_unsent_bytes_and_nothing_in_flight(tmp_path):
    rec = _trial(tmp_path)  # segment 1 (last download): 3.0 s to 3.5 s on the trial clock
    base = {"host": "server", "local": "10.2.0.2:80", "state": "ESTAB", "bytes_sent": 5,
            "bytes_acked": 5}
    polls = {2.9: (88, 0), 3.0: (0, 0), 3.1: (88, 0), 3.2: (88, 0), 3.3: (88, 0),
             3.4: (500, 5),  # bytes in flight: the sender is not holding back, it is limited
             3.5: (0, 0), 1.0: (88, 0)}
    rows = []
    for t, (notsent, unacked) in sorted(polls.items()):
        rows.append(base | {"t_s": f"{t:.3f}", "path": 0, "peer": "10.1.0.2:1",
                            "notsent": notsent, "unacked": unacked})
        # the other path's subflow idle in the same poll
        rows.append(base | {"t_s": f"{t:.3f}", "path": 1, "peer": "10.1.1.2:2"})
    _rewrite(tmp_path / "samples-server.csv", rows)
    (row,) = trial_evidence(rec, 2).segments
    assert row["sender_held_s"] == pytest.approx(0.3)  # polls 3.1-3.3, 0.1 s each
    # TCP: what the client's sockets held unread (here none)
    assert row["client_unread_max_bytes"] == 0

    # MPTCP: the connection's own socket holds what the page cannot read yet
    _rewrite(tmp_path / "samples-client-mptcp.csv", [
        {"t_s": f"{t:.3f}", "host": "client", "path": 0, "state": "ESTAB", "mptcp": 2,
         "rmem": rmem} for t, rmem in ((3.2, 847_872), (3.3, 1_000), (4.0, 999_999))])
    rec = TrialData(rec.dir, rec.record, events=rec.events)  # the folder read afresh
    (row,) = trial_evidence(rec, 2).segments
    assert row["client_unread_max_bytes"] == 847_872


def test_held_is_per_connection(tmp_path):
    rec = _trial(tmp_path)
    base = {"host": "server", "local": "10.2.0.2:80", "state": "ESTAB", "mptcp": 1}

    def sub(t, path, token, notsent, unacked):
        return base | {"t_s": f"{t:.3f}", "path": path, "peer": f"10.1.{path}.2:{path + 1}",
                       "token": f"0000(id:{path})/{token}(id:0)", "notsent": notsent,
                       "unacked": unacked}

    _rewrite(tmp_path / "samples-server.csv", [
        sub(3.0, 0, "aa", 0, 0),
        # connection aa holds 88 bytes with none of its subflows in flight, while connection
        # bb sends: aa is held
        sub(3.1, 0, "aa", 88, 0), sub(3.1, 1, "aa", 0, 0), sub(3.1, 0, "bb", 0, 9),
        # aa's other subflow has packets in flight: aa is sending, not holding back
        sub(3.2, 0, "aa", 88, 0), sub(3.2, 1, "aa", 0, 4),
    ])
    (row,) = trial_evidence(rec, 2).segments
    assert row["sender_held_s"] == pytest.approx(0.1)


def test_evidence_metrics_of_a_trial(tmp_path):
    rec = _trial(tmp_path)
    base = {"host": "server", "local": "10.2.0.2:80", "peer": "10.1.0.2:1", "state": "ESTAB",
            "path": 0}
    # The first download of segment 1 (the one startup waits for) spans 1.5-2.5 s on the trial
    # clock; its last download, 3.0-3.5 s.
    held_at = (1.7, 1.8, 1.9, 3.2, 3.3)
    _rewrite(tmp_path / "samples-server.csv", [
        base | {"t_s": f"{t / 10:.3f}", "notsent": 88 if t / 10 in held_at else 0}
        for t in range(10, 40)])
    m = trial_evidence(rec, 2).metrics
    assert m["first_download_ms"] == pytest.approx(1000.0)  # 1.5-2.5 s, on the page's clock
    assert m["first_segment_held_ms"] == pytest.approx(300.0)
    # client samples: path 0 brings 10 kB each 0.1 s; path 1 only from 3.0 s, after the first
    # download (1.5-2.5 s) ended
    assert m["path0_first_segment_share"] == 1.0 and m["path1_first_segment_share"] == 0.0
    assert m["held_share"] == pytest.approx(0.2 / 0.5)  # last downloads: 0.5 s, 0.2 s held
    # The tail (last 10% of the bytes) of the last download (3.0-3.5 s, polls to 3.6 s): 90 kB
    # in all, 10 kB a poll on path 0 and 5 kB on path 1; its 9 kB lie in the last poll, which
    # both paths share 2:1.
    assert m["path0_tail_share"] == pytest.approx(2 / 3)
    assert m["path1_tail_share"] == pytest.approx(1 / 3)


def _with_events(tmp_path, events, started=T0_UNIX):
    rec = _trial(tmp_path)
    rec.record.events_started_unix = started
    rec._cache["profile"] = {"paths": [{"name": "path0"}, {"name": "path1"}], "events": events}
    return rec


def test_a_returning_path_carries_data_again_at_its_first_poll_of_more_than_5_kb(tmp_path):
    # Path 0 brings 10 kB a poll throughout; it is down from 0.5 s to 2.55 s of the profile's
    # clock, whose t=0 is half a second into the trial's: back at 3.05 s, it carries data at
    # the poll of 3.1 s. The event names the path as the profile does.
    rec = _with_events(tmp_path, [{"at_s": 2.55, "path": "path0", "action": "up"},
                                  {"at_s": 0.5, "path": 0, "action": "down"}],
                       started=T0_UNIX + 0.5)
    m = trial_evidence(rec, 2).metrics
    assert m["path0_return_s"] == pytest.approx(0.05)
    assert "path1_return_s" not in m


def test_polls_of_keepalive_size_are_not_a_return_and_an_up_needs_a_down(tmp_path):
    # Path 1 brings 5 kB a poll from 3.0 s: no more than a keep-alive's worth, so after its
    # return at 2.0 s it never carried data again; path 0's `up` follows no `down`.
    rec = _with_events(tmp_path, [{"at_s": 0.0, "path": 1, "action": "down"},
                                  {"at_s": 2.0, "path": 1, "action": "up"},
                                  {"at_s": 2.0, "path": 0, "action": "up"}])
    m = trial_evidence(rec, 2).metrics
    assert math.isnan(m["path1_return_s"])
    assert "path0_return_s" not in m
