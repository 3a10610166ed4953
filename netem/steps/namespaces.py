"""The topology's namespaces and the veth links between them.

    client ns ── p<i> ═veth═ c<slot> ── link ns ── s0 ═veth═ eth0 ── server ns
    user<k> ns ── p<j> ═veth═ c<slot> ─┘

Every link has one end in the link namespace (which routes, or emulates, between them) and its
peer in a host's; nothing is created in the root namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpstream.netem import teardown
from mpstream.netem.emulators import Wire
from mpstream.netem.steps import Step
from mpstream.netem.steps.addresses import SERVER_ROUTER_ADDR, router_addr
from mpstream.netem.system import ip_batch, ip_batch_undo, sh


@dataclass(frozen=True)
class Namespaces(Step):
    """One namespace per host of `topology` (`names`, in the order they are made). Undone, it
    stops every process in the topology's namespaces and removes them, and with them all that
    the other steps made inside."""

    topology: str
    names: tuple[str, ...]

    @property
    def removes(self) -> frozenset[str]:
        return frozenset(self.names)

    def up(self) -> None:
        for ns in self.names:
            sh(["ip", "netns", "add", ns])

    def undo(self) -> None:
        # Found by the topology's name rather than taken from `names`: whatever namespace of
        # it is there goes, one its profile no longer names included.
        teardown.remove_namespaces(teardown.topology_namespaces(self.topology))


def link_lines(server_ns: str, wires: tuple[Wire, ...]) -> list[str]:
    """`ip -batch` lines for the link namespace: the server's link and each path's, each with
    the link namespace's address on it."""
    lines = ["link set lo up", "link add s0 type veth peer name eth0 netns " + server_ns,
             f"addr add {SERVER_ROUTER_ADDR}/24 dev s0", "link set s0 up"]
    for wire in wires:
        c = f"c{wire.slot}"
        lines += [f"link add {c} type veth peer name {wire.path.client_ifname} netns {wire.ns}",
                  f"addr add {router_addr(wire.slot)}/24 dev {c}", f"link set {c} up"]
    return lines


def link_undo_lines(wires: tuple[Wire, ...]) -> list[str]:
    # Deleting a veth's end in the link namespace deletes its peer in the host's too.
    return [*(f"link del c{wire.slot}" for wire in reversed(wires)), "link del s0",
            "link set lo down"]


@dataclass(frozen=True)
class Links(Step):
    """The veth pairs: the server's (s0 to eth0) and one per client path (c<slot> to p<i>)."""

    link_ns: str
    server_ns: str
    wires: tuple[Wire, ...]

    @property
    def within(self) -> frozenset[str]:
        return frozenset({self.link_ns, self.server_ns, *(wire.ns for wire in self.wires)})

    def up(self) -> None:
        ip_batch(self.link_ns, link_lines(self.server_ns, self.wires))

    def undo(self) -> None:
        ip_batch_undo(self.link_ns, link_undo_lines(self.wires))
