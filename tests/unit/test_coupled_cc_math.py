"""The coupled CCs' integer window arithmetic (netem/cc/coupled_math.h, the code the BPF programs
run), through its user-space harness, against the papers' formulas in floating point:
LIA (RFC 6356 section 3), OLIA (Khalili et al. 2012, the draft's equations (2)-(4)), BALIA
(Peng et al. 2016, algorithm 1) and wVegas's per-round rule (Cao et al. 2012)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpstream.paths import BUILD_DIR

HARNESS = BUILD_DIR / "coupled-cc-test"
ONE = 1 << 30  # CC_ONE: one packet in Q30


@dataclass
class Path_:
    w: int
    rtt_us: int
    l1: int = 0
    l2: int = 0


def run(lines: list[str]) -> list[tuple[float, int]]:
    """(signed increase in packets per acked packet, BALIA's ssthresh) per line."""
    assert HARNESS.exists(), f"{HARNESS} is missing: run `make coupled-cc`"
    done = subprocess.run([str(HARNESS)], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, check=True)
    out = []
    for row in done.stdout.splitlines():
        step, negative, ssthresh = (int(v) for v in row.split())
        out.append(((-step if negative else step) / ONE, ssthresh))
    return out


def line(rule: str, paths: list[Path_], w_cur: int = 10) -> str:
    return " ".join([rule, str(w_cur)] + [f"{p.w} {p.rtt_us} {p.l1} {p.l2}" for p in paths])


def share(paths: list[Path_], r: int) -> float:
    """(w_r / rtt_r^2) / (sum_k w_k / rtt_k)^2, the term LIA, OLIA and BALIA share."""
    total = sum(p.w / p.rtt_us for p in paths)
    return (paths[r].w / paths[r].rtt_us ** 2) / total ** 2


def lia(paths: list[Path_]) -> float:
    best = max(p.w / p.rtt_us ** 2 for p in paths)
    total = sum(p.w / p.rtt_us for p in paths)
    return min(best / total ** 2, 1 / paths[0].w)


def olia(paths: list[Path_]) -> float:
    n = len(paths)
    w_max = max(p.w for p in paths)
    # l^2 / rtt decides the best paths; its integer value decides ties, as in the harness.
    key = [max(p.l1, p.l2) ** 2 // p.rtt_us for p in paths]
    m = {i for i, p in enumerate(paths) if p.w == w_max}
    b = {i for i in range(n) if key[i] == max(key)}
    collected = b - m
    alpha = 0.0
    if 0 in collected:
        alpha = 1 / (n * len(collected))
    elif 0 in m and collected:
        alpha = -1 / (n * len(m))
    return share(paths, 0) + alpha / paths[0].w


def balia(paths: list[Path_]) -> tuple[float, float]:
    x = [p.w / p.rtt_us for p in paths]
    alpha = min(max(x) / x[0], 1024)  # the harness counts a slower path as 1024 times slower
    increase = share(paths, 0) * (1 + alpha) / 2 * (4 + alpha) / 5
    ssthresh = max(paths[0].w - paths[0].w / 2 * min(alpha, 1.5), 2)
    return increase, ssthresh


def close(got: float, want: float) -> bool:
    # Rounding: round trips normalised to 1/1024 of the smallest, rates to 1/1024 of a window,
    # and two integer divisions; a few units of the last bit absolute for increases near zero.
    return abs(got - want) <= 0.01 * abs(want) + 4 / ONE


path_st = st.builds(Path_, w=st.integers(2, 5000), rtt_us=st.integers(1000, 60000),
                    l1=st.integers(0, 200000), l2=st.integers(0, 200000))
paths_st = st.lists(path_st, min_size=1, max_size=4)


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(paths_st)
def test_increases_follow_the_papers_formulas(paths):
    got = run([line("lia", paths), line("olia", paths), line("balia", paths, paths[0].w)])
    assert close(got[0][0], lia(paths)), ("lia", paths, got[0], lia(paths))
    assert close(got[1][0], olia(paths)), ("olia", paths, got[1], olia(paths))
    want_inc, want_ss = balia(paths)
    assert close(got[2][0], want_inc), ("balia", paths, got[2], want_inc)
    assert abs(got[2][1] - want_ss) <= 1, ("balia ssthresh", paths, got[2], want_ss)


@pytest.mark.parametrize("rule", ["lia", "olia", "balia"])
@pytest.mark.parametrize("w", [2, 10, 333, 4000])
def test_one_path_is_reno(rule, w):
    """A single subflow (or plain TCP) grows by 1/w per acked packet under every rule, and
    BALIA halves it on a loss."""
    (step, ssthresh), = run([line(rule, [Path_(w, 20000, 50, 70)], w)])
    assert step == pytest.approx(1 / w, rel=1e-3, abs=2 / ONE)
    assert ssthresh == max(w - w // 2, 2) or ssthresh == max(w - (w + 1) // 2, 2)


def test_lia_never_grows_faster_than_tcp_on_the_path():
    """RFC 6356's cap: at most 1/w_r, also when the coupled term would give more (a small
    window on the fastest path beside a large one on a slow path)."""
    paths = [Path_(4, 10000), Path_(400, 60000)]
    (step, _), = run([line("lia", paths)])
    assert step <= 1 / 4 + 1 / ONE
    assert share(paths, 0) > 0  # the case is real: the coupled term alone is larger
    best = max(p.w / p.rtt_us ** 2 for p in paths) / sum(p.w / p.rtt_us for p in paths) ** 2
    assert best > 1 / 4 or step == pytest.approx(best, rel=0.01)


def test_equal_paths_share_one_tcp_increase():
    """n identical paths: LIA and BALIA each grow by 1/(n^2 w), so together the connection
    grows like one TCP flow of the same total window (the coupling)."""
    for n in (2, 3, 4):
        paths = [Path_(50, 40000) for _ in range(n)]
        got = run([line("lia", paths), line("balia", paths)])
        for step, _ in got:
            assert step == pytest.approx(1 / (n * n * 50), rel=0.01)


def test_olia_moves_window_from_the_largest_to_the_best_path():
    """Path 1 has fewer losses (a larger l) but a smaller window: it is collected and grows
    by an extra alpha/w; path 0, the largest window, gives that up and may shrink."""
    slow_large = Path_(20, 40000, l1=100, l2=50)
    good_small = Path_(10, 40000, l1=400, l2=300)
    got_large, got_small = run([line("olia", [slow_large, good_small]),
                                line("olia", [good_small, slow_large])])
    assert got_large[0] < 0 < got_small[0]
    assert got_small[0] == pytest.approx(olia([good_small, slow_large]), rel=0.01)
    assert got_large[0] == pytest.approx(olia([slow_large, good_small]), rel=0.01)


def test_balia_cuts_less_on_its_better_path():
    """BALIA's decrease is coupled: the path with the best rate halves, a path with a third
    of it cuts by 75% (min(alpha, 1.5) / 2)."""
    fast, slow = Path_(60, 20000), Path_(20, 20000)
    (_, ss_fast), (_, ss_slow) = run([line("balia", [fast, slow], 60),
                                      line("balia", [slow, fast], 20)])
    assert ss_fast == 30
    assert ss_slow == 5


def test_bad_input_is_refused_with_its_line():
    done = subprocess.run([str(HARNESS)], input="cubic 10 10 40000 0 0\n", capture_output=True,
                          text=True)
    assert done.returncode == 2 and "unknown rule cubic" in done.stderr


# --- wVegas: one round trip's decision -----------------------------------------------------


@dataclass
class Round:
    w: int
    ssthresh: int
    alpha: int
    q_min_us: int


def wvegas_run(w: int, ssthresh: int, base_us: int, rtt_us: int, paths: list[Path_],
               alpha: int = 2, q_min_us: int = 0) -> Round:
    """The harness's round on path 0 (its window w) with paths 1.. as its siblings."""
    assert HARNESS.exists(), f"{HARNESS} is missing: run `make coupled-cc`"
    text = " ".join(["wvegas", str(w), str(ssthresh), str(base_us), str(rtt_us), str(alpha),
                     str(q_min_us)] + [f"{p.w} {p.rtt_us} 0 0" for p in paths])
    done = subprocess.run([str(HARNESS)], input=text + "\n", capture_output=True, text=True,
                          check=True)
    return Round(*(int(v) for v in done.stdout.split()))


def wvegas_alpha(paths: list[Path_]) -> float:
    """total_alpha times path 0's share of the connection's rate (w / rtt), before the floor."""
    x = [p.w / p.rtt_us for p in paths]
    return 10 * x[0] / sum(x)


def wvegas_model(w: int, ssthresh: int, base_us: int, rtt_us: int, alpha: int,
                 q_min_us: int) -> Round:
    """The paper's round, alpha given (the harness's, checked on its own against the rates):
    diff = the whole packets the path keeps queued, w (rtt - base) / rtt."""
    q = rtt_us - base_us
    diff = w * q // rtt_us
    if w < ssthresh:
        if diff > 1:
            w = max(min(w, w * base_us // rtt_us + 1), 2)
            ssthresh = min(ssthresh, w - 1)
        return Round(w, ssthresh, alpha, q_min_us)
    if diff > alpha and w > 2:
        w -= 1
        ssthresh = min(ssthresh, w - 1)
    elif diff < alpha:
        w += 1
    if q_min_us == 0 or q < q_min_us:
        q_min_us = q
    if q_min_us and q >= 2 * q_min_us:
        w, q_min_us = w * base_us // (2 * rtt_us), 0
    return Round(max(w, 2), ssthresh, alpha, q_min_us)


# (w, ssthresh: half the cases in slow start, base RTT, queueing delay, alpha, q_min, siblings)
round_st = st.tuples(st.integers(2, 5000), st.integers(1, 10000), st.integers(1000, 60000),
                     st.integers(0, 60000), st.integers(2, 10), st.integers(0, 20000),
                     st.lists(path_st, min_size=0, max_size=3))


@settings(max_examples=500, deadline=None, derandomize=True)
@given(round_st)
def test_a_wvegas_round_follows_the_papers_rule(case):
    w, ssthresh, base, extra, alpha, q_min, siblings = case
    rtt = base + extra
    paths = [Path_(w, rtt), *siblings]
    got = wvegas_run(w, ssthresh, base, rtt, paths, alpha, q_min)
    diff = w * extra // rtt
    if w >= ssthresh and diff >= alpha:
        # alpha recomputed from the rates: the floor of total_alpha's share, at least 2 (the
        # harness's rates are normalised integers: a share a hair from a whole number may
        # floor either way).
        share = wvegas_alpha(paths)
        assert got.alpha in {max(2, int(share * 0.999)), max(2, int(share * 1.001))}, \
            (case, got, share)
    else:
        assert got.alpha == alpha, (case, got)
    assert got == wvegas_model(w, ssthresh, base, rtt, got.alpha, q_min), case


def test_wvegas_steers_each_path_to_its_share_of_ten_queued_packets():
    """Two equal paths aim at 5 packets queued each, a path with three times the other's rate
    at 7 against 2 (the floor, at least 2); with 3 packets queued against 5 wanted the window
    grows by one, with 8 it shrinks by one."""
    equal = [Path_(40, 24000), Path_(40, 24000)]
    above = wvegas_run(40, 30, 20000, 24000, equal, alpha=2)  # 40 * 4 / 24 = 6 queued >= 2
    assert above.alpha == 5 and above.w == 39  # 6 > 5: one packet less
    fast, slow = Path_(60, 20000), Path_(20, 20000)
    assert wvegas_run(60, 30, 16000, 20000, [fast, slow]).alpha == 7  # 12 queued: recomputed
    assert wvegas_run(20, 10, 10000, 20000, [slow, fast]).alpha == 2  # 10 * 1/4, floored to 2
    below = wvegas_run(40, 30, 20000, 21600, equal, alpha=5)  # 40 * 1.6 / 21.6 = 2 queued
    assert (below.w, below.alpha) == (41, 5)  # below alpha: alpha kept, one packet more
    one_path = wvegas_run(100, 50, 20000, 23000, [Path_(100, 23000)])  # 13 queued
    assert one_path.alpha == 10 and one_path.w == 99


def test_wvegas_drains_when_the_queueing_delay_doubles():
    """The smallest queueing delay since the last drain was 4 ms; at 8 ms the window is cut to
    w base / (2 rtt), and the history starts over."""
    paths = [Path_(50, 28000)]
    cut = wvegas_run(50, 20, 20000, 28000, paths, alpha=10, q_min_us=4000)
    assert cut.w == (50 - 1) * 20000 // (2 * 28000) and cut.q_min_us == 0  # 14 queued: -1
    kept = wvegas_run(50, 20, 20000, 27000, paths, alpha=10, q_min_us=4000)
    assert kept.w == 49 and kept.q_min_us == 4000  # 7 ms < 8 ms: no drain


def test_wvegas_leaves_slow_start_at_the_first_queue():
    """In slow start with more than one packet queued, the window drops to the queue-free one
    plus one and slow start ends; with one packet or none it goes on (the caller's)."""
    left = wvegas_run(100, 1 << 20, 20000, 30000, [Path_(100, 30000)])
    assert (left.w, left.ssthresh) == (67, 66)  # 100 * 20 / 30 + 1
    on = wvegas_run(100, 1 << 20, 20000, 20300, [Path_(100, 20300)])  # 1 packet queued
    assert (on.w, on.ssthresh) == (100, 1 << 20)
