"""mphttp's decisions on hand-worked figures (mpstream/transports/mphttp/rangeplan.py): how an
object is split over paths of given rates, round trips and backlogs so that the parts end
together, when a free path asks for a lagging part's remainder too, and the bookkeeping around
them; and the proxy's parsing of what it is given (mpstream/transports/mphttp/), and the
transport as the trial sees it."""

import argparse
import math

import pytest

from mpstream.transports.base import get_transport
from mpstream.transports.mphttp.messages import parse_content_range, parse_origin
from mpstream.transports.mphttp.program import parse_path
from mpstream.transports.mphttp.rangeplan import (
    MIN_FIRST_CHUNK,
    IntervalSet,
    PathEstimate,
    RangePart,
    WindowedMin,
    even_split,
    finish_together,
    first_chunk,
    guessed_split,
    lagging_eta,
    path_estimate,
    plan_round,
    should_rerequest,
    size_key,
    split_range,
    split_with_probes,
    worth_draining,
)

FAST = 3_000_000  # bytes/s: 24 Mbit/s
SLOW = 600_000  # 4.8 Mbit/s


def test_parts_sized_from_rates_end_together():
    # T = (150000 + 3e6 * 0.01 + 0.6e6 * 0.01) / 3.6e6 = 0.0516 s: 125000 and 25000 bytes.
    paths = [PathEstimate(0, FAST, 0.01), PathEstimate(1, SLOW, 0.01)]
    shares = finish_together(150_000, paths)
    assert shares[0] == pytest.approx(125_000)
    assert shares[1] == pytest.approx(25_000)
    assert split_range(0, 150_000, paths) == [RangePart(0, 0, 125_000),
                                              RangePart(1, 125_000, 150_000)]
    ends = [p.finish_s(shares[p.index]) for p in paths]
    assert ends[0] == pytest.approx(ends[1])


def test_before_any_measurement_equal_paths_split_evenly():
    paths = [PathEstimate(0, 1e6, 0.05), PathEstimate(1, 1e6, 0.05)]
    assert split_range(1000, 201_000, paths) == [RangePart(0, 1000, 101_000),
                                                RangePart(1, 101_000, 201_000)]


def test_the_path_whose_bytes_come_first_carries_the_head():
    # The slow path is idle, the fast one drains a backlog of 60 ms first: the slow path's
    # bytes arrive first, so it takes the head. T = (200000 + 3e6 * 0.06 + 0.6e6 * 0.01) /
    # 3.6e6 = 0.1072 s: 0.6e6 * 0.0972 = 58333 bytes on the slow path, the rest on the fast.
    paths = [path_estimate(0, FAST, 0.01, backlog_bytes=180_000), PathEstimate(1, SLOW, 0.01)]
    assert paths[0].start_s == pytest.approx(0.06)
    parts = split_range(0, 200_000, paths)
    assert parts == [RangePart(1, 0, 58_333), RangePart(0, 58_333, 200_000)]


def test_a_path_that_would_start_after_the_others_end_gets_nothing():
    # Alone, the fast path ends at 0.01 + 150000 / 3e6 = 0.06 s; the slow one would start at
    # 0.2 s (a backlog of 120000 bytes).
    paths = [PathEstimate(0, FAST, 0.01), path_estimate(1, SLOW, 0.01, backlog_bytes=120_000)]
    assert finish_together(150_000, paths) == {0: pytest.approx(150_000)}
    assert split_range(0, 150_000, paths) == [RangePart(0, 0, 150_000)]


def test_a_part_too_small_for_a_request_is_left_out():
    # 30000 bytes: the slow path's share would be 5000 bytes, under MIN_PART (8 KiB).
    paths = [PathEstimate(0, FAST, 0.01), PathEstimate(1, SLOW, 0.01)]
    assert split_range(0, 30_000, paths) == [RangePart(0, 0, 30_000)]
    assert split_range(0, 30_000, paths, min_part=1000) == [RangePart(0, 0, 25_000),
                                                            RangePart(1, 25_000, 30_000)]


