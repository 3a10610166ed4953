"""Path policies: the deadline policy's decisions on hand-worked buffer traces, the controller's
toggles (with a fake endpoint setter: the integration test beside it uses the kernel's), the
metered figures, the profile's refusals and the refusals before any topology."""

import time

import pytest

from mpstream.errors import UserError
from mpstream.netem.profile import profile_from_dict
from mpstream.qoe.events import (
    BufferData,
    BufferEvent,
    SegmentData,
    SegmentEvent,
    StartupData,
    StartupEvent,
)
from mpstream.transports import pathpolicy
from mpstream.transports.base import get_transport
from mpstream.transports.pathpolicy import (
    DeadlineMarks,
    Observation,
    PathPolicyController,
    deadline_decision,
    metered_figures,
    policy_named,
)

pytestmark = pytest.mark.unit
MARKS = DeadlineMarks(low_s=4, high_s=10, margin_s=1)
STARTUP = StartupEvent(seq=0, t_ms=0.0, type="startup", data=StartupData(
    startup_delay_ms=900.0, manifest_ms=40.0, first_segment_ms=300.0, decode_ms=20.0,
    codec="avc1.64001f", width=640, height=360, bitrate=800_000.0))


def _fit(profile, name):
    """The profile as policy `name` starts a session on it, and the paths it holds back."""
    policy = policy_named(name)
    held = policy.held_paths(profile)
    return policy.starting(profile, held), held


def _decide(using, buffer_s, started=True, seg=None, bps=None, prev=None):
    """A decision for a buffer at `buffer_s` whose sample before was `prev` (default: the
    same level, a buffer that is not filling)."""
    prev = buffer_s if prev is None else prev
    return deadline_decision(using, Observation(buffer_s, started, seg, bps, prev), MARKS)


def test_nothing_changes_before_playback_starts_or_without_a_buffer_level():
    assert _decide(False, 0.0, started=False) is None
    assert _decide(False, None) is None
    # One sample: no trend yet.
    assert deadline_decision(False, Observation(1.0, True, None, None, None), MARKS) is None


def test_the_metered_path_joins_below_the_low_mark_and_leaves_at_the_high_mark():
    assert _decide(False, 3.9).use_metered is True
    assert "below the low mark 4 s" in _decide(False, 3.9).reason
    assert _decide(False, 4.0) is None  # at the mark: not below it
    # Between the marks nothing changes either way (hysteresis).
    assert _decide(True, 6.0) is None
    assert _decide(False, 6.0) is None
    left = _decide(True, 10.0)
    assert left.use_metered is False and "high mark 10 s" in left.reason


def test_a_filling_buffer_needs_no_help():
    """After startup or a flush the buffer is low but filling: its segments come faster than
    it plays them."""
    assert _decide(False, 2.0, prev=1.0) is None
    assert _decide(False, 2.0, prev=3.0).use_metered is True
    # 11 s to 0.5 s in one sample is a flush by the player, not a draining buffer.
    assert _decide(False, 0.5, prev=11.0) is None
    assert _decide(False, 4.5, seg=1_000_000, bps=2e6, prev=3.0) is None


def test_the_metered_path_joins_when_the_next_segment_would_miss_its_deadline():
    # 1 MB at 2 Mbit/s takes 4 s; with a 1 s margin it needs 5 s of buffer: 6 s is enough,
    # 4.5 s is not.
    assert _decide(False, 6.0, seg=1_000_000, bps=2e6) is None
    joined = _decide(False, 4.5, seg=1_000_000, bps=2e6)
    assert joined.use_metered is True and "needs 4.0 s" in joined.reason


