"""The hooks through which the parts add to the core's own commands: their `doctor` checks and
their `clean` steps.

The core sits below the parts and imports none of them. The composition root (mpstream/cli.py,
`PART_HOOKS`) names each part's hook functions as "module:attribute" and installs them here
when the command line starts; `doctor` and `clean` load and call them in that order.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

DOCTOR = "doctor"  # () -> list[mpstream.doctor.Finding]
CLEAN = "clean"  # () -> mpstream.clean.Cleaned

_installed: dict[str, tuple[str, ...]] = {}


def install(hooks: Mapping[str, Sequence[str]]) -> None:
    """The parts' hook functions by hook name ("module:attribute" each), replacing earlier ones."""
    _installed.update({name: tuple(targets) for name, targets in hooks.items()})


def functions(name: str) -> list[Callable[[], Any]]:
    """The installed functions of hook `name`, loaded now (a part is imported only when its
    hook runs)."""
    found = []
    for target in _installed.get(name, ()):
        module, _, attribute = target.partition(":")
        found.append(getattr(importlib.import_module(module), attribute))
    return found