def test_even_split_ignores_the_rates():
    paths = [PathEstimate(0, FAST, 0.01), PathEstimate(1, SLOW, 0.01)]
    assert even_split(0, 100_001, paths) == [RangePart(0, 0, 50_001),
                                             RangePart(1, 50_001, 100_001)]
    assert even_split(0, 15_000, paths) == [RangePart(0, 0, 15_000)]  # halves under MIN_PART


def test_a_path_not_measured_yet_gets_a_probe_not_a_share():
    # Path 1 has no rate yet: a 64 KiB probe from the end; the measured path takes the rest.
    paths = [PathEstimate(0, FAST, 0.01), PathEstimate(1, FAST, 0.01)]
    assert split_with_probes(0, 800_000, paths, measured={0}) == [
        RangePart(0, 0, 734_464), RangePart(1, 734_464, 800_000)]
    # Its probe under way, nothing more for it; with no path measured, only the probes are
    # planned, and the rest waits for one of them to measure its path.
    assert split_with_probes(0, 800_000, paths, measured={0}, busy={1}) == [
        RangePart(0, 0, 800_000)]
    assert split_with_probes(0, 800_000, paths, measured=(), busy={0}) == [
        RangePart(1, 734_464, 800_000)]
    assert split_with_probes(0, 100_000, paths, measured=()) == [
        RangePart(1, 0, 34_464), RangePart(0, 34_464, 100_000)]
    # Every path measured: the sizing by rate.
    assert split_with_probes(0, 150_000, paths, measured={0, 1}) == split_range(0, 150_000,
                                                                                paths)


def test_what_ends_within_the_horizon_is_split_in_one_go():
    paths = [PathEstimate(0, FAST, 0.01, 0.01), PathEstimate(1, SLOW, 0.01, 0.01)]
    assert plan_round([(0, 150_000)], paths, measured={0, 1}) == split_range(0, 150_000, paths)
    # Two gaps (a failed part's remainder and the rest) are one run of 150000 bytes: 125000
    # for the fast path, over both gaps in order, and the last 25000 for the slow one.
    assert plan_round([(0, 50_000), (100_000, 200_000)], paths, measured={0, 1}) == [
        RangePart(0, 0, 50_000), RangePart(0, 100_000, 175_000),
        RangePart(1, 175_000, 200_000)]


def test_a_large_object_goes_out_in_chunks_to_the_paths_about_to_run_dry():
    # 6 MB would take 1.67 s: each idle path gets 0.2 s of its rate from the front.
    idle = [PathEstimate(0, FAST, 0.01, 0.01), PathEstimate(1, SLOW, 0.01, 0.01)]
    assert plan_round([(0, 6_000_000)], idle, measured={0, 1}) == [
        RangePart(0, 0, 600_000), RangePart(1, 600_000, 720_000)]
    # The fast path has 100 ms of its chunk left, more than 1.5 round trips: nothing for it.
    busy = [path_estimate(0, FAST, 0.01, backlog_bytes=300_000),
            path_estimate(1, SLOW, 0.01)]
    assert plan_round([(600_000, 6_000_000)], busy, measured={0, 1}) == [
        RangePart(1, 600_000, 720_000)]
    # A path not measured yet gets a probe (none while its probe is under way).
    assert plan_round([(0, 6_000_000)], idle, measured={0}) == [
        RangePart(0, 0, 600_000), RangePart(1, 600_000, 665_536)]
    assert plan_round([(0, 6_000_000)], idle, measured={0}, busy={1}) == [
        RangePart(0, 0, 600_000)]


def test_the_first_request_asks_for_two_round_trips_of_the_best_path():
    assert first_chunk(PathEstimate(0, FAST, 0.01), 0.01) == MIN_FIRST_CHUNK
    assert first_chunk(PathEstimate(0, 12_500_000, 0.02), 0.02) == 500_000


def test_a_guessed_size_starts_the_head_and_the_tail_at_once():
    paths = [PathEstimate(0, FAST, 0.01), PathEstimate(1, SLOW, 0.01)]
    head, tail = guessed_split(120_000, paths)
    # 120000 bytes end together as 100000 and 20000 bytes: the head and a 20000-byte suffix.
    assert head == RangePart(0, 0, 100_000)
    assert tail == (1, 20_000)
    head, tail = guessed_split(40_000, paths)
    assert head == RangePart(0, 0, 40_000) and tail is None