def test_a_buffer_trace_toggles_as_worked_out_by_hand():
    """One sample a second after startup: 2 s and filling (no join), past the high mark,
    draining by a second a second as the unmetered path fades (join at 3.5 s, the first level
    below 4 s that is not filling; 3.0 s finds it joined), refilling (leave at 10.0 s, not at
    9.9 s). A flush to 0.5 s that refills at once (the player's own doing) needs no help; one
    that stays empty does (0.4 s after 0.5 s)."""
    trace = [2.0, 8.0, 12.0, 10.5, 9.0, 7.5, 6.0, 4.5, 3.5, 3.0, 5.0, 9.9, 10.0, 11.0, 0.5, 6.0,
             9.0, 0.5, 0.4]
    using, changes, prev = False, [], None
    for level in trace:
        d = deadline_decision(using, Observation(level, True, None, None, prev), MARKS)
        prev = level
        if d is not None:
            using = d.use_metered
            changes.append((level, using))
    assert changes == [(3.5, True), (10.0, False), (0.4, True)]


def test_marks_must_be_ordered():
    with pytest.raises(UserError, match="low mark"):
        DeadlineMarks(low_s=10, high_s=4)


def _events(*levels, startup=True):
    """The probe's events, as the collector's client gives them: a startup, then one buffer
    level a second."""
    out = [STARTUP] if startup else []
    for seq, level in enumerate(levels, start=1):
        out.append(BufferEvent(seq=seq, t_ms=1000.0 * seq, type="buffer",
                               data=BufferData(level_s=level, position=float(seq))))
    return out


def _after(feed):
    """A collector's `events_since`: only the events after the seq asked, and a record of the
    seqs asked."""
    def since(seq):
        feed.setdefault("asked", []).append(seq)
        return [e for e in feed["events"] if e.seq > seq]
    return since


def test_the_controller_asks_only_for_the_events_after_the_last_it_folded():
    feed = {"events": _events(8.0)}
    ctl = PathPolicyController(policy=policy_named("deadline"), held=[1], events=_after(feed))
    ctl.step()
    feed["events"] = _events(8.0, 7.0, 6.0)
    ctl.step()
    ctl.step()
    assert feed["asked"] == [-1, 1, 3]
    assert (ctl.view.previous_buffer_s, ctl.view.buffer_s) == (7.0, 6.0)


def test_a_video_segments_rate_is_the_qoe_modules_and_a_timeless_one_keeps_the_last():
    def segment(seq, kind, t_done, bytes_=500_000):
        return SegmentEvent(seq=seq, t_ms=0.0, type="segment", data=SegmentData(
            url="/s.m4s", kind=kind, bitrate=1e6, bytes=bytes_, t_request=1000.0,
            t_first_byte=1000.0, t_done=t_done, index=seq, duration_s=2.0))

    view = pathpolicy.PlayerView()
    view.fold([segment(1, "video", 2000.0)])
    assert (view.segment_bytes, view.segment_bps) == (500_000, 4e6)
    view.fold([segment(2, "video", 1000.0, 250_000), segment(3, "audio", 1500.0)])
    assert (view.segment_bytes, view.segment_bps) == (250_000, 4e6)


def test_the_controller_toggles_the_metered_paths_and_records_why():
    calls = []
    feed = {"events": _events(8.0, 4.5)}
    ctl = PathPolicyController(
        policy=policy_named("deadline"), held=[1], events=_after(feed),
        counters=lambda: [{"rx_bytes": 0}, {"rx_bytes": 0}],
        hold=lambda path, held: calls.append((path, held)))
    assert ctl.step() is None and calls == []
    feed["events"] = _events(8.0, 4.5, 3.0)
    assert ctl.step().use_metered is True
    assert calls == [(1, False)]
    feed["events"] = _events(8.0, 4.5, 3.0, 11.0)
    ctl.step()
    assert calls[-1] == (1, True)
    toggles = ctl.report()["toggles"]
    assert [(t["action"], t["buffer_s"]) for t in toggles] == [("nobackup", 3.0), ("backup", 11.0)]
    assert "low mark" in toggles[0]["reason"]


def test_a_failed_toggle_fails_the_session_and_the_flag_is_restored_on_exit():
    def gone(path, held):
        raise UserError("Error: endpoint not found")

    ctl = PathPolicyController(policy=policy_named("deadline"), held=[1],
                               events=lambda seq: _events(2.0, 1.0), hold=gone, poll_s=0.01)
    with ctl.running():
        for _ in range(500):
            if ctl.failure:
                break
            time.sleep(0.01)
    assert ctl.failure and "endpoint not found" in ctl.failure

    calls = []
    ok = PathPolicyController(policy=policy_named("deadline"), held=[1],
                              events=lambda seq: _events(2.0, 1.0),
                              hold=lambda path, held: calls.append(held))
    with ok.running():
        ok.step()  # joins: flag off
    assert calls == [False, True]  # ... and back to backup on exit


