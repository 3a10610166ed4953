"""The userspace path manager's decisions (netem/pathmanager.py), on hand-worked events: what it
creates when a connection is established, when a subflow closes, when a path's link comes up,
and how often it tries a path that stays down."""

import pytest

from mpstream.netem.pathmanager import (
    EVENT_CLOSED,
    EVENT_ESTABLISHED,
    EVENT_SUB_CLOSED,
    EVENT_SUB_ESTABLISHED,
    Create,
    Decisions,
    PathAddr,
)

P0 = PathAddr(0, "10.1.0.2", "p0")
P1 = PathAddr(1, "10.1.1.2", "p1")
P2 = PathAddr(2, "10.1.2.2", "p2", backup=True)
SERVER = {"daddr4": "10.2.0.2", "dport": 80}


def _established(d, token=7, t=0.0, saddr="10.1.0.2", server_side=0):
    return d.event(EVENT_ESTABLISHED, {"token": token, "saddr4": saddr, "server_side":
                                       server_side, **SERVER}, t)


def _sub(d, kind, path, token=7, t=0.0):
    return d.event(kind, {"token": token, "saddr4": path.addr}, t)


def test_an_established_connection_gets_a_subflow_on_every_other_path():
    d = Decisions([P0, P1, P2])
    created = _established(d)
    assert created == [Create(7, P1, ("10.2.0.2", 80)), Create(7, P2, ("10.2.0.2", 80))]
    assert P1.local_id == 2 and P0.local_id == 1  # 0 is the first subflow's own id
    assert _established(Decisions([P0, P1]), server_side=1) == []  # not the client's to manage


def test_a_closed_subflow_is_tried_again_at_most_every_retry_interval():
    d = Decisions([P0, P1], retry_s=0.5)
    _established(d, t=0.0)
    assert _sub(d, EVENT_SUB_ESTABLISHED, P1, t=0.01) == []
    # The path fails; its subflow closes at t=10 and is tried at once (the last try was long
    # ago) ...
    assert _sub(d, EVENT_SUB_CLOSED, P1, t=10.0) == [Create(7, P1, ("10.2.0.2", 80))]
    # ... that try's SYN is refused quickly: the next waits for the interval.
    assert _sub(d, EVENT_SUB_CLOSED, P1, t=10.1) == []
    assert d.next_due(10.1) == pytest.approx(0.4)
    assert d.due(10.3) == []
    assert d.due(10.5) == [Create(7, P1, ("10.2.0.2", 80))]
    assert d.due(10.6) == []  # a try is under way: nothing until it ends
    assert d.next_due(10.6) is None
    assert _sub(d, EVENT_SUB_ESTABLISHED, P1, t=11.0) == []
    assert d.due(20.0) == []  # the path is back: nothing more to do


def test_the_first_subflows_path_is_tried_again_too_when_its_subflow_closes():
    d = Decisions([P0, P1])
    _established(d)
    _sub(d, EVENT_SUB_ESTABLISHED, P1, t=0.01)
    assert _sub(d, EVENT_SUB_CLOSED, P0, t=5.0) == [Create(7, P0, ("10.2.0.2", 80))]


def test_a_link_coming_up_is_tried_at_once_on_each_connection_lacking_it():
    d = Decisions([P0, P1], retry_s=0.5)
    _established(d, token=1)
    _established(d, token=2)
    _sub(d, EVENT_SUB_CLOSED, P1, token=1, t=3.0)  # try under way for 1
    _sub(d, EVENT_SUB_ESTABLISHED, P1, token=2, t=3.0)
    d.failed(Create(1, P1, ("10.2.0.2", 80)))  # the kernel refused that try
    assert d.link_up("p1", 3.1) == [Create(1, P1, ("10.2.0.2", 80))]  # before the interval
    assert d.link_up("p7", 3.2) == []  # not a path of ours


def test_a_closed_connection_is_forgotten_and_unknown_tokens_ignored():
    d = Decisions([P0, P1])
    _established(d)
    assert d.event(EVENT_CLOSED, {"token": 7}, 1.0) == []
    assert d.due(100.0) == [] and d.next_due(100.0) is None
    assert _sub(d, EVENT_SUB_CLOSED, P1, token=99, t=2.0) == []
    assert d.event(EVENT_SUB_CLOSED, {}, 2.0) == []
