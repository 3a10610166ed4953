"""The adaptation (ABR) rules each player supports, read from the page's own catalog
(player/src/abr/catalog.json), so that `play --abr`, scenarios and the page accept the same
names. docs/abr.md says what each rule does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mpstream.errors import UserError

CATALOG_FILE = Path(__file__).resolve().parent / "src" / "abr" / "catalog.json"
# In a scenario's `abrs`: each player's own default rule.
DEFAULT = "default"


@dataclass(frozen=True)
class AbrRule:
    name: str
    player: str
    kind: str  # "player": the player's own rule; "mpstream": ours, through its extension point
    about: str
    params: tuple[str, ...]


@cache
def catalog() -> dict[str, dict[str, AbrRule]]:
    raw = json.loads(CATALOG_FILE.read_text())
    return {player: {name: AbrRule(name, player, r["kind"], r["about"], tuple(r.get("params", ())))
                     for name, r in entry["rules"].items()}
            for player, entry in raw.items()}


@cache
def default_abr(player: str) -> str:
    return str(json.loads(CATALOG_FILE.read_text())[player]["default"])


def abr_names(player: str) -> list[str]:
    return list(catalog()[player])


def resolve_abr(player: str, name: str | None) -> str:
    """The rule `name` (None or "default": the player's default) of `player`, or a UserError
    that names the rules the player supports."""
    if name is None or name == DEFAULT:
        return default_abr(player)
    if name not in catalog()[player]:
        raise UserError(f"abr {name!r}: {player} supports {', '.join(abr_names(player))} "
                        f"(docs/abr.md; `mpstream list abr`)")
    return name


def parse_abr_params(player: str, abr: str, pairs: tuple[str, ...] | list[str]) -> dict[str, float]:
    """KEY=VALUE pairs of the rule's numeric parameters (the catalog's list), checked here so a
    bad one is refused before anything is set up."""
    allowed = catalog()[player][abr].params
    out: dict[str, float] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in allowed:
            raise UserError(f"abr parameter {pair!r}: give KEY=VALUE with KEY one of {abr}'s "
                            f"parameters ({', '.join(allowed) or 'none'})")
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not number >= 0:
            raise UserError(f"abr parameter {pair!r}: the value must be a number >= 0")
        out[key] = number
    return out
