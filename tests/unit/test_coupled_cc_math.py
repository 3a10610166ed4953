"""The coupled CCs' integer window arithmetic (netem/cc/coupled_math.h, the code the BPF programs
run), through its user-space harness, against the papers' formulas in floating point:
LIA (RFC 6356 section 3), OLIA (Khalili et al. 2012, the draft's equations (2)-(4)) and BALIA
(Peng et al. 2016, algorithm 1)."""

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
