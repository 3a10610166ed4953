"""mpstream's userspace MPTCP path manager: a client's subflows, added again when a path is usable.

The in-kernel path manager creates a connection's subflows once, from the client's endpoints,
and never re-creates one that closed: a subflow whose path stayed down longer than its retries
is gone for the rest of the connection. With `net.mptcp.path_manager = userspace` in the
client's namespace the kernel leaves that to a program, and this is one (a deployment's
`client.mptcp.path_manager = "userspace"`). It listens to the kernel's MPTCP events
(generic netlink family `mptcp_pm`, group `mptcp_pm_events`) and to link events, and:

- when a connection is established, creates a subflow on every other path;
- when a subflow closes, tries its path again, at most every RETRY_S: an emulated outage gives
  no link event, so a retry at a short fixed interval is what finds the path back (each try is
  a SYN that times out while the path is down and closes the attempt, which is the next
  SUB_CLOSED);
- when a path's interface comes up (a link event, on a real host), tries it at once.

The decisions are `Decisions` (no I/O, tested with hand-worked events); `main` runs them
against the kernel, inside the client's namespace (Topology starts it, and teardown and
`mpstream clean` stop it with every process of the namespace). It prints one JSON line per
event and action on stdout, the first `{"ready": true}` once it listens.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

RETRY_S = 0.5

# enum mptcp_event_type and the MPTCP_PM_CMD_* of <linux/mptcp.h>
EVENT_CREATED, EVENT_ESTABLISHED, EVENT_CLOSED = 1, 2, 3
EVENT_SUB_ESTABLISHED, EVENT_SUB_CLOSED = 10, 11
EVENT_NAMES = {EVENT_ESTABLISHED: "established", EVENT_CLOSED: "closed",
               EVENT_SUB_ESTABLISHED: "sub_established", EVENT_SUB_CLOSED: "sub_closed"}
CMD_SUBFLOW_CREATE = 10
ADDR_FLAG_BACKUP = 1 << 2
IFF_RUNNING = 0x40  # <net/if.h>


@dataclass(frozen=True)
class PathAddr:
    index: int
    addr: str
    ifname: str
    backup: bool = False

    @property
    def local_id(self) -> int:
        """The address id a subflow from this path announces (0 is the first subflow's)."""
        return self.index + 1


@dataclass(frozen=True)
class Create:
    """Open a subflow of connection `token` from `path` to the server's `remote`."""
    token: int
    path: PathAddr
    remote: tuple[str, int]


@dataclass
class _Conn:
    remote: tuple[str, int]
    up: set[int] = field(default_factory=set)  # paths with an established subflow
    trying: dict[int, float] = field(default_factory=dict)  # path -> when its try began


class Decisions:
    """What to create, from the events seen so far; every method takes the time `now`."""

    def __init__(self, paths: Sequence[PathAddr], retry_s: float = RETRY_S):
        self.paths = {p.index: p for p in paths}
        self.by_addr = {p.addr: p for p in paths}
        self.by_ifname = {p.ifname: p for p in paths}
        self.retry_s = retry_s
        self.conns: dict[int, _Conn] = {}
        self.last_try: dict[tuple[int, int], float] = {}

    def event(self, kind: int, attrs: dict[str, Any], now: float) -> list[Create]:
        token = attrs.get("token")
        if token is None:
            return []
        if kind == EVENT_ESTABLISHED and not attrs.get("server_side"):
            first = self.by_addr.get(attrs.get("saddr4", ""))
            new = self.conns[token] = _Conn((attrs["daddr4"], attrs["dport"]))
            if first is not None:
                new.up.add(first.index)
            return self._missing(token, now, force=True)
        conn = self.conns.get(token)
        if conn is None:
            return []
        path = self.by_addr.get(attrs.get("saddr4", ""))
        if kind == EVENT_CLOSED:
            del self.conns[token]
        elif kind == EVENT_SUB_ESTABLISHED and path is not None:
            conn.up.add(path.index)
            conn.trying.pop(path.index, None)
        elif kind == EVENT_SUB_CLOSED and path is not None:
            conn.up.discard(path.index)
            conn.trying.pop(path.index, None)
            return self._missing(token, now)
        return []

    def link_up(self, ifname: str, now: float) -> list[Create]:
        """A path's interface came up: try it now on every connection that lacks it."""
        path = self.by_ifname.get(ifname)
        if path is None:
            return []
        out = []
        for token, conn in self.conns.items():
            if path.index not in conn.up and path.index not in conn.trying:
                out += self._try(token, conn, path, now)
        return out

    def due(self, now: float) -> list[Create]:
        """The retries whose time has come."""
        out = []
        for token in list(self.conns):
            out += self._missing(token, now)
        return out

    def next_due(self, now: float) -> float | None:
        """Seconds until the next retry (None: nothing waits)."""
        waits = [self.last_try.get((token, index), -1e9) + self.retry_s - now
                 for token, conn in self.conns.items() for index in self.paths
                 if index not in conn.up and index not in conn.trying]
        return max(0.0, min(waits)) if waits else None

    def _missing(self, token: int, now: float, force: bool = False) -> list[Create]:
        conn = self.conns[token]
        out = []
        for index, path in self.paths.items():
            if index in conn.up or index in conn.trying:
                continue
            if not force and now - self.last_try.get((token, index), -1e9) < self.retry_s:
                continue
            out += self._try(token, conn, path, now)
        return out

    def _try(self, token: int, conn: _Conn, path: PathAddr, now: float) -> list[Create]:
        conn.trying[path.index] = now
        self.last_try[(token, path.index)] = now
        return [Create(token, path, conn.remote)]

    def failed(self, action: Create) -> None:
        """The kernel refused to start the try (no SUB_CLOSED will come): the retry timer
        decides when to try again."""
        conn = self.conns.get(action.token)
        if conn is not None:
            conn.trying.pop(action.path.index, None)


# ---- the kernel side ---------------------------------------------------------------------


def _messages() -> tuple[Any, Any]:
    """pyroute2 message classes for the commands and events this manager uses."""
    from pyroute2.netlink import genlmsg, nla

    class pm_addr(nla):
        prefix = "MPTCP_PM_ADDR_ATTR_"
        nla_map = (("MPTCP_PM_ADDR_ATTR_UNSPEC", "none"),
                   ("MPTCP_PM_ADDR_ATTR_FAMILY", "uint16"),
                   ("MPTCP_PM_ADDR_ATTR_ID", "uint8"),
                   ("MPTCP_PM_ADDR_ATTR_ADDR4", "ip4addr"),
                   ("MPTCP_PM_ADDR_ATTR_ADDR6", "ip6addr"),
                   # host order here, network order in the events (the kernel's nla_get_u16
                   # and nla_put_be16)
                   ("MPTCP_PM_ADDR_ATTR_PORT", "uint16"),
                   ("MPTCP_PM_ADDR_ATTR_FLAGS", "uint32"),
                   ("MPTCP_PM_ADDR_ATTR_IF_IDX", "int32"))

    _addr = pm_addr

    class command(genlmsg):
        prefix = "MPTCP_PM_ATTR_"
        nla_map = (("MPTCP_PM_ATTR_UNSPEC", "none"),
                   ("MPTCP_PM_ATTR_ADDR", "pm_addr"),
                   ("MPTCP_PM_ATTR_RCV_ADD_ADDRS", "uint32"),
                   ("MPTCP_PM_ATTR_SUBFLOWS", "uint32"),
                   ("MPTCP_PM_ATTR_TOKEN", "uint32"),
                   ("MPTCP_PM_ATTR_LOC_ID", "uint8"),
                   ("MPTCP_PM_ATTR_ADDR_REMOTE", "pm_addr"))
        pm_addr = _addr

    class event(genlmsg):
        prefix = "MPTCP_ATTR_"
        nla_map = (("MPTCP_ATTR_UNSPEC", "none"),
                   ("MPTCP_ATTR_TOKEN", "uint32"),
                   ("MPTCP_ATTR_FAMILY", "uint16"),
                   ("MPTCP_ATTR_LOC_ID", "uint8"),
                   ("MPTCP_ATTR_REM_ID", "uint8"),
                   ("MPTCP_ATTR_SADDR4", "ip4addr"),
                   ("MPTCP_ATTR_SADDR6", "ip6addr"),
                   ("MPTCP_ATTR_DADDR4", "ip4addr"),
                   ("MPTCP_ATTR_DADDR6", "ip6addr"),
                   ("MPTCP_ATTR_SPORT", "be16"),
                   ("MPTCP_ATTR_DPORT", "be16"),
                   ("MPTCP_ATTR_BACKUP", "uint8"),
                   ("MPTCP_ATTR_ERROR", "uint8"),
                   ("MPTCP_ATTR_FLAGS", "uint16"),
                   ("MPTCP_ATTR_TIMEOUT", "uint32"),
                   ("MPTCP_ATTR_IF_IDX", "int32"),
                   ("MPTCP_ATTR_RESET_REASON", "uint32"),
                   ("MPTCP_ATTR_RESET_FLAGS", "uint32"),
                   ("MPTCP_ATTR_SERVER_SIDE", "uint8"))

    return command, event


def _attrs(msg: Any) -> dict[str, Any]:
    return {name.removeprefix("MPTCP_ATTR_").lower(): value
            for name, value in msg.get("attrs", [])}


def _say(what: dict[str, Any]) -> None:
    print(json.dumps({"t": round(time.monotonic(), 3), **what}), flush=True)


def run(paths: Sequence[PathAddr], retry_s: float = RETRY_S) -> None:
    from pyroute2 import IPRoute
    from pyroute2.netlink.generic import GenericNetlinkSocket
    from pyroute2.netlink.rtnl import RTMGRP_LINK

    command, event = _messages()
    events = GenericNetlinkSocket()
    events.bind("mptcp_pm", event)
    events.add_membership("mptcp_pm_events")
    commands = GenericNetlinkSocket()
    commands.bind("mptcp_pm", command)
    links = IPRoute()
    links.bind(groups=RTMGRP_LINK)
    decisions = Decisions(paths, retry_s)
    _say({"ready": True})
    try:
        while True:
            wait = decisions.next_due(time.monotonic())
            ready, _, _ = select.select([events, links], [], [], wait)
            now = time.monotonic()
            todo: list[Create] = []
            if events in ready:
                todo += _on_kernel_events(events.get(), decisions, now)
            if links in ready:
                todo += _on_links(links.get(), decisions, now)
            todo += decisions.due(now)
            for action in todo:
                _create(commands, command, action, decisions)
    finally:
        for sock in (events, commands, links):
            sock.close()


def _on_kernel_events(msgs: Iterable[Any], decisions: Decisions, now: float) -> list[Create]:
    """The path manager's events (each told on stdout) and what they call for."""
    todo: list[Create] = []
    for msg in msgs:
        attrs = _attrs(msg)
        if msg["cmd"] in EVENT_NAMES:
            _say({"event": EVENT_NAMES[msg["cmd"]], "token": attrs.get("token"),
                  "saddr": attrs.get("saddr4"), "sport": attrs.get("sport")})
        todo += decisions.event(msg["cmd"], attrs, now)
    return todo


def _on_links(msgs: Iterable[Any], decisions: Decisions, now: float) -> list[Create]:
    """Interfaces that came up (running again) and the subflows they call for."""
    todo: list[Create] = []
    for msg in msgs:
        if msg.get("event") == "RTM_NEWLINK" and msg["flags"] & IFF_RUNNING:
            todo += decisions.link_up(msg.get_attr("IFLA_IFNAME"), now)
    return todo


def _create(commands: Any, command: Any, action: Create, decisions: Decisions) -> None:
    """Ask the kernel for the subflow; a refusal goes back to `decisions` (its retry timer)."""
    from pyroute2.netlink import NLM_F_ACK, NLM_F_REQUEST
    from pyroute2.netlink.exceptions import NetlinkError

    flags = ADDR_FLAG_BACKUP if action.path.backup else 0
    msg = command()
    msg["cmd"] = CMD_SUBFLOW_CREATE
    msg["version"] = 1
    msg["attrs"] = [
        ("MPTCP_PM_ATTR_TOKEN", action.token),
        ("MPTCP_PM_ATTR_ADDR", {"attrs": [
            ("MPTCP_PM_ADDR_ATTR_FAMILY", socket.AF_INET),
            ("MPTCP_PM_ADDR_ATTR_ID", action.path.local_id),
            ("MPTCP_PM_ADDR_ATTR_ADDR4", action.path.addr),
            ("MPTCP_PM_ADDR_ATTR_FLAGS", flags)]}),
        ("MPTCP_PM_ATTR_ADDR_REMOTE", {"attrs": [
            ("MPTCP_PM_ADDR_ATTR_FAMILY", socket.AF_INET),
            ("MPTCP_PM_ADDR_ATTR_ADDR4", action.remote[0]),
            ("MPTCP_PM_ADDR_ATTR_PORT", action.remote[1])]}),
    ]
    try:
        commands.nlm_request(msg, msg_type=commands.prid, msg_flags=NLM_F_REQUEST | NLM_F_ACK)
        _say({"create": action.path.index, "token": action.token})
    except NetlinkError as exc:
        decisions.failed(action)
        _say({"create": action.path.index, "token": action.token, "error": exc.code})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", action="append", default=[], metavar="INDEX,ADDR,IFNAME[,backup]",
                        help="one of the client's paths (repeat)")
    parser.add_argument("--retry", type=float, default=RETRY_S)
    args = parser.parse_args(argv)
    paths = []
    for text in args.path:
        index, addr, ifname, *flags = text.split(",")
        paths.append(PathAddr(int(index), addr, ifname, "backup" in flags))
    try:
        run(paths, args.retry)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
