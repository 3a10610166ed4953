"""Path-emulation profiles: what the user asks the emulated network to be.

A profile is a TOML file (a preset in netem/profiles/ or any file). Each path has a link model
that applies to both directions unless `uplink` / `downlink` tables override single fields:

    mode = "mptcp"            # or "tcp": single-path TCP over `tcp_path`
    cc = "cubic"
    [[paths]]
    name = "wifi"
    rate = "25mbit"           # bit/s as a number, or a string with a unit, or "unlimited"
    delay_ms = 5.0            # one way
    queue_bytes = "375KB"
    [paths.downlink]
    trace = "TMobile-LTE-short.down"   # Mahimahi packet-delivery trace, replaces the rate
    [[events]]
    at_s = 20
    path = 0                  # index or name
    action = "down"           # down | up | change (change takes a `set` table)
    [[competitors]]           # another user of the network, in a namespace of its own
    name = "tcp-user"
    transport = "tcp"         # any registered transport (`mode` = "mptcp" | "tcp" still works)
    paths = [{ via = "wifi" }]   # shares the wifi path's link (its queue) with the client;
                                 # or link fields for a link of its own

Every validation error names the field (e.g. `paths.1.loss`) and the rule it broke.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mpstream.deployment import Deployment, load_deployment
from mpstream.errors import UserError
from mpstream.netem import coupled, disciplines, legacyfields, traces
from mpstream.netem.teardown import MAX_COMPETITORS

PRESETS_DIR = Path(__file__).parent / "profiles"

_RATE_UNITS = {
    "": 1, "bit": 1, "bps": 1,
    "k": 1e3, "kbit": 1e3, "kbps": 1e3,
    "m": 1e6, "mbit": 1e6, "mbps": 1e6,
    "g": 1e9, "gbit": 1e9, "gbps": 1e9,
}
_SIZE_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "k": 1000, "kb": 1000, "kib": 1024,
    "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
}
_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)(?:/s)?\s*$", re.I)


def _quantity(value: Any, units: Mapping[str, float], field: str, examples: str) -> float:
    """A number, or a number with one of `units` ("25mbit", "375KB"); never negative."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be a number or a string like {examples}")
    if isinstance(value, int | float):
        amount = float(value)
    else:
        match = _QUANTITY.match(str(value))
        scale = units.get(match.group(2).lower()) if match else None
        if match is None or scale is None:
            if str(value).strip().startswith("-"):
                raise ValueError(f"{field} must not be negative (got {value!r})")
            raise ValueError(f"{field} {value!r} is not understood: write e.g. {examples}")
        amount = float(match.group(1)) * scale
    if amount < 0:
        raise ValueError(f"{field} must not be negative (got {value!r})")
    return amount


