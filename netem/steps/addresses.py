"""The topology's addresses and routes: each client host's path addresses, with a routing table
per path so that traffic from a path's address leaves by that path, and the server's address
with its one route back to the clients.

Every client path, the competitors' after the client's, has a slot: its subnet 10.1.<slot>.0/24,
whose .1 is the link namespace's end (`router_addr`) and .2 the client's. The server is 10.2.0.2
behind the link namespace's 10.2.0.1. No namespace has a route off the machine: the only routes
are to these subnets.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpstream.netem.emulators import Wire
from mpstream.netem.steps import Step
from mpstream.netem.system import ip_batch, ip_batch_undo

SERVER_ADDR = "10.2.0.2"
SERVER_ROUTER_ADDR = "10.2.0.1"
SERVER_SUBNET = "10.2.0.0/24"
CLIENT_SUBNETS = "10.1.0.0/16"


def router_addr(slot: int) -> str:
    """The next hop from a client over the path in `slot` (the client's path `slot`)."""
    return f"10.1.{slot}.1"


def path_table(wire: Wire) -> int:
    """The routing table (and rule preference) of a client path, on its own host."""
    return 100 + wire.path.index


@dataclass(frozen=True)
class ClientHost:
    """A client host as it is addressed: its namespace, its paths' wires in path order, and
    the path (an index into them) its default route to the server takes."""

    ns: str
    wires: tuple[Wire, ...]
    primary: int


def client_lines(host: ClientHost) -> list[str]:
    lines = ["link set lo up"]
    for wire in host.wires:
        path, table = wire.path, path_table(wire)
        lines += [
            f"addr add {path.client_addr}/24 dev {path.client_ifname}",
            f"link set {path.client_ifname} up",
            # Traffic from this path's address leaves by this path (pins subflows, -B binds).
            f"route add {SERVER_SUBNET} via {router_addr(wire.slot)} dev {path.client_ifname} "
            f"table {table}",
            f"rule add from {path.client_addr} lookup {table} pref {table}",
        ]
    first = host.wires[host.primary]
    lines.append(f"route add {SERVER_SUBNET} via {router_addr(first.slot)} "
                 f"dev {first.path.client_ifname}")
    return lines


def client_undo_lines(host: ClientHost) -> list[str]:
    lines = [f"route del {SERVER_SUBNET}"]
    for wire in host.wires:
        table = path_table(wire)
        lines += [f"rule del pref {table}", f"route flush table {table}",
                  f"addr flush dev {wire.path.client_ifname}",
                  f"link set {wire.path.client_ifname} down"]
    return [*lines, "link set lo down"]


def server_lines() -> list[str]:
    return [
        "link set lo up",
        f"addr add {SERVER_ADDR}/24 dev eth0",
        "link set eth0 up",
        f"route add {CLIENT_SUBNETS} via {SERVER_ROUTER_ADDR} dev eth0",
    ]


def server_undo_lines() -> list[str]:
    return [f"route del {CLIENT_SUBNETS}", "addr flush dev eth0", "link set eth0 down",
            "link set lo down"]


@dataclass(frozen=True)
class Addresses(Step):
    """The client hosts' and the server's addresses and routes (on the interfaces `Links`
    made)."""

    clients: tuple[ClientHost, ...]
    server_ns: str

    @property
    def within(self) -> frozenset[str]:
        return frozenset({*(host.ns for host in self.clients), self.server_ns})

    def up(self) -> None:
        for host in self.clients:
            ip_batch(host.ns, client_lines(host))
        ip_batch(self.server_ns, server_lines())

    def undo(self) -> None:
        ip_batch_undo(self.server_ns, server_undo_lines())
        for host in reversed(self.clients):
            ip_batch_undo(host.ns, client_undo_lines(host))
