"""Search spaces of `mpstream tune`: which deployment settings (and, where a space names them,
the transport and its scheduler) a search may change, and to what.

A space is a TOML file (shipped ones in runner/tune/spaces/, `mpstream list spaces`):

    description = "..."
    [settings]
    "server.cc" = ["cubic", "bbr"]                           # a choice among values
    "server.sysctls.net.ipv4.tcp_rto_max_ms" = { low = 200, high = 120000, log = true }
    "client.backup" = [[], [1]]                              # lists are values too
    scheduler = ["default"]                                  # the condition's, not the ends'

A setting is named as `mpstream deployments NAME` shows it (end, then setting), a kernel
setting as END.sysctls.NAME. Everything is checked before any trial: an unknown setting, a
kernel setting this machine lacks, or a value the deployment refuses is an error naming what is
allowed.
"""

from __future__ import annotations

import copy
import json
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpstream.deployment import SYSCTL_PATTERN, Deployment, deployment_from_dict
from mpstream.errors import UserError

SPACES_DIR = Path(__file__).parent / "spaces"
PROC_SYS = Path("/proc/sys")
# Settings of the condition rather than of the deployment.
CONDITION_SETTINGS = ("transport", "scheduler")


@dataclass(frozen=True)
class Choice:
    """One setting's values: a list of `values`, or a numeric range [low, high]."""
    name: str
    values: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    integer: bool = True

    @property
    def is_range(self) -> bool:
        return self.low is not None

    def encoded(self) -> list[str]:
        """The values as the sampler takes them (it takes scalars only; a list is a value)."""
        return [json.dumps(v) for v in self.values]


@dataclass(frozen=True)
class Space:
    name: str
    description: str
    choices: tuple[Choice, ...]

    def names(self) -> list[str]:
        return [c.name for c in self.choices]


def space_names() -> list[str]:
    return sorted(p.stem for p in SPACES_DIR.glob("*.toml"))


def load_space(ref: str | Path, base: Deployment | None = None,
               proc_sys: Path = PROC_SYS) -> Space:
    """A shipped space's name or a TOML file, checked against `base` (the deployment the
    search starts from)."""
    path = Path(ref)
    if not path.is_file():
        shipped = SPACES_DIR / f"{ref}.toml"
        if path.suffix or not shipped.is_file():
            raise UserError(f"--space {ref!r} is neither a shipped space nor a file; spaces: "
                            + ", ".join(space_names()) + " (`mpstream list spaces`)")
        path = shipped
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"space {path} is not valid TOML: {exc}") from None
    return parse_space(data, name=path.stem, base=base or Deployment(), proc_sys=proc_sys)


def parse_space(data: dict[str, Any], *, name: str, base: Deployment,
                proc_sys: Path = PROC_SYS) -> Space:
    unknown = sorted(set(data) - {"description", "settings"})
    if unknown:
        raise UserError(f"space {name}: unknown key(s) {', '.join(unknown)}: a space has "
                        "`description` and a [settings] table")
    settings = data.get("settings")
    if not isinstance(settings, dict) or not settings:
        raise UserError(f"space {name}: give a [settings] table naming at least one setting, "
                        'e.g. "server.cc" = ["cubic", "bbr"]')
    choices = tuple(_choice(name, key, value, base, proc_sys) for key, value in settings.items())
    return Space(name, str(data.get("description", "")), choices)


def _choice(space: str, key: str, value: Any, base: Deployment, proc_sys: Path) -> Choice:
    where = f"space {space}: {key}"
    if isinstance(value, list):
        if not value:
            raise UserError(f"{where}: give at least one value")
        choice = Choice(key, tuple(value))
    elif isinstance(value, dict):
        choice = _range(where, key, value)
    else:
        raise UserError(f"{where}: give a list of values or a range {{ low = .., high = .. }}")
    if key in CONDITION_SETTINGS:
        if choice.is_range or not all(isinstance(v, str) for v in choice.values):
            raise UserError(f"{where}: give a list of names")
        return choice
    _check_name(where, key, base, proc_sys)
    for probe in _probes(choice):
        try:
            apply_settings(base, {key: probe})
        except UserError as exc:
            raise UserError(f"{where}: the value {probe!r} is refused: "
                            f"{str(exc).split(': ', 1)[-1]}") from None
    return choice


