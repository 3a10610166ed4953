"""The adaptation (ABR) rules' catalog, player/src/abr/catalog.json: each player's own rules with
its default, and ours, which every player offers after its own, each with its numeric
parameters. The page (bundled with it), the command line and scenarios (mpstream.player.abr)
and the events' model (the rule an `abr_decision` names: events.py) all read this one file;
docs/abr.md says what each rule does. It is checked as it is read: a malformed entry, a default
that is not one of the player's own rules or a name of ours that a player also uses is refused
with the file and the entry named."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from mpstream.paths import REPO_ROOT

CATALOG_FILE = REPO_ROOT / "player" / "src" / "abr" / "catalog.json"

# A rule's name is also its module's file name (ours: player/src/abr/rules/NAME.js) and fits
# the events' `abr` name; a parameter's is a JavaScript property of the page's settings.
RuleName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")]
ParamName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9]{0,39}$")]


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RuleEntry(_Entry):
    about: str
    params: Annotated[tuple[ParamName, ...], Field(max_length=16)] = ()
    # What the rule reads beyond a decision's usual inputs: "paths", the transport's per-path
    # figures, which the page asks the collector for (docs/abr.md#multipath).
    inputs: tuple[Literal["paths"], ...] = ()


class PlayerEntry(_Entry):
    default: RuleName
    rules: dict[RuleName, RuleEntry]


class AbrCatalog(_Entry):
    players: dict[str, PlayerEntry]
    ours: dict[RuleName, RuleEntry]


class CatalogError(ValueError):
    """The catalog file cannot be used; the message names it and what is wrong."""


@cache
def abr_catalog(path: Path = CATALOG_FILE) -> AbrCatalog:
    """The catalog, read once and checked."""
    try:
        found = AbrCatalog.model_validate(json.loads(path.read_text()))
    except ValidationError as exc:
        wrong = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CatalogError(f"{path}: {wrong}") from exc
    except (OSError, ValueError) as exc:
        raise CatalogError(f"{path}: {exc}") from exc
    for player, entry in found.players.items():
        if entry.default not in entry.rules:
            raise CatalogError(f"{path}: {player}'s default {entry.default!r} is not one of its "
                               f"own rules ({', '.join(entry.rules)})")
        both = sorted(set(entry.rules) & set(found.ours))
        if both:
            raise CatalogError(f"{path}: {', '.join(both)}: a name of ours and of {player}'s own "
                               "rules; a rule has one name")
    return found


def our_rules(path: Path = CATALOG_FILE) -> tuple[str, ...]:
    """The names of our rules, in the catalog's order."""
    return tuple(abr_catalog(path).ours)
