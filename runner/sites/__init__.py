"""The networks a trial runs on, one module each in this folder: a `Site` (runner/sites/base.py)
per condition kind ("emulated", "real", …) that makes the condition's network for one trial and
says what it needs, what it checks and whether its trials can move to a cluster's host.

This module is the registry (mpstream/registry.py): a condition's `kind` is a name registered
here. A new network is one module in this folder: a `Site` subclass and `register(TheSite)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator

from mpstream.registry import Registry

if TYPE_CHECKING:
    from mpstream.runner.sites.base import Site

SITES: Registry[type[Site]] = Registry(__name__, __path__, "network kind", lambda s: s.kind)
register = SITES.register
site_kinds = SITES.names
site_class = SITES.get
# A registered network kind, checked when a condition is read.
SiteKind = Annotated[str, AfterValidator(SITES.check)]