def test_a_free_path_copies_a_lagging_remainder_it_would_deliver_sooner():
    # 30000 bytes left on the slow path at its 0.6 MB/s: 50 ms. The idle fast path: 10 ms
    # round trip and 10 ms of transfer, 20 ms.
    lag = lagging_eta(30_000, SLOW, silent_s=0.005, latency_s=0.01)
    assert lag == pytest.approx(0.05)
    assert should_rerequest(30_000, lag, PathEstimate(0, FAST, 0.01))


def test_a_slower_free_path_does_not_copy_the_fast_paths_remainder():
    lag = lagging_eta(30_000, FAST, silent_s=0.005, latency_s=0.01)
    assert lag == pytest.approx(0.01)
    assert not should_rerequest(30_000, lag, PathEstimate(1, SLOW, 0.01))


def test_a_gain_within_the_estimates_noise_is_not_worth_a_copy():
    # The free path would end at 20 ms against the lagging 22 ms: less than 5 ms earlier.
    assert not should_rerequest(30_000, 0.022, PathEstimate(0, FAST, 0.01))
    assert not should_rerequest(0, math.inf, PathEstimate(0, FAST, 0.01))


def test_a_silent_part_is_copied_even_by_a_slow_path():
    # Nothing for 0.5 s on a path with a 10 ms round trip: stalled, it may never end.
    lag = lagging_eta(30_000, FAST, silent_s=0.5, latency_s=0.01)
    assert lag == math.inf
    assert should_rerequest(30_000, lag, PathEstimate(1, SLOW, 0.01))
    # A few round trips of silence is a queue or slow start, not a stall.
    assert lagging_eta(30_000, FAST, silent_s=0.1, latency_s=0.01) < math.inf


def test_a_part_waiting_for_its_first_byte_counts_the_wait():
    assert lagging_eta(30_000, SLOW, 0.0, 0.01, wait_s=0.03) == pytest.approx(0.08)


def test_draining_a_cancelled_copy_is_worth_up_to_two_round_trips():
    assert worth_draining(12_000, SLOW, 0.01)
    assert not worth_draining(13_000, SLOW, 0.01)
    assert worth_draining(60_000, FAST, 0.01)


@pytest.mark.parametrize(("path", "key"), [
    ("/media/dash/avc-360p/seg_00017.m4s", "/media/dash/avc-360p/seg_#.m4s"),
    ("/media/hls/360p/seg_017.ts", "/media/hls/360p/seg_#.ts"),
    ("/media/dash/chunk-1-00017.m4s", "/media/dash/chunk-1-#.m4s"),
    ("/media/dash/avc-360p/init.m4s", "/media/dash/avc-360p/init.m4s"),
    ("/probe/blob", "/probe/blob"),
])
def test_objects_alike_share_a_size_key(path, key):
    assert size_key(path) == key


def test_interval_set_counts_each_byte_once():
    have = IntervalSet()
    assert have.add(0, 100) == 100
    assert have.add(200, 300) == 100
    assert have.add(50, 250) == 100  # 100-200 is new, the rest arrived already
    assert have.spans == [(0, 300)]
    assert have.add(300, 310) == 10
    assert have.missing(0, 400) == [(310, 400)]
    assert have.covered() == 310
    gappy = IntervalSet()
    gappy.add(10, 20)
    gappy.add(30, 40)
    assert gappy.missing(0, 50) == [(0, 10), (20, 30), (40, 50)]
    assert gappy.missing(12, 35) == [(20, 30)]


def test_the_round_trip_is_the_least_recent_sample():
    rtt = WindowedMin(window_s=10)
    assert rtt.value is None
    rtt.update(0.010, t=0)
    rtt.update(0.045, t=1)  # a request behind a queue
    assert rtt.value == 0.010
    rtt.update(0.030, t=11)  # the 10 ms sample is more than 10 s old
    assert rtt.value == 0.030