def parse_rate(value: Any) -> int | None:
    """Bit/s from 25000000, 25e6, "25mbit", "25 Mbit/s", "1.5M"; "unlimited" gives None."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "unlimited"):
        return None
    bits = _quantity(value, _RATE_UNITS, "rate", "25000000, '25mbit', '500kbit', 'unlimited'")
    if bits == 0:
        raise ValueError("rate must be above 0 (use an event with action 'down' for a dead link)")
    return int(bits)


def parse_size(value: Any, field: str) -> int | None:
    """Bytes from 375000, "375KB", "1MB", "64KiB"."""
    if value is None:
        return None
    size = _quantity(value, _SIZE_UNITS, field, "375000, '375KB', '1MB'")
    if size == 0:
        raise ValueError(f"{field} must be above 0 (got {value!r}); leave it out for no limit")
    return int(size)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LinkFields(_Strict):
    """Link-model fields as written in a profile; every field optional (overrides merge).
    Beyond these, the queue disciplines' parameters (disciplines.py: `codel_target_ms`, ...)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    rate: int | None = None
    trace: str | None = None
    delay_ms: float | None = None
    jitter_ms: float | None = None
    loss: float | None = None
    queue_bytes: int | None = None
    queue_packets: int | None = None
    # Active queue management beside the drop-tail limit: a name from disciplines.AQMS.
    aqm: str | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _aqm_params(cls, data: Any, handler: Callable[[Any], Self]) -> Self:
        """Any key beyond the fields must be a discipline's parameter, a number of ms."""
        if isinstance(data, dict):
            errors = disciplines.check_keys(data, cls.model_fields)
            if errors:
                raise ValidationError.from_exception_data(cls.__name__, errors)
            data = {**data, **disciplines.given(data)}
        return handler(data)

    @field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, value: Any) -> int | None:
        return parse_rate(value)

    @field_validator("queue_bytes", mode="before")
    @classmethod
    def _queue_bytes(cls, value: Any) -> int | None:
        return parse_size(value, "queue_bytes")

    @field_validator("queue_packets")
    @classmethod
    def _queue_packets(cls, value: int | None) -> int | None:
        if value is not None and value <= 0:
            raise ValueError(
                f"queue_packets must be above 0 (got {value}); leave it out for no limit"
            )
        return value

    @field_validator("aqm")
    @classmethod
    def _known_aqm(cls, value: str | None) -> str | None:
        if value is not None and value not in disciplines.AQMS:
            raise ValueError(f"aqm must be one of {', '.join(map(repr, disciplines.AQMS.names()))} "
                             f"(got {value!r})")
        return value

    @field_validator("delay_ms", "jitter_ms")
    @classmethod
    def _not_negative(cls, value: float | None, info: Any) -> float | None:
        if value is not None and value < 0:
            raise ValueError(f"{info.field_name} must not be negative (got {value})")
        return value

    @field_validator("loss")
    @classmethod
    def _fraction(cls, value: float | None) -> float | None:
        if value is not None and not 0 <= value <= 1:
            raise ValueError(
                f"loss is a fraction from 0 to 1 (got {value}); write 0.1 for 10%"
            )
        return value

    @model_validator(mode="after")
    def _one_of_each(self) -> LinkFields:
        if self.queue_bytes is not None and self.queue_packets is not None:
            raise ValueError("set queue_bytes or queue_packets, not both")
        if self.rate is not None and self.trace is not None:
            raise ValueError("set rate or trace, not both (a trace is the link's capacity)")
        return self


class Link(BaseModel):
    """One direction of one link, fully resolved: what the emulator is told."""

    model_config = ConfigDict(frozen=True)

    rate_bps: int | None = None
    trace: Path | None = None
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    queue_bytes: int | None = None
    queue_packets: int | None = None
    aqm: str = "none"
    # The discipline parameters the profile sets (disciplines.py); the rest at the emulator's.
    aqm_params: dict[str, float] = {}

    def emulator_config(self) -> dict[str, Any]:
        return {
            "rate_bps": None if self.trace else self.rate_bps,
            "trace": str(self.trace) if self.trace else None,
            "delay_ms": self.delay_ms,
            "jitter_ms": self.jitter_ms,
            "loss": self.loss,
            "queue_bytes": self.queue_bytes,
            "queue_packets": self.queue_packets,
            "down": False,
            "aqm": self.aqm,
            **self.aqm_params,
        }

    @property
    def shaped(self) -> bool:
        return self.rate_bps is not None or self.trace is not None

    def mean_bps(self) -> float | None:
        """The link's rate: a trace's mean, else its fixed rate (None: not shaped)."""
        return traces.mean_bps(self.trace) if self.trace is not None else self.rate_bps

    def describe(self) -> str:
        parts = []
        if self.trace:
            parts.append(f"trace {self.trace.name}")
        elif self.rate_bps:
            parts.append(f"{self.rate_bps / 1e6:g} Mbit/s")
        else:
            parts.append("unlimited")
        parts.append(f"{self.delay_ms:g} ms")
        if self.jitter_ms:
            parts.append(f"±{self.jitter_ms:g} ms")
        if self.loss:
            parts.append(f"loss {self.loss:.1%}")
        if self.queue_bytes:
            parts.append(f"queue {self.queue_bytes / 1000:g} KB")
        elif self.queue_packets:
            parts.append(f"queue {self.queue_packets} pkt")
        discipline = disciplines.AQMS.get(self.aqm).describe(self.aqm_params)
        if discipline:
            parts.append(discipline)
        return ", ".join(parts)


class LinkSpec(LinkFields):
    """A link with both directions: shared fields plus per-direction overrides."""

    uplink: LinkFields | None = None  # client -> server
    downlink: LinkFields | None = None  # server -> client


