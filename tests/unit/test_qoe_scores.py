"""QoE scores against values worked out by hand from docs/qoe.md's formulas on a small session:
three 2 s video segments at 1000, 2000 and 1000 kbit/s, startup 0.5 s, one 1.5 s stall,
6 s played."""

import math
import sys
import types

import pytest

from mpstream.qoe import scores


def ev(seq, t_ms, type_, **data):
    return {"seq": seq, "t_ms": t_ms, "type": type_, "data": data}


def seg(seq, index, kind, bitrate, duration_s=2.0):
    t = 100.0 * seq
    return ev(seq, t, "segment", url=f"/{kind}/{index}", kind=kind, bitrate=bitrate,
              bytes=100_000, t_request=t, t_first_byte=t + 5, t_done=t + 50, index=index,
              duration_s=duration_s)


def session(stall: bool = True) -> list[dict]:
    evs = [
        seg(0, None, "init", 0, None),
        seg(1, 1, "video", 1_000_000),
        seg(2, 1, "audio", 128_000),
        ev(3, 500, "startup", startup_delay_ms=500, manifest_ms=100, first_segment_ms=300,
           decode_ms=100, codec="avc1.64001f", width=640, height=360, bitrate=1_000_000),
        seg(4, 2, "video", 2_000_000),
        seg(5, 2, "audio", 128_000),
        ev(6, 2600, "quality_switch", from_bitrate=1_000_000, to_bitrate=2_000_000,
           width=1280, height=720, codec="avc1.64001f"),
        seg(7, 3, "video", 1_000_000),
        ev(8, 4700, "quality_switch", from_bitrate=2_000_000, to_bitrate=1_000_000,
           width=640, height=360, codec="avc1.64001f"),
    ]  # fmt: skip
    if stall:
        evs += [ev(9, 5000, "stall_start", position=4.0),
                ev(10, 6500, "stall_end", position=4.0, duration_ms=1500)]
    evs.append(ev(11, 8600, "end", reason="duration", position=6.0))
    return evs


def test_yin_qoe_lin_by_hand():
    # Σ R = 1000 + 2000 + 1000 kbit/s; λ·Σ|ΔR| = 1000 + 1000; μ·1.5 s; μs·0.5 s
    assert scores.session_scores(session())["qoe_yin"] == pytest.approx(
        4000 - 2000 - 3000 * 1.5 - 3000 * 0.5)


def test_clae_by_hand():
    mean, rmax = 4000 / 3, 2000.0
    sd = math.sqrt(((1000 - mean) ** 2 + (2000 - mean) ** 2 + (1000 - mean) ** 2) / 2)
    no_stall = 0.17 + 5.67 * mean / rmax - 6.72 * sd / rmax
    assert scores.session_scores(session(stall=False))["qoe_clae"] == pytest.approx(no_stall)
    assert no_stall == pytest.approx(2.0101, abs=1e-4)
    # one stall of 1.5 s in K = 3 segments: 4.95·(0.875·(1 + ln(1/3)/6) + 0.125·1.5/15)
    penalty = 4.95 * (0.875 * (1 + math.log(1 / 3) / 6) + 0.125 * 0.1)
    assert penalty == pytest.approx(3.6001, abs=1e-4)
    assert scores.session_scores(session())["qoe_clae"] == 0.0  # max(0, 2.0101 − 3.6001)
    assert scores.clae([1e6, 1e6], 2e6, 0, 0.0) == pytest.approx(0.17 + 5.67 / 2)


def with_ladder(evs: list[dict], top_bps: float) -> list[dict]:
    rungs = [{"bitrate": b, "width": 640, "height": 360, "codec": "avc1.64001f"}
             for b in (1_000_000, 2_000_000, top_bps)]
    return [ev(99, 50, "ladder", representations=rungs), *evs]


def test_clae_scores_against_the_ladders_top_rung():
    # The same session on a ladder whose top is 4000 kbit/s, a rung it never reached.
    mean, rmax = 4000 / 3, 4000.0
    sd = math.sqrt(((1000 - mean) ** 2 + (2000 - mean) ** 2 + (1000 - mean) ** 2) / 2)
    got = scores.session_scores(with_ladder(session(stall=False), 4_000_000))
    assert got["inputs"]["top_bitrate_kbps"] == 4000
    assert got["qoe_clae"] == pytest.approx(0.17 + 5.67 * mean / rmax - 6.72 * sd / rmax)
    assert got["qoe_clae"] < scores.session_scores(session(stall=False))["qoe_clae"]


