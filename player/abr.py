"""The adaptation (ABR) rules each player supports, read from the page's own catalog
(player/src/abr/catalog.json, through mpstream.qoe.abrcatalog), so that `play --abr`, scenarios,
the page and the collector accept the same names. docs/abr.md says what each rule does.

A rule of ours is its entry in the catalog and its module, player/src/abr/rules/NAME.js (the
page's build writes the list it imports from the catalog: player/abr-rules.mjs); a name without
its module, or a module without its name, is refused here as the catalog is read."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mpstream.errors import UserError
from mpstream.qoe.abrcatalog import CATALOG_FILE, CatalogError, abr_catalog

RULES_DIR = CATALOG_FILE.parent / "rules"
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
    """Each player's rules by name: its own, then ours."""
    try:
        found = abr_catalog()
    except CatalogError as exc:
        raise UserError(str(exc)) from exc
    check_rule_modules(tuple(found.ours), RULES_DIR)
    return {player: {**{name: AbrRule(name, player, "player", r.about, r.params)
                        for name, r in entry.rules.items()},
                     **{name: AbrRule(name, player, "mpstream", r.about, r.params)
                        for name, r in found.ours.items()}}
            for player, entry in found.players.items()}


def check_rule_modules(ours: tuple[str, ...], rules_dir: Path) -> None:
    """A UserError unless each rule of ours has its module in `rules_dir` and each module there
    is a rule of ours (the page's build refuses the same: player/abr-rules.mjs)."""
    modules = {p.stem for p in rules_dir.glob("*.js")}
    missing = [name for name in ours if name not in modules]
    if missing:
        raise UserError(f"{CATALOG_FILE.name} names {', '.join(missing)} among our rules, but "
                        f"{rules_dir} has no {', '.join(f'{n}.js' for n in missing)}: write the "
                        "module (it exports decide(inputs, params)) or remove the entry")
    unnamed = sorted(modules - set(ours))
    if unnamed:
        raise UserError(f"{rules_dir}/{', '.join(f'{n}.js' for n in unnamed)}: a rule module "
                        f"that {CATALOG_FILE.name} does not name: add its entry under \"ours\" "
                        "(about, params) or move the file out of rules/")


def default_abr(player: str) -> str:
    return abr_catalog().players[player].default


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