class PathSpec(LinkSpec):
    name: str | None = None
    backup: bool = False  # MPTCP endpoint flagged backup (used only when the others fail)
    # A path whose bytes cost money (cellular): counted as metered bytes, held back by the
    # path policies `backup` and `deadline` (mpstream/transports/pathpolicy.py).
    metered: bool = False
    cost_per_gb: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _priced_if_metered(self) -> PathSpec:
        if self.cost_per_gb is not None and not self.metered:
            raise ValueError("cost_per_gb prices a metered path: give metered = true too")
        return self


class CompetitorPathSpec(LinkSpec):
    """A competing client's path: a link of its own (link fields), or `via` one of the first
    client's paths, whose link (rate, queue, emulator) the two then share."""

    via: int | str | None = None


class CompetitorSpec(_Strict):
    """Another user of the network (its own namespace, paths and transfer or player). The
    profile's server link, when it has one, is shared by every user."""

    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")
    # The name of the transport it speaks, any registered one: one whose network mode is
    # single-path runs over its first path only. The network knows no transport: the name is
    # looked up where a user is set up or a condition read (netem/competitors.py). `mode`
    # ("mptcp" or "tcp") is the older spelling of transport "mptcp" or "tcp", read into it.
    transport: str = "tcp"
    paths: list[CompetitorPathSpec] = Field(min_length=1, max_length=4)
    # What it does in a trial: "same" as the client (a player, or a transfer), or "bulk": cross
    # traffic, one download from the server from `start_s` to `stop_s` (default: the trial's end).
    traffic: Literal["same", "bulk"] = "same"
    start_s: float = Field(default=0.0, ge=0)
    stop_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _mode_is_a_transport(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "mode" not in data:
            return data
        data = dict(data)
        mode = data.pop("mode")
        if mode not in ("mptcp", "tcp"):
            raise ValueError(f"mode {mode!r}: give \"mptcp\" or \"tcp\", or name any "
                             "transport with `transport`")
        if data.get("transport", mode) != mode:
            raise ValueError(f"mode {mode!r} and transport {data['transport']!r} disagree: "
                             "give `transport` alone")
        data["transport"] = mode
        return data

    @model_validator(mode="after")
    def _schedule(self) -> CompetitorSpec:
        timed = {"start_s", "stop_s"} & self.model_fields_set
        if timed and self.traffic != "bulk":
            raise ValueError(f"{' and '.join(sorted(timed))} schedule cross traffic: give "
                             "traffic = \"bulk\" too (a competitor with traffic \"same\" runs "
                             "for the whole trial)")
        if self.stop_s is not None and self.stop_s <= self.start_s:
            raise ValueError(f"stop_s ({self.stop_s:g}) must be after start_s "
                             f"({self.start_s:g})")
        return self



class EventSpec(_Strict):
    at_s: float = Field(ge=0)
    path: int | str
    action: Literal["down", "up", "change"]
    dir: Literal["both", "uplink", "downlink"] = "both"
    set: LinkFields | None = None

    @model_validator(mode="after")
    def _set_only_for_change(self) -> EventSpec:
        if self.action == "change" and self.set is None:
            raise ValueError("action 'change' needs a `set` table of link fields to change")
        if self.action != "change" and self.set is not None:
            raise ValueError(f"action {self.action!r} takes no `set` table (use action 'change')")
        return self


class Profile(_Strict):
    """The network (paths, queues, AQM, events, competing users' links), with the deployment
    that runs over it (`deployment`, by default the kernel's own settings)."""

    name: str = "custom"
    description: str = ""
    mode: Literal["mptcp", "tcp"] = "mptcp"
    tcp_path: int = Field(default=0, ge=0)
    seed: int = 1
    paths: list[PathSpec] = Field(min_length=1, max_length=8)
    server_link: LinkSpec | None = None  # shared link between router and server (e.g. NP03)
    events: list[EventSpec] = []
    # Other users of the network (competing clients); their senders run the server's `cc`.
    competitors: list[CompetitorSpec] = Field(default=[], max_length=MAX_COMPETITORS)
    # What the two ends run (mpstream/deployment.py); a condition or --deployment names it.
    deployment: Deployment = Deployment()
    source: Path | None = None  # where the profile was read from (for trace lookup)
    # Every path metered is refused unless said on purpose: something must carry video for free.
    allow_all_metered: bool = False

    @model_validator(mode="before")
    @classmethod
    def _endpoint_fields(cls, data: Any) -> Any:
        """The endpoint fields of older profiles, moved into the deployment they belong to
        (on top of it, as a `set` would be); the loader warns (legacyfields.py)."""
        if not isinstance(data, dict) or not legacyfields.has_endpoint_fields(data):
            return data
        raw = data.get("deployment")
        dep = raw.model_dump(mode="json", exclude_unset=True) if isinstance(
            raw, Deployment) else dict(raw or {})
        return legacyfields.into_deployment(data, dep)

    @property
    def cc(self) -> str:
        """The congestion control of the server, which sends the video."""
        return self.deployment.server.cc

    @model_validator(mode="after")
    def _backup_paths(self) -> Profile:
        """The deployment's backup paths flagged on the paths themselves, where the topology
        and the transports read them."""
        for ref in self.deployment.client.backup:
            try:
                index = self.path_index(ref)
            except KeyError as exc:
                raise ValueError(f"deployment.client.backup: {exc.args[0]}") from None
            if not self.paths[index].backup:
                self.paths[index] = self.paths[index].model_copy(update={"backup": True})
        return self

    @model_validator(mode="after")
    def _references(self) -> Profile:
        if self.tcp_path >= len(self.paths):
            raise ValueError(
                f"tcp_path: no path {self.tcp_path} "
                f"(the profile has paths 0..{len(self.paths) - 1})"
            )
        if coupled.is_coupled(self.cc) and len(self.paths) > coupled.MAX_PATHS:
            raise ValueError(
                f"cc: the coupled congestion control {self.cc!r} couples at most "
                f"{coupled.MAX_PATHS} subflows, and the profile has {len(self.paths)} paths: "
                "give it fewer paths or an uncoupled cc (cubic, reno, bbr)")
        names = [p.name for p in self.paths if p.name]
        if len(set(names)) != len(names):
            raise ValueError("paths: path names must be distinct")
        for number, event in enumerate(self.events):
            try:
                self.path_index(event.path)
            except KeyError as exc:
                raise ValueError(f"events.{number}.path: {exc.args[0]}") from None
        if self.mode == "mptcp" and all(p.backup for p in self.paths):
            raise ValueError("paths: at least one path must not be a backup path")
        if all(p.metered for p in self.paths) and not self.allow_all_metered:
            raise ValueError("paths: every path is metered, so nothing carries the video for "
                             "free: leave one unmetered, or say allow_all_metered = true")
        for number, path in enumerate(self.paths):
            for direction in ("uplink", "downlink"):
                self._resolve_trace(path, direction, f"paths.{number}")
        if self.server_link:
            for direction in ("uplink", "downlink"):
                self._resolve_trace(self.server_link, direction, "server_link")
        self._check_competitors()
        return self

    def _check_competitors(self) -> None:
        names = [self.competitor_name(k) for k in range(len(self.competitors))]
        if len(set(names)) != len(names):
            raise ValueError("competitors: names must be distinct")
        for k, user in enumerate(self.competitors):
            for j, path in enumerate(user.paths):
                where = f"competitors.{k}.paths.{j}"
                if path.via is None:
                    for direction in ("uplink", "downlink"):
                        self._resolve_trace(path, direction, where)
                    continue
                try:
                    self.path_index(path.via)
                except KeyError as exc:
                    raise ValueError(f"{where}.via: {exc.args[0]}") from None
                own = sorted(path.model_fields_set - {"via"})
                if own:
                    raise ValueError(
                        f"{where}: a path `via` another takes that path's link as it is; "
                        f"remove {', '.join(own)} (or `via`, for a link of its own)")

    def metered_paths(self) -> dict[int, float | None]:
        """The metered paths' indexes, each with its price per GB (None: not priced)."""
        return {i: p.cost_per_gb for i, p in enumerate(self.paths) if p.metered}

    def competitor_name(self, index: int) -> str:
        return self.competitors[index].name or f"user{index + 1}"

    def competitor_link(self, index: int, path: int,
                        direction: Literal["uplink", "downlink"]) -> Link:
        """The own link of a competitor's path (one without `via`)."""
        return self._link(self.competitors[index].paths[path], direction,
                          f"competitors.{index}.paths.{path}")

    def path_index(self, ref: int | str) -> int:
        if isinstance(ref, int):
            if 0 <= ref < len(self.paths):
                return ref
            raise KeyError(f"no path {ref} (the profile has paths 0..{len(self.paths) - 1})")
        for index, path in enumerate(self.paths):
            if path.name == ref:
                return index
        known = ", ".join(p.name for p in self.paths if p.name) or "none"
        raise KeyError(f"no path named {ref!r} (named paths: {known})")

    @property
    def primary_path(self) -> int:
        """The path the first (or only) subflow takes."""
        if self.mode == "tcp":
            return self.tcp_path
        return next(i for i, p in enumerate(self.paths) if not p.backup)

    def path_label(self, index: int) -> str:
        return self.paths[index].name or f"path{index}"

    def link(self, index: int, direction: Literal["uplink", "downlink"]) -> Link:
        return self._link(self.paths[index], direction, f"paths.{index}")

    def server_link_model(self, direction: Literal["uplink", "downlink"]) -> Link | None:
        if self.server_link is None:
            return None
        return self._link(self.server_link, direction, "server_link")

    def slower_paths(self) -> list[int]:
        """The paths whose downlink is slower than the fastest path's (none when a path is not
        shaped, or all have one rate)."""
        rates = [self.link(i, "downlink").mean_bps() for i in range(len(self.paths))]
        if any(r is None for r in rates):
            return []
        fastest = max(r for r in rates if r is not None)
        return [i for i, r in enumerate(rates) if r is not None and r < fastest]

    def rtt_ms(self, index: int) -> float:
        """Configured base round-trip time over path `index` (delays only)."""
        total = self.link(index, "uplink").delay_ms + self.link(index, "downlink").delay_ms
        for direction in ("uplink", "downlink"):
            server = self.server_link_model(direction)
            if server:
                total += server.delay_ms
        return total

    def emulator_events(self, index: int) -> list[dict[str, Any]]:
        """Events of path `index`, in the emulator's config vocabulary."""
        out = []
        for event in self.events:
            if self.path_index(event.path) != index:
                continue
            direction = {"both": "both", "uplink": "a_to_b", "downlink": "b_to_a"}[event.dir]
            if event.action == "change":
                assert event.set is not None  # EventSpec's validator requires it
                change = self._link_changes(event.set)
            else:
                change = {"down": event.action == "down"}
            out.append({"at_s": event.at_s, "dir": direction, "set": change})
        return sorted(out, key=lambda e: e["at_s"])

    def _link_changes(self, fields: LinkFields) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        for key, value in fields.model_dump(exclude_unset=True).items():
            if key == "rate":
                changes["rate_bps"] = value
                changes.setdefault("trace", None)
            elif key == "trace":
                changes["trace"] = str(self._find_trace(value, None))
            else:
                changes[key] = value
        return changes

    def _link(self, spec: LinkSpec, direction: str, where: str) -> Link:
        merged = spec.model_dump(exclude={"uplink", "downlink", "name", "backup", "via",
                                          "metered", "cost_per_gb"},
                                 exclude_unset=True)
        override = getattr(spec, direction)
        if override is not None:
            own = override.model_dump(exclude_unset=True)
            # A direction's own rate replaces an inherited trace and the other way round.
            if "rate" in own:
                merged.pop("trace", None)
            if "trace" in own:
                merged.pop("rate", None)
            if "queue_bytes" in own:
                merged.pop("queue_packets", None)
            if "queue_packets" in own:
                merged.pop("queue_bytes", None)
            merged.update(own)
        trace = self._resolve_trace(spec, direction, where)
        return Link(
            rate_bps=merged.get("rate"),
            trace=trace,
            delay_ms=merged.get("delay_ms") or 0.0,
            jitter_ms=merged.get("jitter_ms") or 0.0,
            loss=merged.get("loss") or 0.0,
            queue_bytes=merged.get("queue_bytes"),
            queue_packets=merged.get("queue_packets"),
            aqm=merged.get("aqm") or "none",
            aqm_params=disciplines.given(merged),
        )

    def _resolve_trace(self, spec: LinkSpec, direction: str, where: str) -> Path | None:
        override = getattr(spec, direction)
        if override is not None and "trace" in override.model_fields_set:
            if override.trace is None:
                return None
            return self._find_trace(override.trace, None, f"{where}.{direction}.trace")
        if override is not None and "rate" in override.model_fields_set:
            return None
        if spec.trace is None:
            return None
        # A path-level trace "X" means X.up for the uplink and X.down for the downlink when
        # those files exist (the Mahimahi naming), X itself otherwise.
        suffix = "up" if direction == "uplink" else "down"
        return self._find_trace(spec.trace, suffix, f"{where}.trace")

    def _find_trace(self, name: str, suffix: str | None, where: str = "trace") -> Path:
        # Beside the profile file first, so that a profile and its traces travel together.
        first = [self.source.parent] if self.source is not None else []
        found = traces.find(name, suffix, first)
        if found is None:
            raise ValueError(f"{where}: {traces.not_found_message(name, first)}")
        return found


def _format_validation_error(exc: ValidationError, origin: str) -> str:
    lines = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key (check its spelling)"
        if error["type"] == "missing":
            message = "required field is missing"
        # A message that already starts with its own field name carries the location itself.
        lines.append(message if not loc or message.startswith(loc.split(".")[0] + ".") else
                     f"{loc}: {message}")
    return f"profile {origin} is invalid: " + "; ".join(lines)


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Set dotted keys in raw profile data: {"paths.*.queue_bytes": "1MB", "paths.1.loss": 0.1}."""
    for dotted, value in overrides.items():
        _set_dotted(data, dotted.split("."), value, dotted)
    return data


def _set_dotted(node: Any, keys: list[str], value: Any, dotted: str) -> None:
    key, rest = keys[0], keys[1:]
    if isinstance(node, list):
        if key == "*":
            targets = list(range(len(node)))
        elif key.isdigit() and int(key) < len(node):
            targets = [int(key)]
        else:
            raise UserError(f"override {dotted!r}: no list item {key!r} (there are {len(node)})")
        for index in targets:
            if rest:
                _set_dotted(node[index], rest, value, dotted)
            else:
                node[index] = value
        return
    if not isinstance(node, dict):
        raise UserError(f"override {dotted!r}: {key!r} is inside a value that is not a table")
    if rest:
        _set_dotted(node.setdefault(key, {}), rest, value, dotted)
    else:
        node[key] = value


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))


def profile_from_dict(data: dict[str, Any], *, name: str = "custom",
                      source: Path | None = None) -> Profile:
    data = dict(data)
    data.setdefault("name", name)
    if source is not None:
        data["source"] = source
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise UserError(_format_validation_error(exc, str(source or name))) from None


def load_profile(ref: str | Path | Profile, overrides: dict[str, Any] | None = None,
                 deployment: str | Path | Deployment | None = None) -> Profile:
    """A preset name (see `preset_names()`) or a TOML file path -> a validated Profile;
    `deployment` (a preset name, a file or a Deployment) replaces the profile's, and the
    overrides apply after it (so `deployment.server.cc=bbr` changes the one named)."""
    if overrides:
        legacyfields.warn_moved(list(overrides), "--set / a condition's set")
    if isinstance(ref, Profile):
        if not overrides and deployment is None:
            return ref
        data = ref.model_dump(exclude_unset=True, exclude={"source"})
        _put_deployment(data, deployment, overrides)
        return profile_from_dict(apply_overrides(data, overrides or {}), name=ref.name,
                                 source=ref.source)
    path = Path(ref)
    if not path.suffix and (PRESETS_DIR / f"{ref}.toml").is_file():
        path = PRESETS_DIR / f"{ref}.toml"
    if not path.is_file():
        raise UserError(
            f"profile {str(ref)!r} is neither a preset nor a file; presets: "
            + ", ".join(preset_names())
        )
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"profile {path} is not valid TOML: {exc}") from None
    legacyfields.warn_moved(legacyfields.file_keys(data), f"profile {path.name}")
    _put_deployment(data, deployment, overrides)
    if overrides:
        apply_overrides(data, overrides)
    return profile_from_dict(data, name=path.stem, source=path.resolve())


def _put_deployment(data: dict[str, Any], ref: str | Path | Deployment | None,
                    overrides: dict[str, Any] | None) -> None:
    """The named deployment in raw profile data (its raw table only when an override edits it)."""
    if ref is None:
        return
    dep = load_deployment(ref)
    edited = any(key.split(".", 1)[0] == "deployment" for key in overrides or {})
    data["deployment"] = {**dep.model_dump(mode="json", exclude_unset=True), "name": dep.name} \
        if edited else dep  # as it is: validated once


def parse_override(text: str) -> tuple[str, Any]:
    """`key=value` from the command line; the value is read as TOML when it parses as TOML."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise UserError(f"--set {text!r}: write KEY=VALUE, e.g. paths.*.queue_bytes=1MB")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.strip(), value