def test_summary_gives_utilization_of_the_top_rung_and_down_switches():
    from mpstream.qoe.metrics import session_metrics

    plain = session_metrics(session(stall=False))
    assert plain.top_bitrate_bps is None and plain.bitrate_utilization is None
    assert plain.switches == 2 and plain.down_switches == 1
    laddered = session_metrics(with_ladder(session(stall=False), 4_000_000))
    assert laddered.top_bitrate_bps == 4_000_000
    assert laddered.mean_bitrate_bps is not None
    assert laddered.bitrate_utilization == pytest.approx(laddered.mean_bitrate_bps / 4_000_000)
    assert 0 < laddered.bitrate_utilization < 1


def test_duanmu_by_hand():
    # 54 − 2.3·0.5 − 56.5·(1.5/6) + 0.007·1333.3 + 0.0007·(2000/2)
    assert scores.session_scores(session())["qoe_duanmu"] == pytest.approx(
        54 - 1.15 - 14.125 + 0.007 * 4000 / 3 + 0.7)


def test_yu_by_hand_with_the_intended_switching_weight():
    s = scores.session_scores(session())
    # 1.3333 Mbit/s − (1/3)·(2 Mbit/s / 3) − 20·1.5/(6 + 1.5)
    assert s["qoe_yu"] == pytest.approx(4 / 3 - (1 / 3) * (2 / 3) - 4.0)
    # goDASH's w1 is 0 (integer division): its figure is ours plus the switching term / 3
    godash = 4 / 3 - 4.0
    assert s["qoe_yu"] + s["inputs"]["yu_switching_mbps"] / 3 == pytest.approx(godash)


def test_inputs_are_shown_in_the_formulas_units():
    i = scores.session_scores(session())["inputs"]
    assert i["bitrates_kbps"] == [1000, 2000, 1000]
    assert i["top_bitrate_kbps"] == 2000
    assert (i["startup_s"], i["stall_count"], i["stall_s"], i["played_s"]) == (0.5, 1, 1.5, 6.0)
    assert (i["media_s"], i["rate_change_sum_kbps"], i["rate_changes"]) == (6.0, 2000, 2)


def test_no_video_segment_no_score():
    s = scores.session_scores([ev(0, 10, "end", reason="error", position=0.0)])
    assert all(s[k] is None for k in scores.SCORE_FIELDS)


def test_p1203_mode0_input():
    inp = scores.p1203_input(session(), fps=25.0)
    assert inp["I13"]["segments"] == [
        {"bitrate": 1000, "codec": "h264", "duration": 2.0, "fps": 25.0, "resolution": "640x360",
         "start": 0},
        {"bitrate": 2000, "codec": "h264", "duration": 2.0, "fps": 25.0,
         "resolution": "1280x720", "start": 2.0},
        {"bitrate": 1000, "codec": "h264", "duration": 2.0, "fps": 25.0, "resolution": "640x360",
         "start": 4.0},
    ]  # fmt: skip
    assert [s["bitrate"] for s in inp["I11"]["segments"]] == [128, 128]
    # the startup delay is a stall at 0, then the 1.5 s stall at 4 s of media
    assert inp["I23"]["stalling"] == [[0.0, 0.5], [4.0, 1.5]]
    assert inp["IGen"]["device"] == "pc"


def test_p1203_without_the_reference_implementation_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "itu_p1203", None)  # import fails, as when not installed
    o46, why = scores.p1203_o46(scores.p1203_input(session(), fps=25.0))
    assert o46 is None and "itu_p1203" in why and "non-commercial" in why


def test_p1203_calls_the_users_installation(monkeypatch):
    seen = []

    class Standalone:  # the interface of itu_p1203.P1203Standalone
        def __init__(self, data):
            seen.append(data)

        def calculate_complete(self):
            return {"O46": 3.25}

    monkeypatch.setitem(sys.modules, "itu_p1203", types.SimpleNamespace(P1203Standalone=Standalone))
    inp = scores.p1203_input(session(), fps=25.0)
    assert scores.p1203_o46(inp) == (3.25, None)
    assert seen == [inp]


def test_summary_names_the_rule_the_player_reported_and_counts_its_decisions():
    from mpstream.qoe.metrics import session_metrics

    plain = session_metrics(session(stall=False))
    assert plain.abr is None and plain.abr_decisions == 0 and plain.ladder is None
    decision = {"rule": "bba0", "index": 0, "bitrate": 1e6, "estimate_bps": None, "params": {},
                "inputs": {"ladder_bps": [1e6], "buffer_s": 0, "segment_s": 2, "previous": None,
                           "past": []}}
    evs = [ev(97, 40, "abr", name="bba0", player_rules=["MpstreamAbrRule"], params={}),
           *(ev(200 + i, 60 + i, "abr_decision", **decision) for i in range(3)),
           *with_ladder(session(stall=False), 4_000_000)]
    got = session_metrics(evs)
    assert got.abr == "bba0" and got.abr_decisions == 3
    assert [r.bitrate for r in got.ladder] == [1_000_000, 2_000_000, 4_000_000]