def test_metered_figures_count_both_directions_and_price_them():
    paths = [{"index": 0, "rx_bytes": 9_000_000, "tx_bytes": 1_000_000},
             {"index": 1, "rx_bytes": 2_000_000, "tx_bytes": 500_000}]
    got = metered_figures(paths, {1: 10.0})
    assert got == {"metered_bytes": 2_500_000, "metered_share": 0.2, "metered_cost": 0.025}
    assert metered_figures(paths, {1: None})["metered_cost"] is None
    assert metered_figures(paths, {})["metered_bytes"] == 0


WIFI = {"name": "wifi", "rate": "20mbit"}
CELL = {"name": "cell", "rate": "10mbit", "metered": True, "cost_per_gb": 8.0}


def test_a_profile_with_every_path_metered_is_refused_unless_allowed():
    with pytest.raises(UserError, match=r"every path is metered.*allow_all_metered"):
        profile_from_dict({"paths": [CELL, CELL | {"name": "cell2"}]})
    ok = profile_from_dict({"paths": [CELL, CELL | {"name": "cell2"}],
                            "allow_all_metered": True})
    assert ok.metered_paths() == {0: 8.0, 1: 8.0}
    with pytest.raises(UserError, match="cost_per_gb prices a metered path"):
        profile_from_dict({"paths": [WIFI | {"cost_per_gb": 1.0}, CELL]})


def test_backup_and_deadline_start_with_the_metered_path_held_back():
    prof = profile_from_dict({"paths": [CELL, WIFI]})
    held, paths = _fit(prof, "deadline")
    assert [p.backup for p in held.paths] == [True, False] and paths == [0]
    assert held.primary_path == 1  # the initial subflow goes over the free path
    assert _fit(prof, "always") == (prof, [])


def test_policies_are_refused_where_they_cannot_act():
    prof = profile_from_dict({"paths": [WIFI, CELL]})
    with pytest.raises(UserError, match="choose one of always, backup, deadline, fast-start"):
        pathpolicy.check_for(policy_named("nosuch"), get_transport("mptcp"), prof)
    with pytest.raises(UserError, match="transport tcp: it cannot hold a path back"):
        pathpolicy.check_for(policy_named("deadline"), get_transport("tcp"), prof)
    # The QUIC hop's gateway holds a path back, as the kernel's endpoint flag does; a hop
    # without QUIC's multipath has no lever.
    for policy in ("backup", "deadline"):
        pathpolicy.check_for(policy_named(policy), get_transport("mpquic"), prof)
        with pytest.raises(UserError, match="transport quic: it cannot hold a path back"):
            pathpolicy.check_for(policy_named(policy), get_transport("quic"), prof)
    with pytest.raises(UserError, match="no metered path"):
        pathpolicy.check_for(policy_named("backup"), get_transport("mptcp"),
                             profile_from_dict({"paths": [WIFI]}))
    pathpolicy.check_for(policy_named("deadline"), get_transport("mptcp"), prof)
    pathpolicy.check_for(policy_named("always"), get_transport("tcp"), prof)


def test_the_unmetered_rate_is_a_segments_rate_only_while_the_free_paths_carried_it():
    est = pathpolicy.RateEstimate()
    assert est.unmetered_bps(8e6) is None  # no counters yet
    est.add(0.0, [{"rx_bytes": 0}, {"rx_bytes": 0}], {1})
    est.add(1.0, [{"rx_bytes": 1_000_000}, {"rx_bytes": 10_000}], {1})
    assert est.unmetered_bps(8e6) == 8e6  # 99% over the free path: its rate
    est.add(2.0, [{"rx_bytes": 1_500_000}, {"rx_bytes": 900_000}], {1})
    assert est.unmetered_bps(8e6) is None  # the metered path carried much of it
    # Three seconds later the window holds only free bytes again.
    est.add(5.5, [{"rx_bytes": 2_500_000}, {"rx_bytes": 900_000}], {1})
    est.add(6.0, [{"rx_bytes": 3_000_000}, {"rx_bytes": 900_000}], {1})
    assert est.unmetered_bps(2e6) == 2e6


