"""Scenario files: what to compare, how often, on which media.

A scenario is a TOML file (runner/scenarios/NAME.toml, or any path). It names the media (an
existing media tree, or how to encode one), the conditions to compare (a netem profile each,
optionally with field overrides, and the transport), the players, the number of trials, the
play (or transfer) duration and the seed that fixes the run order. `expand_trials` turns it into
the list of trials in the order they run: round by round, each round a seeded shuffle of every
condition × player, so that slow drift of the machine does not favour one condition.
"""

from __future__ import annotations

import itertools
import random
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from mpstream.encoder.lowlatency import (
    DEFAULT_RTT_S,
    LowLatency,
    check_timing,
    default_target_s,
)
from mpstream.errors import UserError
from mpstream.netem.profile import Profile
from mpstream.netem.singlepath import known_single_path
from mpstream.netem.tracepairs import TracePair, load_pair_set
from mpstream.player.abr import DEFAULT as ABR_DEFAULT
from mpstream.player.abr import resolve_abr
from mpstream.player.livesync import LiveSync
from mpstream.runner.resolved import ResolvedCondition
from mpstream.runner.sites import SiteKind, site_class
from mpstream.runner.workloads import WorkloadKind, workload_for
from mpstream.transports.base import TRANSPORTS, get_transport
from mpstream.transports.pathpolicy import known_policy

SCENARIOS_DIR = Path(__file__).resolve().parent / "scenarios"

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")

Player = Literal["dashjs", "hlsjs"]
Browser = Literal["chromium", "firefox"]
Codec = Literal["auto", "avc", "hevc"]


