"""What proves on the wire that a trial spoke its transport."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Proof:
    """What a transport counted on the wire during a trial (e.g. MP_CAPABLE and MP_JOIN), and
    why that does not prove the transport was spoken (None when it does)."""

    counters: dict[str, int] = field(default_factory=dict)
    problem: str | None = None
