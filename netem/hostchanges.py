"""The changes mpstream makes to a real host's network configuration, each a small object that
knows how to make itself (`apply`) and take itself back (`undo`), registered by the `kind` its
record carries.

A change is recorded (`record`, a JSON object: its kind and what undoing it needs) before it is
applied, so that `mpstream clean` can undo it from the record alone after a SIGKILL
(hostnet.py's StateFile). Records of earlier versions have the same shape and still undo. Undoing
a change that is already gone is fine. A new kind of change is one class here, registered with
`@change`.
"""

from __future__ import annotations

import json
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar, dataclass_transform

from mpstream.errors import UserError
from mpstream.registry import Registry


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise UserError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done


def ip_json(*args: str) -> list[dict[str, Any]]:
    return json.loads(ip("-j", *args).stdout or "[]")


def family_flag(family: int) -> str:
    return "-6" if family == 6 else "-4"


# A field that says how a change is made, which undoing it does not need: left out of its record.
HOW = {"recorded": False}


class HostChange(ABC):
    """One change to the host (a dataclass); `record` is what the state file keeps of it: its
    kind and its fields but those marked HOW."""

    kind: ClassVar[str]

    @abstractmethod
    def apply(self) -> None: ...

    @abstractmethod
    def undo(self) -> None: ...

    @classmethod
    def _recorded(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.metadata.get("recorded", True)]  # type: ignore[arg-type]

    def record(self) -> dict[str, Any]:
        return {"kind": self.kind, **{name: getattr(self, name) for name in self._recorded()}}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> HostChange:
        return cls(**{name: record[name] for name in cls._recorded()})


CHANGES: Registry[type[HostChange]] = Registry.of_module("host change", lambda cls: cls.kind)
C = TypeVar("C", bound=type[HostChange])


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def change(kind: str) -> Callable[[C], C]:
    """A kind of change: made a frozen dataclass, registered under the name its records carry."""

    def register(cls: C) -> C:
        dataclass(frozen=True)(cls)  # in place: without slots, dataclass keeps the class
        cls.kind = kind
        CHANGES.register(cls)
        return cls

    return register


def from_record(record: dict[str, Any]) -> HostChange:
    """The change a state file recorded."""
    kind = record["kind"]
    if kind not in CHANGES:  # a state file from a newer version
        raise UserError(f"unknown change {kind!r} in a state file; undo it by hand")
    return CHANGES.get(kind).from_record(record)


@change("table")
class RouteTable(HostChange):
    """A routing table of ours, filled with one interface's routes (`ip route add` arguments);
    undone by flushing it."""

    family: int
    table: int
    routes: tuple[tuple[str, ...], ...] = field(default=(), compare=False, metadata=HOW)

    def apply(self) -> None:
        for route in self.routes:
            ip(family_flag(self.family), "route", "add", *route, "table", str(self.table))

    def undo(self) -> None:
        ip(family_flag(self.family), "route", "flush", "table", str(self.table), check=False)


@change("rule")
class Rule(HostChange):
    """A policy routing rule: traffic `from` an address (or `to` one) looks up `table`."""

    family: int
    priority: int
    selector: str  # "from" or "to"
    address: str
    table: int

    def _argv(self) -> list[str]:
        return ["priority", str(self.priority), self.selector, self.address,
                "lookup", str(self.table)]

    def apply(self) -> None:
        ip(family_flag(self.family), "rule", "add", *self._argv())

    def undo(self) -> None:
        ip(family_flag(self.family), "rule", "del", *self._argv(), check=False)

    def record(self) -> dict[str, Any]:
        return {"kind": self.kind, "family": self.family, "priority": self.priority,
                self.selector: self.address, "table": self.table}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Rule:
        selector = "from" if record.get("from") else "to"
        return cls(record["family"], record["priority"], selector, record[selector],
                   record["table"])


@change("endpoint")
class Endpoint(HostChange):
    """An MPTCP endpoint of ours (`flags`: `dev IF subflow [backup]`, or `signal`); undone only
    while the endpoint with its id still has its address (the id may have been reused)."""

    id: int
    address: str
    flags: tuple[str, ...] = field(default=(), compare=False, metadata=HOW)

    def apply(self) -> None:
        ip("mptcp", "endpoint", "add", self.address, "id", str(self.id), *self.flags)

    def undo(self) -> None:
        current = {e["id"]: e for e in ip_json("mptcp", "endpoint", "show")}
        if current.get(self.id, {}).get("address") == self.address:
            ip("mptcp", "endpoint", "delete", "id", str(self.id), check=False)


@change("limits")
class Limits(HostChange):
    """`ip mptcp limits` raised: the record keeps the values before, which undoing sets back."""

    subflows: int
    add_addr_accepted: int
    # (subflows, add_addr_accepted) raised to
    raised: tuple[int, int] | None = field(default=None, compare=False, metadata=HOW)

    @staticmethod
    def _set(subflows: int, add_addr_accepted: int, check: bool) -> None:
        ip("mptcp", "limits", "set", "subflows", str(subflows),
           "add_addr_accepted", str(add_addr_accepted), check=check)

    def apply(self) -> None:
        assert self.raised is not None, "a recorded change is only undone"
        self._set(*self.raised, check=True)

    def undo(self) -> None:
        self._set(self.subflows, self.add_addr_accepted, check=False)