def test_a_condition_names_a_policy_there_is_and_ordered_marks():
    from pydantic import ValidationError

    from mpstream.runner.scenario import Condition

    with pytest.raises(ValidationError, match="choose one of always, backup, deadline, fast-start"):
        Condition(label="x", profile="p", path_policy="nosuch")
    with pytest.raises(ValidationError, match="low mark must be below the high mark"):
        Condition(label="x", profile="p", path_policy="deadline", deadline_marks=(10, 4))
    assert Condition(label="x", profile="p", path_policy="deadline",
                     deadline_marks=(3, 8)).deadline_marks == (3.0, 8.0)


FAST = {"name": "fast", "rate": "25mbit"}
SLOW = {"name": "slow", "rate": "5mbit"}


def test_fast_start_holds_the_slower_paths_until_the_first_frame_and_never_again():
    calls = []
    feed = {"events": _events(startup=False)}
    ctl = PathPolicyController(
        policy=policy_named("fast-start"), held=[1], events=_after(feed),
        counters=list,
        hold=lambda path, held: calls.append((path, held)))
    assert ctl.step() is None and calls == []  # no frame yet: the slow path stays back
    feed["events"] = _events(0.5)
    assert ctl.step().use_metered is True
    feed["events"] = _events(0.5, 30.0, 0.1)  # a full buffer, an empty one: no more toggles
    assert ctl.step() is None
    assert calls == [(1, False)]
    toggles = ctl.report()["toggles"]
    assert [(t["path"], t["action"]) for t in toggles] == [(1, "nobackup")]
    assert "first frame" in toggles[0]["reason"]


def test_fast_start_holds_a_users_slower_paths_that_the_network_did_not_flag_itself():
    prof = profile_from_dict({"paths": [FAST, SLOW]})
    fitted, held = _fit(prof, "fast-start")
    assert held == [1] and [p.backup for p in fitted.paths] == [False, True]
    # Paths of one rate: none is slower, nothing is held, and the policy is not refused.
    even = profile_from_dict({"paths": [FAST, FAST | {"name": "fast2"}]})
    assert _fit(even, "fast-start") == (even, [])
    pathpolicy.check_for(policy_named("fast-start"), get_transport("mptcp"), even)
    # A path the deployment flags backup is the deployment's: fast-start leaves it alone.
    flagged = profile_from_dict({"paths": [FAST, SLOW | {"backup": True}]})
    assert _fit(flagged, "fast-start")[1] == []
    with pytest.raises(UserError, match="transport tcp: it cannot hold a path back"):
        pathpolicy.check_for(policy_named("fast-start"), get_transport("tcp"), prof)


def test_handover_holds_a_users_slower_paths_for_the_whole_session():
    prof = profile_from_dict({"paths": [FAST, SLOW]})
    fitted, held = _fit(prof, "handover")
    assert held == [1] and [p.backup for p in fitted.paths] == [False, True]
    calls = []
    feed = {}
    ctl = PathPolicyController(
        policy=policy_named("handover"), held=[1], events=_after(feed),
        counters=list,
        hold=lambda path, held: calls.append((path, held)))
    for events in (_events(startup=False), _events(0.5), _events(0.5, 0.1, 0.0)):
        feed["events"] = events  # before the first frame, after it, a buffer run dry: held
        assert ctl.step() is None
    assert calls == [] and ctl.report()["toggles"] == []
    even = profile_from_dict({"paths": [FAST, FAST | {"name": "fast2"}]})
    assert _fit(even, "handover") == (even, [])
    pathpolicy.check_for(policy_named("handover"), get_transport("mpquic"), prof)
    with pytest.raises(UserError, match="transport tcp: it cannot hold a path back"):
        pathpolicy.check_for(policy_named("handover"), get_transport("tcp"), prof)