# A registered transport's name (mpstream/transports/base.py's TRANSPORTS), checked when a
# scenario loads.
TransportName = Annotated[str, AfterValidator(TRANSPORTS.check)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MediaSpec(_Strict):
    """Either `dir` (a media tree made earlier by `mpstream encode`) or how to encode one."""

    dir: Path | None = None
    source: str | None = Field(default=None, description="sample, synthetic or a video file")
    ladder: str = "tiny"
    segment_duration: float = Field(default=4.0, gt=0, le=30)
    duration: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_of_dir_or_source(self) -> MediaSpec:
        if (self.dir is None) == (self.source is None):
            raise ValueError("give exactly one of `dir` (an encoded media tree) or `source`")
        return self


class LiveSpec(_Strict):
    """A live stream (`mpstream live`) the trials play instead of on-demand media: started
    once for the whole run, every trial joins it at its live edge."""

    source: str = Field(default="synthetic",
                        description="synthetic, sample, a video file or /dev/videoN")
    ladder: str = "small"
    segment_duration: float = Field(default=2.0, gt=0, le=30)
    window_s: float = Field(default=30.0, gt=0, le=3600)
    # How far behind the live edge the players aim to play (s); None: the library's default,
    # with low_latency three parts plus each condition's round trip (player_sync below).
    target_latency_s: float | None = Field(default=None, gt=0, le=600)
    # LL-DASH and LL-HLS: segments served in parts while they are written.
    low_latency: bool = False
    part_duration: float | None = Field(default=None, gt=0, le=10)
    # How the players catch up (player/livesync.py; None: the page's defaults): the fastest
    # playback rate behind the target, the slowest ahead of it (dash.js), and how far past the
    # target (s) they jump to the live edge instead.
    catchup_max_rate: float | None = Field(default=None, ge=1, le=4)
    catchup_min_rate: float | None = Field(default=None, gt=0, le=1)
    max_drift_s: float | None = Field(default=None, gt=0, le=600)

    @model_validator(mode="after")
    def _window_holds_a_segment(self) -> LiveSpec:
        if self.window_s < self.segment_duration:
            raise ValueError("window_s must hold at least one segment (segment_duration)")
        if self.part_duration is not None and not self.low_latency:
            raise ValueError("part_duration goes with low_latency = true")
        low = self.low_latency_config()
        if low is not None:
            try:
                check_timing(self.segment_duration, low)
            except UserError as exc:
                raise ValueError(str(exc).replace("--part-duration", "part_duration")) from None
        return self

    def low_latency_config(self) -> LowLatency | None:
        """The stream's low-latency timing (None: whole segments)."""
        if not self.low_latency:
            return None
        return LowLatency(part_duration=self.part_duration or 0.5,
                          target_latency_s=self.target_latency_s)

    def player_sync(self, target_s: float | None, network: Profile | None) -> LiveSync:
        """What a player joining the stream over `network` is told (player/livesync.py): the
        target given, or for a low-latency stream three parts plus the network's round trip
        (the part being written, the one played, one in flight, the request for the next),
        and the catch-up settings of this table."""
        low = self.low_latency_config()
        if target_s is None and low is not None:
            part = low.fitted(self.segment_duration).part_duration
            target_s = default_target_s(part, network_rtt_s(network))
        return LiveSync(target_s=target_s, catchup_max_rate=self.catchup_max_rate,
                        catchup_min_rate=self.catchup_min_rate, max_drift_s=self.max_drift_s)


def network_rtt_s(network: Profile | None) -> float:
    """The largest base round trip of the network's paths (s), since a part may come over any
    of them; DEFAULT_RTT_S where the network is not emulated (not known)."""
    if network is None or not network.paths:
        return DEFAULT_RTT_S
    return max(network.rtt_ms(index) for index in range(len(network.paths))) / 1000


class Condition(_Strict):
    """One network condition: a netem profile, optionally changed by `set`, and a transport;
    or (kind "real") a server's manifest `url` played over this host's `interfaces`."""

    label: str
    kind: SiteKind = Field(default="emulated", description="the network it runs on: a kind "
                           "registered in runner/sites/ (emulated, real)")
    profile: str | None = None
    # kind "real": the manifest's URL per player ({"dashjs" = URL, "hlsjs" = URL}) or one URL
    # for all, and the interfaces as for `mpstream play --interfaces` (IF1,IF2[:backup]).
    url: str | dict[str, str] | None = None
    interfaces: str | None = None
    # kind "real": the collector API the page posts its events to (e.g. http://HOST:8080/api/v1,
    # beside the server); None: one on loopback.
    collector: str | None = None
    # kind "real": seconds of each timed download of the path checks before and after a trial
    # (0: no checks, as `mpstream play --url` runs)
    check_s: float = Field(default=3.0, ge=0, le=60)
    # None: the profile's own mode (mptcp profiles run MPTCP, tcp profiles single-path TCP).
    transport: TransportName | None = None
    # The transport's path scheduler (None: its default); `mpstream list schedulers`.
    scheduler: str | None = None
    # What the server and client run (mpstream/deployment.py): a preset name or a TOML file
    # (relative to the scenario's folder first); None: kernel-default.
    deployment: str | None = None
    # When the profile's metered paths carry data (None: the deployment's, which the
    # scenario's loading fills in, else always): mpstream/transports/pathpolicy.py, and
    # the deadline policy's buffer marks [low, high] in seconds (None: its defaults).
    path_policy: str | None = None
    deadline_marks: tuple[float, float] | None = None
    # What a user without multipath has (netem/singlepath.py): a one-path transport (TCP
    # unless `transport` names another) on the network's best path, its cellular path or one
    # path of their summed capacity; None: the transport on the paths the profile gives it.
    single_path: str | None = None
    # Overrides applied to the profile's raw data before it is loaded: dotted keys, `*` walks
    # every element of a list, e.g. {"paths.*.queue_bytes" = 375000,
    # "deployment.server.cc" = "bbr"}: the deployment's fields change the one named.
    set: dict[str, Any] = Field(default_factory=dict)
    # Key of this condition's published figures in mpstream.runner.report.reference (e.g.
    # "thesis/bandwidth/balanced"); none when the studies have no such condition.
    reference: str | None = None

    _path_policy = field_validator("path_policy")(known_policy)
    _single_path = field_validator("single_path")(known_single_path)

    @field_validator("deadline_marks")
    @classmethod
    def _ordered_marks(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not 0 <= value[0] < value[1]:
            raise ValueError(f"deadline_marks [{value[0]:g}, {value[1]:g}]: the low mark must "
                             "be below the high mark and not negative")
        return value

    @model_validator(mode="after")
    def _kind_fields(self) -> Condition:
        site_class(self.kind).check_fields(self)
        if self.single_path is not None:
            if self.transport is not None and get_transport(self.transport).network_mode != "tcp":
                raise ValueError(f"single_path = {self.single_path!r} plays one path: give a "
                                 f"one-path transport (tcp, the default, or quic), not "
                                 f"{self.transport}")
            if "tcp_path" in self.set:
                raise ValueError("single_path chooses the path itself: leave tcp_path out of "
                                 "`set`")
        return self

    def url_for(self, player: str) -> str:
        if isinstance(self.url, dict):
            if player not in self.url:
                raise ValueError(f"condition {self.label}: no url for player {player}")
            return self.url[player]
        assert self.url is not None
        return self.url

    @field_validator("label")
    @classmethod
    def _label_is_a_name(cls, v: str) -> str:
        if not _LABEL.match(v):
            raise ValueError(
                "must be 1-64 characters of letters, digits, '_', '.', '+' or '-' "
                "(it names folders and table rows)"
            )
        return v


class Sweep(_Strict):
    """Shorthand for many conditions: every combination of the listed override values."""

    profile: str
    transport: TransportName | None = None
    values: dict[str, list[Any]]

    @field_validator("values")
    @classmethod
    def _non_empty(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if not v or any(not vals for vals in v.values()):
            raise ValueError("every swept key needs at least one value")
        return v

    def conditions(self) -> list[Condition]:
        keys = list(self.values)
        out = []
        for combo in itertools.product(*(self.values[k] for k in keys)):
            out.append(
                Condition(
                    label="-".join(short_value(v) for v in combo),
                    profile=self.profile,
                    transport=self.transport,
                    set=dict(zip(keys, combo, strict=True)),
                )
            )
        return out


def short_value(v: Any) -> str:
    """A swept value as it appears in condition labels: 375000 -> 375k."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1000 and v % 1000 == 0:
        return f"{v // 1000}k"
    return str(v)


class Scenario(_Strict):
    name: str
    description: str = ""
    # video: a player plays the media; iperf: a bulk iperf3 transfer (no media, no player).
    kind: WorkloadKind = Field(default="video", description="what each trial does: a kind "
                               "registered in runner/workloads/ (video, iperf)")
    media: MediaSpec | None = None
    live: LiveSpec | None = None
    conditions: list[Condition] = Field(default_factory=list)
    sweep: Sweep | None = None
    # The condition the others are compared with (e.g. single-path TCP on the same capacity):
    # `mpstream tune` measures each candidate against it, in the same run.
    baseline: str | None = None
    # The adaptation rule the others are also set beside, condition by condition, in a run over
    # trace pairs (the report's figures over pairs): one of `abrs`.
    baseline_abr: str | None = None
    players: list[Player] = Field(default_factory=lambda: list[Player](["dashjs"]))
    # Crossed with conditions and players like them: every browser plays every codec family.
    browsers: list[Browser] = Field(default_factory=lambda: list[Browser](["chromium"]))
    # auto: the player picks among what the browser decodes; avc / hevc: only that family.
    codecs: list[Codec] = Field(default_factory=lambda: list[Codec](["auto"]))
    # Adaptation rules, crossed like the players (docs/abr.md): "default" is each player's own
    # default; every other name must be one that every listed player supports.
    abrs: list[str] = Field(default_factory=lambda: [ABR_DEFAULT])
    # Numeric parameters per rule: { robustmpc = { horizon = 3 } }.
    abr_params: dict[str, dict[str, float]] = Field(default_factory=dict)
    # For hls.js the HLS master playlist is played; for dash.js the MPD.
    trials: int = Field(default=3, ge=1, le=1000)
    # Stop each condition when it is sure instead (runner/until.py): METRIC:WIDTH[x], and the
    # most trials a condition then takes. `mpstream run --until` wins.
    until: str | None = None
    max_trials: int = Field(default=10, ge=3, le=1000)
    duration_s: float = Field(default=60.0, gt=0, le=3600)
    # iperf: seconds before `duration_s` that every transfer runs and iperf3 leaves out of its
    # figures (-O), so that slow start and subflows joining do not weigh in a share.
    warmup_s: float = Field(default=0.0, ge=0, le=600)
    # Cap on how far ahead the player buffers (s); None: the player library's own target.
    buffer_s: float | None = Field(default=None, gt=0, le=600)
    # Live streams: how far behind the live edge the players aim to play (s); None: [live]'s
    # target_latency_s, else the player library's default. For a live stream of a real
    # condition's server, which has no [live] table.
    target_latency_s: float | None = Field(default=None, gt=0, le=600)
    # How long the page keeps sending unsent events after the session ends while the collector
    # does not take them (s); None: the page's 15 s. For a collector far away.
    report_timeout_s: float | None = Field(default=None, gt=0, le=3600)
    seed: int = 1
    # A set of WiFi x cellular trace pairs (netem/tracepairs.py: a shipped set's name or a
    # file): every condition plays every pair once a round, each round in its own order.
    pairs: str | None = None
    # Where the scenario file was read from; relative profile paths resolve against it.
    base_dir: Path = Field(default=SCENARIOS_DIR, exclude=True)
    # What each condition resolved to, by label (resolve_scenario).
    _resolved: dict[str, ResolvedCondition] = PrivateAttr(default_factory=dict)
    # The pairs as drawn when the run was planned (run.json), else drawn at the first asking.
    _pairs: tuple[TracePair, ...] | None = PrivateAttr(default=None)

    @field_validator("name")
    @classmethod
    def _name_is_a_name(cls, v: str) -> str:
        if not _LABEL.match(v):
            raise ValueError("must be 1-64 characters of letters, digits, '_', '.', '+' or '-'")
        return v

    @field_validator("players")
    @classmethod
    def _players_unique(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("name at least one player (dashjs or hlsjs)")
        if len(set(v)) != len(v):
            raise ValueError("a player is listed twice")
        return v

    @field_validator("browsers", "codecs", "abrs")
    @classmethod
    def _factor_unique(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("name at least one (browsers: chromium, firefox; codecs: auto, "
                             "avc, hevc; abrs: default or a rule of `mpstream list abr`)")
        if len(set(v)) != len(v):
            raise ValueError("a value is listed twice")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        conds = self.all_conditions()
        if not conds:
            raise ValueError("no conditions: give [[conditions]] entries or a [sweep]")
        labels = [c.label for c in conds]
        dup = {x for x in labels if labels.count(x) > 1}
        if dup:
            raise ValueError(f"condition labels must be unique; repeated: {', '.join(sorted(dup))}")
        if self.until is not None:
            from mpstream.runner.until import Until

            Until.parse(self.until, self.max_trials)
        if self.baseline is not None and self.baseline not in labels:
            raise ValueError(f"baseline: no condition labelled {self.baseline!r} (conditions: "
                             f"{', '.join(labels)})")
        if self.baseline_abr is not None and (self.baseline_abr not in self.abrs
                                              or len(self.abrs) < 2):
            raise ValueError(f"baseline_abr: {self.baseline_abr!r} is not one of two or more "
                             f"rules in abrs ({', '.join(self.abrs)}); list it there, beside "
                             "the rules set against it")
        workload_for(self.kind).check(self)
        if self.pairs is not None:
            self._check_pairs(conds)
        return self

    def _check_pairs(self, conds: list[Condition]) -> None:
        try:
            window_s = load_pair_set(self.pairs or "", self.base_dir).window_s
        except UserError as exc:
            raise ValueError(str(exc)) from None
        others = [c.label for c in conds if c.kind != "emulated"]
        if others:
            raise ValueError(f"pairs: trace pairs play on emulated networks; {', '.join(others)} "
                             "are not")
        if self.duration_s > window_s:
            raise ValueError(f"duration_s {self.duration_s:g} is longer than the pairs' traces "
                             f"({window_s:g} s): a session would replay them")

    def pair_list(self) -> tuple[TracePair, ...]:
        """The trace pairs each condition plays (none: the scenario names no set)."""
        if self.pairs is None:
            return ()
        if self._pairs is None:
            self._pairs = load_pair_set(self.pairs, self.base_dir).pairs
        return self._pairs

    def with_pairs(self, pairs: tuple[TracePair, ...] | None) -> Scenario:
        """This scenario playing `pairs` as drawn before (run.json's), when given."""
        if pairs is not None:
            self._pairs = pairs
        return self

    def resolved(self, cond: Condition) -> ResolvedCondition:
        """What `cond` resolved to as the scenario loaded (resolve_scenario); a scenario made
        otherwise resolves it at the first asking, and keeps it."""
        found = self._resolved.get(cond.label)
        if found is None:
            found = self._resolved[cond.label] = resolve_condition(cond, self.base_dir)
        return found

    def abr_request(self, player: str, abr: str | None) -> tuple[str | None,
                                                                 tuple[tuple[str, float], ...]]:
        """The rule a trial asks `player` for (None: the page's default, when no parameters
        are given for it) and its parameters."""
        params = tuple(self.abr_params.get(abr or ABR_DEFAULT, {}).items())
        if (abr is None or abr == ABR_DEFAULT) and not params:
            return None, ()
        return resolve_abr(player, abr), params

    def live_target_s(self) -> float | None:
        """How far behind the live edge the players aim (None: the library's default)."""
        if self.target_latency_s is not None or self.live is None:
            return self.target_latency_s
        return self.live.target_latency_s

    def live_sync(self, resolved: ResolvedCondition) -> LiveSync | None:
        """What a trial's player is told of the live stream it joins, decided once: the trial's
        PlayRequest gets it and its record keeps it. None: no live stream, no target."""
        target = self.live_target_s()
        if self.live is None:
            return None if target is None else LiveSync(target_s=target)
        return self.live.player_sync(target, resolved.network)

    def all_conditions(self) -> list[Condition]:
        return list(self.conditions) + (self.sweep.conditions() if self.sweep else [])


def resolve_condition(cond: Condition, base_dir: Path) -> ResolvedCondition:
    """The one place a condition is resolved (runner/resolved.py): its network's kind reads its
    files (relative ones from `base_dir`, the scenario's folder) and makes every choice."""
    return site_class(cond.kind).resolve(cond, base_dir)


def resolve_scenario(scenario: Scenario, *, origin: str | None = None,
                     known: Mapping[str, ResolvedCondition] | None = None) -> Scenario:
    """The scenario with each condition resolved once (`Scenario.resolved`), taking those in
    `known` (by label: read back from run.json) as they are. Its conditions name the path
    policy their deployment brings, as run.json and the trial records always have. An error
    names the condition after `origin` (None: the error alone, as `play` says it)."""
    resolved: dict[str, ResolvedCondition] = {}
    for cond in scenario.all_conditions():
        if known and cond.label in known:
            resolved[cond.label] = known[cond.label]
            continue
        try:
            resolved[cond.label] = resolve_condition(cond, scenario.base_dir)
        except UserError as exc:
            raise UserError(f"{origin}: condition {cond.label!r}: {exc}" if origin else str(exc)
                            ) from None
    conditions = [_naming_its_policy(c, resolved[c.label]) for c in scenario.conditions]
    done = scenario.model_copy(update={"conditions": conditions})
    done._resolved = resolved
    return done


def _naming_its_policy(cond: Condition, resolved: ResolvedCondition) -> Condition:
    """The condition with its deployment's path policy, unless it names its own."""
    brought = resolved.deployment.path_policy if resolved.deployment is not None else None
    if cond.path_policy is not None or brought is None:
        return cond
    return cond.model_copy(update={"path_policy": brought})


class Trial(_Strict):
    """One run of one condition with one player in one browser; `key` names its folder (the
    browser and codec only when not the defaults, so earlier runs' keys stay as they were)."""

    round: int
    condition: Condition
    player: Player | None
    order: int
    browser: Browser | None = None
    codec: Codec | None = None
    abr: str | None = None
    pair: TracePair | None = None

    @property
    def key(self) -> str:
        who = f"-{self.player}" if self.player else ""
        if self.browser and self.browser != "chromium":
            who += f"-{self.browser}"
        if self.codec and self.codec != "auto":
            who += f"-{self.codec}"
        if self.abr and self.abr != ABR_DEFAULT:
            who += f"-{self.abr}"
        if self.pair is not None:
            who += f"-{self.pair.name}"
        return f"r{self.round:02d}-{self.condition.label}{who}"


def condition_of_key(key: str, labels: list[str]) -> str | None:
    """The condition of a trial key (`Trial.key`: r<round>-<condition>, then the player and the
    like, each after a "-"), of the condition `labels` a plan has: the longest that begins it,
    so that "single-tcp" is not read as "single"; None when none does."""
    rest = key.split("-", 1)[-1]
    return next((label for label in sorted(labels, key=len, reverse=True)
                 if rest == label or rest.startswith(label + "-")), None)


def expand_trials(scenario: Scenario, trials: int | None = None) -> list[Trial]:
    n = trials if trials is not None else scenario.trials
    video = workload_for(scenario.kind).plays_video
    players: list[Player | None] = list(scenario.players) if video else [None]
    browsers: list[Browser | None] = list(scenario.browsers) if video else [None]
    codecs: list[Codec | None] = list(scenario.codecs) if video else [None]
    abrs: list[str | None] = list(scenario.abrs) if video else [None]
    # A scenario of trace pairs plays each pair with every cell: the paired design.
    pairs: list[TracePair | None] = list(scenario.pair_list()) or [None]
    cells = list(itertools.product(scenario.all_conditions(), players, browsers, codecs, abrs,
                                   pairs))
    out: list[Trial] = []
    for r in range(n):
        # Each round is shuffled with its own seed, so adding trials never reorders earlier rounds.
        order = list(cells)
        random.Random(f"{scenario.seed}/{r}").shuffle(order)
        for cond, player, browser, codec, abr, pair in order:
            out.append(Trial(round=r, condition=cond, player=player, browser=browser,
                             codec=codec, abr=abr, pair=pair, order=len(out)))
    return out


def scenario_names() -> list[str]:
    """The shipped scenarios (runner/scenarios/NAME.toml)."""
    return sorted(p.stem for p in SCENARIOS_DIR.glob("*.toml"))


def load_scenario(ref: str | Path, *, check: bool = True) -> Scenario:
    """Loads a scenario by name (runner/scenarios/NAME.toml) or path; errors name the field.
    `check=False` leaves its conditions' networks unchecked (`check_conditions`), so that a
    listing shows a scenario this machine cannot run yet (a trace not fetched)."""
    path = Path(ref)
    if not path.is_file():
        named = SCENARIOS_DIR / f"{ref}.toml"
        if not named.is_file():
            raise UserError(f"no scenario {str(ref)!r}: not a file, and not one of: "
                            + ", ".join(scenario_names()))
        path = named
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    if not check:
        return validate_scenario(raw, base_dir=path.resolve().parent, origin=str(path))
    return parse_scenario(raw, base_dir=path.resolve().parent, origin=str(path))


def parse_scenario(raw: dict[str, Any], *, base_dir: Path, origin: str = "scenario",
                   known: Mapping[str, ResolvedCondition] | None = None) -> Scenario:
    """The scenario of these fields, its conditions checked and resolved (those in `known`
    taken as they are)."""
    scenario = validate_scenario(raw, base_dir=base_dir, origin=origin)
    check_conditions(scenario, origin)
    return resolve_scenario(scenario, origin=origin, known=known)


def check_conditions(scenario: Scenario, origin: str) -> None:
    """Refuses a condition its site cannot run (a real one's URL or interfaces) now, not
    mid-run; a bad profile or a missing trace is refused as it is resolved."""
    for cond in scenario.all_conditions():
        try:
            site_class(cond.kind).check_condition(scenario, cond)
        except UserError as exc:
            raise UserError(f"{origin}: condition {cond.label!r}: {exc}") from None


def validate_scenario(raw: dict[str, Any], *, base_dir: Path, origin: str) -> Scenario:
    """The scenario of these fields; a UserError naming each field that is wrong."""
    try:
        return Scenario.model_validate({**raw, "base_dir": base_dir})
    except ValidationError as exc:
        raise UserError(f"{origin}: invalid scenario: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
