"""A topology as steps: the composer brings steps up in order and undoes them in reverse, also
when one fails half-way (it undoes itself, the composer the ones before it); a step inside
namespaces that a later undo removes is left to them. And the topology's plan: which steps, in
which order, and undo lines that take away what the up lines made."""

import re

import pytest

from mpstream.deployment import ClientMptcp, ClientSettings, Deployment, ServerSettings
from mpstream.netem.emulators import routing
from mpstream.netem.profile import load_profile, profile_from_dict
from mpstream.netem.steps import Step, Steps
from mpstream.netem.steps.addresses import (
    client_lines,
    client_undo_lines,
    server_lines,
    server_undo_lines,
)
from mpstream.netem.steps.emulation import routing_undo_lines
from mpstream.netem.steps.namespaces import link_lines, link_undo_lines
from mpstream.netem.topology import Topology


class Fake(Step):
    """A step that writes what it does into `log`; `fails` makes its up raise half-way."""

    def __init__(self, name, log, *, fails=None, undo_fails=False, within=(), removes=()):
        self.name, self.log, self.fails, self.undo_fails = name, log, fails, undo_fails
        self._within, self._removes = frozenset(within), frozenset(removes)

    @property
    def within(self):
        return self._within

    @property
    def removes(self):
        return self._removes

    def up(self):
        self.log.append(f"up {self.name}")
        if self.fails is not None:
            raise self.fails

    def undo(self):
        self.log.append(f"undo {self.name}")
        if self.undo_fails:
            raise RuntimeError(f"undo {self.name} failed")


def fakes(log, names, **special):
    return [Fake(name, log, **special.get(name, {})) for name in names]


def test_steps_come_up_in_order_and_go_down_in_reverse():
    log = []
    steps = Steps(fakes(log, "abc"))
    steps.up()
    steps.down()
    assert log == ["up a", "up b", "up c", "undo c", "undo b", "undo a"]
    steps.down()  # nothing is up any more
    assert len(log) == 6


@pytest.mark.parametrize("failure", [RuntimeError("boom"), KeyboardInterrupt()])
def test_a_step_failing_half_way_undoes_itself_and_the_ones_before_it_are_undone(failure):
    log = []
    steps = Steps(fakes(log, "abcd", c={"fails": failure}))
    with pytest.raises(type(failure)) as raised:
        steps.up()
    assert raised.value is failure  # the step's own failure goes on up, not a teardown's
    assert log == ["up a", "up b", "up c", "undo c", "undo b", "undo a"]  # d never came up
    steps.down()
    assert len(log) == 6


def test_a_step_inside_namespaces_that_an_earlier_step_removes_goes_with_them():
    log = []
    steps = Steps(fakes(log, ["ns", "links", "emulators"],
                        ns={"removes": {"n1", "n2"}}, links={"within": {"n1", "n2"}}))
    steps.up()
    steps.down()
    assert log == ["up ns", "up links", "up emulators", "undo emulators", "undo ns"]


def test_a_step_inside_namespaces_undoes_itself_when_it_fails():
    log = []
    steps = Steps(fakes(log, ["ns", "links", "addresses"], ns={"removes": {"n1"}},
                        links={"within": {"n1"}},
                        addresses={"within": {"n1"}, "fails": RuntimeError("no")}))
    with pytest.raises(RuntimeError):
        steps.up()
    # Its own undo runs; the step before it, up in the same namespace, goes with it.
    assert log == ["up ns", "up links", "up addresses", "undo addresses", "undo ns"]


def test_a_namespace_not_removed_later_leaves_its_steps_to_undo_themselves():
    log = []
    steps = Steps(fakes(log, ["ns", "links"], ns={"removes": {"n1"}},
                        links={"within": {"n1", "n2"}}))
    steps.up()
    steps.down()
    assert log[-2:] == ["undo links", "undo ns"]


def test_an_undo_that_fails_keeps_no_other_from_running_and_is_tried_again():
    log = []
    steps = Steps(fakes(log, "abc", b={"undo_fails": True}))
    steps.up()
    with pytest.raises(RuntimeError, match="undo b failed"):
        steps.down()
    assert log[3:] == ["undo c", "undo b", "undo a"]
    # Something of b may be left: it still counts as up, and the next teardown tries it.
    with pytest.raises(RuntimeError, match="undo b failed"):
        steps.down()
    assert log[6:] == ["undo b"]