def test_content_range_and_the_proxys_arguments():
    assert parse_content_range("bytes 0-99/1000") == (0, 100, 1000)
    with pytest.raises(ValueError):
        parse_content_range("bytes */1000")
    origin = parse_origin("http://10.2.0.2:8080")
    assert (origin.scheme, origin.host, origin.port, origin.authority) == \
        ("http", "10.2.0.2", 8080, "10.2.0.2:8080")
    assert parse_origin("https://example.org").authority == "example.org"
    path = parse_path("1,10.1.1.2,p1,backup")
    assert (path.index, path.local, path.ifname, path.backup) == (1, "10.1.1.2", "p1", True)
    assert parse_path("0,fd00::2").local == "fd00::2"
    with pytest.raises(argparse.ArgumentTypeError, match="INDEX,ADDRESS"):
        parse_path("10.1.1.2")
    with pytest.raises(argparse.ArgumentTypeError, match="not an IP address"):
        parse_path("0,client")


def test_the_transport_needs_nothing_at_the_server():
    mphttp = get_transport("mphttp")
    assert mphttp.label == "Multipath HTTP"
    assert mphttp.network_mode == "mptcp" and not mphttp.kernel_mptcp
    assert mphttp.carries_http_only and not mphttp.runs_on_server
    assert list(mphttp.schedulers()) == ["finish-together", "even"]
    assert mphttp.scheduler_name == "finish-together"
    assert mphttp.with_scheduler("even").scheduler_name == "even"
    assert mphttp.wrap(["chromium"]) == ["chromium"]


def test_with_a_page_elsewhere_only_the_servers_media_go_through_the_proxy(tmp_path):
    """`play --url`: the page is on loopback, the media on the network's server (named by a
    host name here): the manifest's address is given through the proxy, which starts for that
    origin; the page, and other origins, are asked directly."""
    from mpstream.transports.mphttp import MultipathHTTPProxy

    class RealNetwork:
        server_addr = "127.0.0.1"
        paths = ()

    proxy = MultipathHTTPProxy(RealNetwork(), "http://127.0.0.2:8080", tmp_path)  # type: ignore[arg-type]
    started = []

    def start(origin: str) -> None:  # what _start does, without a process
        started.append(origin)
        proxy.origin, proxy.listen, proxy._proc = origin, "127.0.0.1:5000", object()  # type: ignore[assignment]

    proxy._start = start  # type: ignore[method-assign]
    with proxy:
        assert proxy.base_url == "http://127.0.0.2:8080" and started == []
        assert proxy.media_url("/media/dash/manifest.mpd") == "/media/dash/manifest.mpd"
        assert proxy.media_url("http://localhost:8093/media/dash/manifest.mpd?a=1") == \
            "http://127.0.0.1:5000/media/dash/manifest.mpd?a=1"
        assert started == ["http://localhost:8093"]
        assert proxy.media_url("http://localhost:9999/x.mpd") == "http://localhost:9999/x.mpd"
        assert proxy.media_url("http://192.0.2.1/x.mpd") == "http://192.0.2.1/x.mpd"
        proxy._proc = None  # nothing to stop


def test_the_proxys_paths_answer_holds_a_backup_only_while_another_path_is_up():
    from mpstream.transports.mphttp.connection import PathState
    from mpstream.transports.mphttp.proxy import Proxy

    wifi, cell = PathState(0, "10.1.0.2"), PathState(1, "10.1.1.2", backup=True)
    wifi.rate.update(1_000_000)  # bytes/s
    wifi.rx_bytes, cell.rx_bytes = 5000, 0
    proxy = Proxy([wifi, cell], None)
    found = proxy.paths_answer()
    assert found["measured"] is True
    assert [(p["address"], p["delivery_bps"], p["bytes_acked"], p["backup"])
            for p in found["paths"]] == [("10.1.0.2", 8_000_000, 5000, False),
                                         ("10.1.1.2", None, 0, True)]
    wifi.up = False  # the WiFi is gone: the backup carries, and the WiFi is left out
    assert [(p["address"], p["backup"]) for p in proxy.paths_answer()["paths"]] == [
        ("10.1.1.2", False)]
