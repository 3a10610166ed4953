"""The queue disciplines a profile's `aqm` may name, and their parameters.

The link emulator owns them: each discipline's C file (netem/linkem/codel.c, pie.c) gives its
parameters, their defaults and ranges, its line in netem/linkem/aqm.c registers it, and
`mpstream-linkem --list-aqms` prints them all. This table is what a profile may set: each
parameter is a link field named after its discipline (`codel_target_ms`), a number of ms that
goes to the emulator only when a profile sets it, so the emulator's defaults are the ones that
run. The defaults here only describe a link; `tests/unit/test_netem_linkem_model.py` holds the
table equal to the emulator's list.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import InitErrorDetails, PydanticCustomError

from mpstream.registry import Registry

MAX_MS = 60000.0  # the emulator's upper bound of every parameter


@dataclass(frozen=True)
class Aqm:
    name: str  # what a profile's `aqm` says
    label: str | None  # what a link's description calls it (None: nothing, drop-tail)
    params: Mapping[str, float] = field(default_factory=dict)  # each one's default, ms

    def describe(self, given: Mapping[str, float]) -> str | None:
        """Its label and its parameters' values, given or default: "CoDel 5/100 ms"."""
        if self.label is None or not self.params:
            return self.label
        values = "/".join(f"{given.get(key, default):g}" for key, default in self.params.items())
        return f"{self.label} {values} ms"


# One entry a discipline the emulator registers, with its parameters as the emulator has them.
AQMS: Registry[Aqm] = Registry.of_module("queue discipline", lambda aqm: aqm.name)
AQMS.register(Aqm("none", None))  # drop-tail only
AQMS.register(Aqm("codel", "CoDel",  # RFC 8289
                  {"codel_target_ms": 5.0, "codel_interval_ms": 100.0}))
AQMS.register(Aqm("pie", "PIE", {"pie_target_ms": 15.0, "pie_tupdate_ms": 15.0}))  # RFC 8033
# Every parameter's field, with the discipline it belongs to, in the table's order.
PARAMS: dict[str, str] = {key: aqm.name for aqm in AQMS.values() for key in aqm.params}


def _named_by(key: str) -> str | None:
    """The discipline whose name and "_" begin `key`."""
    return next((name for name in AQMS.names() if key.startswith(f"{name}_")), None)


def _error(key: str, value: Any, message: str) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError("aqm_param", "{message}",
                                                     {"message": message}),
                            loc=(key,), input=value)


def _param_error(key: str, value: Any) -> InitErrorDetails | None:
    """What is wrong with `value` for parameter `key`, if anything."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _error(key, value, f"must be a number of ms (got {value!r})")
    if not 0 < value <= MAX_MS:
        name = PARAMS[key]
        return _error(key, value, f"must be above 0 and at most {MAX_MS:g} ms (got {value:g}); "
                                  f"{name}'s default is {AQMS.get(name).params[key]:g}")
    return None


def check_keys(data: Mapping[str, Any], fields: Collection[str]) -> list[InitErrorDetails]:
    """An error for each key of link data that is neither one of `fields` nor a discipline's
    parameter with a good value: a key that begins with a discipline's name is told that
    discipline's parameters, any other is an unknown key."""
    errors = []
    for key, value in data.items():
        if key in fields:
            continue
        if key in PARAMS:
            error = _param_error(key, value)
            if error is not None:
                errors.append(error)
            continue
        name = _named_by(key)
        if name is None:
            errors.append(InitErrorDetails(type="extra_forbidden", loc=(key,), input=value))
        elif AQMS.get(name).params:
            errors.append(_error(key, value, f"not a parameter of {name} (its parameters: "
                                             f"{', '.join(AQMS.get(name).params)})"))
        else:
            errors.append(_error(key, value, f"not a parameter: {name} takes none"))
    return errors


def given(data: Mapping[str, Any]) -> dict[str, float]:
    """The discipline parameters among link fields, in the table's order."""
    return {key: float(data[key]) for key in PARAMS if key in data}