def _range(where: str, key: str, value: dict[str, Any]) -> Choice:
    extra = sorted(set(value) - {"low", "high", "log", "step"})
    if extra or "low" not in value or "high" not in value:
        raise UserError(f"{where}: a range is {{ low = .., high = .., log = true|false, "
                        f"step = .. }}" + (f" (unknown: {', '.join(extra)})" if extra else ""))
    low, high = value["low"], value["high"]
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (low, high)):
        raise UserError(f"{where}: low and high must be numbers")
    if low >= high:
        raise UserError(f"{where}: low ({low}) must be below high ({high})")
    log = bool(value.get("log", False))
    if log and low <= 0:
        raise UserError(f"{where}: a log range needs low above 0")
    integer = isinstance(low, int) and isinstance(high, int)
    return Choice(key, low=low, high=high, log=log, step=value.get("step"), integer=integer)


def _probes(choice: Choice) -> list[Any]:
    if choice.is_range:
        assert choice.low is not None and choice.high is not None
        cast = int if choice.integer else float
        return [cast(choice.low), cast(choice.high)]
    return list(choice.values)


def _check_name(where: str, key: str, base: Deployment, proc_sys: Path) -> None:
    end, _, rest = key.partition(".")
    if end in ("server", "client") and rest.startswith("sysctls."):
        sysctl = rest.removeprefix("sysctls.")
        if not re.fullmatch(SYSCTL_PATTERN, sysctl):
            raise UserError(f"{where}: {sysctl!r} is not a per-namespace TCP setting: give "
                            "net.ipv4.tcp_* or net.mptcp.* names")
        if not (proc_sys / sysctl.replace(".", "/")).exists():
            raise UserError(f"{where}: this kernel has no {sysctl} "
                            f"({proc_sys / sysctl.replace('.', '/')} is missing)")
        return
    known = [k for k in base.settings() if not k.endswith(".sysctls")]
    if key not in known:
        raise UserError(f"{where}: no such setting; a space may change "
                        + ", ".join([*known, "server.sysctls.NAME", "client.sysctls.NAME",
                                     *CONDITION_SETTINGS]))


def apply_settings(base: Deployment, values: dict[str, Any], name: str | None = None,
                   description: str | None = None) -> Deployment:
    """`base` with deployment settings changed (`server.cc`, `client.sysctls.NAME`, ...);
    condition settings (transport, scheduler) are left to the caller."""
    data = copy.deepcopy(base.model_dump(mode="json"))
    for key, value in values.items():
        if key in CONDITION_SETTINGS:
            continue
        end, _, rest = key.partition(".")
        if rest.startswith("sysctls."):
            data[end]["sysctls"][rest.removeprefix("sysctls.")] = value
            continue
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = value
    if name is not None:
        data["name"] = name
    if description is not None:
        data["description"] = description
    return deployment_from_dict(data, name=data.get("name") or base.name)


def sample(choice: Choice, trial: Any) -> Any:
    """One value of `choice` from an Optuna trial."""
    if choice.is_range:
        assert choice.low is not None and choice.high is not None
        if choice.integer:
            return trial.suggest_int(choice.name, int(choice.low), int(choice.high),
                                     log=choice.log, step=int(choice.step or 1))
        return trial.suggest_float(choice.name, float(choice.low), float(choice.high),
                                   log=choice.log, step=choice.step)
    return json.loads(trial.suggest_categorical(choice.name, choice.encoded()))


def decode(choice: Choice, value: Any) -> Any:
    """A value as the sampler stored it, back as the setting's value."""
    if choice.is_range:
        return int(value) if choice.integer and not math.isnan(value) else value
    return json.loads(value)