def test_a_failing_teardown_after_a_failed_step_leaves_the_step_up_to_try_again():
    log = []
    steps = Steps(fakes(log, "abc", b={"undo_fails": True}, c={"fails": ValueError("up")}))
    with pytest.raises(RuntimeError, match="undo b failed") as raised:
        steps.up()
    assert isinstance(raised.value.__context__, ValueError)  # the cause stays in the chain
    assert log == ["up a", "up b", "up c", "undo c", "undo b", "undo a"]
    with pytest.raises(RuntimeError):
        steps.down()
    assert log[6:] == ["undo b"]


def test_steps_another_process_brought_up_are_all_undone():
    log = []
    Steps(fakes(log, "abc"), already_up=True).down()
    assert log == ["undo c", "undo b", "undo a"]


# ---- the topology's plan ----------------------------------------------------------------------

def kinds(topo):
    return [type(step).__name__ for step in topo._plan()]


def test_a_topology_plans_its_steps_in_order():
    assert kinds(Topology(load_profile("np03-2x10"), "unit", emulated=True)) == [
        "Namespaces", "Sysctls", "Links", "Addresses", "Endpoints", "EmulatorRouting",
        "Emulators", "VerifyPaths"]
    assert kinds(Topology(load_profile("np03-2x10"), "unit", emulated=False)) == [
        "Namespaces", "Sysctls", "Links", "Addresses", "Endpoints", "VerifyPaths"]
    every = Deployment(
        name="every-step",
        client=ClientSettings(cc="lia", mptcp=ClientMptcp(path_manager="userspace")),
        server=ServerSettings(cc="olia", cwnd_clamp_bdp=2.0))
    topo = Topology(load_profile("thesis-bandwidth-unbalanced", deployment=every), "unit",
                    emulated=True)
    assert kinds(topo) == [
        "CongestionControls", "Namespaces", "Sysctls", "Links", "Addresses", "Endpoints",
        "Caps", "EmulatorRouting", "Emulators", "VerifyPaths", "PathManager"]
    ccs, namespaces = topo._plan()[:2]
    assert ccs.ccs == ("lia", "olia")
    assert namespaces.names == ("mps-unit-client", "mps-unit-server", "mps-unit-link")


def test_every_namespace_a_step_works_in_is_one_the_namespaces_step_removes():
    profile = profile_from_dict({"paths": [{"rate": "10mbit"}, {}],
                                 "competitors": [{"paths": [{"via": 0}, {}]}]})
    plan = Topology(profile, "unit", emulated=True)._plan()
    removed = plan[0].removes
    assert removed == {"mps-unit-client", "mps-unit-server", "mps-unit-link", "mps-unit-user1"}
    assert all(step.within <= removed for step in plan)


def _prefs(lines, verb):
    return sorted(int(m.group(1)) for line in lines
                  if line.startswith(f"rule {verb}") and (m := re.search(r"pref (\d+)", line)))


def _devices(lines, pattern):
    return sorted(m.group(1) for line in lines if (m := re.match(pattern, line)))


@pytest.mark.parametrize("data", [
    {"paths": [{}, {}]},
    {"paths": [{}, {}, {}], "server_link": {"rate": "20mbit"}},
    {"paths": [{"rate": "10mbit"}, {}], "competitors": [{"paths": [{"via": 1}, {}]}]},
])
def test_each_undo_takes_away_the_rules_and_devices_its_up_made(data):
    topo = Topology(profile_from_dict(data), "unit", emulated=True)
    wires = tuple(topo.wires)
    server_link = topo.profile.server_link is not None
    made = routing(list(wires), server_link)
    undone = routing_undo_lines(wires, server_link)
    assert _prefs(made, "add") == _prefs(undone, "del")
    assert _devices(made, r"tuntap add dev (\S+)") == _devices(undone, r"link del (\S+)")
    made = link_lines(topo.server_ns, wires)
    assert _devices(made, r"link add (\S+)") == _devices(link_undo_lines(wires),
                                                          r"link del (\S+)")
    for host in topo._client_hosts():
        made, undone = client_lines(host), client_undo_lines(host)
        assert _prefs(made, "add") == _prefs(undone, "del")
        assert _devices(made, r"addr add \S+ dev (\S+)") == _devices(undone,
                                                                     r"addr flush dev (\S+)")
    assert _devices(server_lines(), r"addr add \S+ dev (\S+)") == _devices(
        server_undo_lines(), r"addr flush dev (\S+)")
