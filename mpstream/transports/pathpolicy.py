"""Path policies: when a metered path (a profile path with `metered = true`, e.g. cellular)
may carry the video.

- `always`: every path carries data as the transport's scheduler likes (off-the-shelf MPTCP).
- `backup`: the metered paths are backup paths: used only when the others fail.
- `deadline`: MP-DASH's idea (Han et al., CoNEXT'16) on a stock kernel: the metered paths are
  backup paths until the player's buffer falls below a low mark, or the next segment would miss
  its deadline (the buffer running dry) at the unmetered paths' measured rate; they are backup
  again once the buffer is above a high mark.
- `fast-start` and `handover` hold a user's slower paths, metered or not: until the first frame
  is on screen, and for the whole session.

A policy acts through the transport's lever for holding a path back (`Transport.path_holder`):
with kernel MPTCP the client's endpoint flag (`ip mptcp endpoint change id N backup|nobackup`
in the client namespace: the kernel sends MP_PRIO on the existing subflows and the server's
scheduler follows); with multipath QUIC the hop's gateway, the sender, told on its control
channel to hold or release the paths from the metered path's client address (its packet
scheduler then keeps data off them). The player's buffer level reaches the controller from the
page: the probe's `buffer` and `segment` events, read from the collector as they arrive.
Every toggle is an event with its reason and the buffer level (docs/cellular.md).
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from mpstream.errors import UserError
from mpstream.registry import Registry

if TYPE_CHECKING:
    from mpstream.qoe.events import BaseEvent


class PathPolicy:
    """A path policy's behaviour: which paths it holds back (`held_paths`: the metered ones,
    unless it says otherwise), whether it holds any at all (`acts`), whether they start held
    (the profile's endpoint flag, `starts_held`), and whether it changes that while playing
    (`adapts`, through `decide`). One instance a policy; each class registers itself by name
    in POLICY_TYPES (`@POLICY_TYPES.register`): adding a policy is adding its class."""

    name: ClassVar[str]
    summary: ClassVar[str]
    acts: ClassVar[bool] = True
    starts_held: ClassVar[bool] = True
    adapts: ClassVar[bool] = False
    # A network without a path for it to hold is refused (a policy for metered paths on a
    # network that marks none is a mistake); False: such a network just plays as `always`.
    needs_held: ClassVar[bool] = True
    # Whether it means to spare the paths it holds for the whole session, letting them carry
    # data only when the others cannot: a rule that reads the paths (docs/abr.md#multipath)
    # then never lets them lift the rung (the page's `spared` parameter).
    spares: ClassVar[bool] = False

    def held_paths(self, profile: Any) -> list[int]:
        """The paths it holds back on this network (a netem Profile)."""
        return sorted(profile.metered_paths())

    def starting(self, profile: Any, held: Sequence[int]) -> Any:
        """The network (a netem Profile) as a session starts on it: the paths it holds back
        (`held`) flagged backup when it starts them held (the controller lifts the flag when
        the policy says)."""
        if not held or not self.starts_held:
            return profile
        paths = [p.model_copy(update={"backup": True}) if i in held else p
                 for i, p in enumerate(profile.paths)]
        return profile.model_copy(update={"paths": paths})

    def decide(self, using: bool, obs: Observation, marks: DeadlineMarks) -> Decision | None:
        """The next step from state `using` (the held paths carry data): a Decision to change
        it, or None to keep it."""
        return None

    # One behaviour a policy: two instances of one policy are the same value.
    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


POLICY_TYPES: Registry[type[PathPolicy]] = Registry.of_module("path policy",
                                                            lambda cls: cls.name)


@POLICY_TYPES.register
class Always(PathPolicy):
    name = "always"
    summary = "every path carries data as the transport's scheduler likes (off-the-shelf multipath)"
    acts = False
    starts_held = False

    def held_paths(self, profile: Any) -> list[int]:
        return []


@POLICY_TYPES.register
class Backup(PathPolicy):
    name = "backup"
    summary = "the metered paths are backup paths: they carry data only when the others fail"
    spares = True


@POLICY_TYPES.register
class Deadline(PathPolicy):
    name = "deadline"
    summary = ("MP-DASH: a metered path joins when the player's buffer falls below a low mark "
               "or the next segment would miss its deadline at the unmetered paths' rate, and "
               "leaves above a high mark")
    adapts = True
    spares = True

    def decide(self, using: bool, obs: Observation, marks: DeadlineMarks) -> Decision | None:
        return deadline_decision(using, obs, marks)


class _SlowerPaths(PathPolicy):
    """A policy that holds a user's slower paths (by downlink rate), not its metered ones: only
    those the network did not flag backup itself, and none on paths of one rate, where it plays
    as `always`."""

    needs_held = False

    def held_paths(self, profile: Any) -> list[int]:
        return [i for i in profile.slower_paths() if not profile.paths[i].backup]


@POLICY_TYPES.register
class FastStart(_SlowerPaths):
    """The first segment on the fastest path alone: the kernel's scheduler gives an idle
    subflow a whole burst at the start of a response whatever its rate, so a slow path carries
    a third of a small first segment and the segment ends at its pace
    (docs/penalties/first-split.md). Once the first frame is on screen every path carries data."""

    name = "fast-start"
    summary = ("a user's slower paths are backup paths until the first frame is on screen, "
               "then every path carries data")
    adapts = True

    def decide(self, using: bool, obs: Observation, marks: DeadlineMarks) -> Decision | None:
        if not using and obs.started:
            return Decision(True, "the first frame is on screen")
        return None


@POLICY_TYPES.register
class Handover(_SlowerPaths):
    """The fastest path carries the stream and the slower ones stand by, as in Apple's
    `handover` multipath service type. For low-latency live: there a part's tail on a slow path
    is a late part, and a second of buffer turns it into a stall (docs/live.md). The kernel's
    scheduler sends on a backup subflow only while no other subflow is active, so a slower path
    carries data when the fastest has failed."""

    name = "handover"
    summary = ("a user's slower paths are backup paths for the whole session: they carry data "
               "only while the fastest has failed")


# What each policy does, by name, in the order they registered.
POLICIES: dict[str, str] = {cls.name: cls.summary for cls in POLICY_TYPES.values()}
DEFAULT_POLICY = Always.name


def known_policy(name: str | None) -> str | None:
    """`name` (or None) when it is a policy; a ValueError naming the policies, for a model's
    validator (a scenario's condition, a deployment)."""
    if name is not None and name not in POLICY_TYPES:
        raise ValueError(f"{name!r} is no path policy: choose one of {', '.join(POLICIES)}")
    return name


def check_policy(name: str) -> str:
    """`name` when it is a policy; else an error naming the policies there are."""
    if name not in POLICY_TYPES:
        raise UserError(f"path policy {name!r}: choose one of {', '.join(POLICIES)} "
                        "(docs/cellular.md)")
    return name


def policy_named(name: str | None) -> PathPolicy:
    """The policy of that name (None: the default), or an error naming the policies."""
    return POLICY_TYPES.get(check_policy(name or DEFAULT_POLICY))()


def refusal(policy: PathPolicy, transport_name: str, carried_out: Sequence[str],
            held: Sequence[int]) -> str | None:
    """Why `policy` cannot run on this transport and network (None: it can). `carried_out`:
    the policies the transport can carry out; `held`: the paths it would hold back."""
    if not policy.acts:
        return None
    if policy.name not in carried_out:
        holding = [a for a in carried_out if policy_named(a).acts]
        can = (f"it can only set a path's role once, at the start ({', '.join(carried_out)})"
               if holding
               else "it cannot hold a path back")
        return (f"path policy {policy.name}: transport {transport_name}: {can}; mptcp and mpquic "
                "run every policy (the kernel's endpoint backup flag, the QUIC hop's path "
                "hold, changed while playing)")
    if not held and policy.needs_held:
        return (f"path policy {policy.name}: the profile has no metered path to hold back (mark "
                "one `metered = true`)")
    return None


# Playback drains a buffer by one second a second; a sample a second later that lost more than
# this was flushed by the player.
FLUSH_DROP_S = 2.0


@dataclass(frozen=True)
class DeadlineMarks:
    """The deadline policy's parameters. The high mark sits below the players' own buffer
    targets (dash.js keeps 12 s, hls.js 30 s) so that a full buffer lets the metered path go."""

    low_s: float = 4.0  # join below this buffer level (once playing)
    high_s: float = 10.0  # leave at or above it
    margin_s: float = 1.0  # a segment must arrive this long before the buffer runs dry

    def __post_init__(self) -> None:
        if not 0 <= self.low_s < self.high_s:
            raise UserError(f"deadline marks: the low mark ({self.low_s:g} s) must be below the "
                            f"high mark ({self.high_s:g} s) and not negative")


@dataclass(frozen=True)
class Observation:
    """What the controller knows at one moment: the player's buffer (None: no sample yet),
    whether playback has started, the next segment's expected size and the unmetered paths'
    measured rate (None: not measured yet)."""

    buffer_s: float | None
    started: bool
    next_segment_bytes: int | None = None
    unmetered_bps: float | None = None
    previous_buffer_s: float | None = None  # the sample before (None: none yet)


@dataclass(frozen=True)
class Decision:
    use_metered: bool
    reason: str


def deadline_decision(using: bool, obs: Observation, marks: DeadlineMarks) -> Decision | None:
    """The deadline policy's next step from state `using` (the metered paths carry data):
    a Decision to change it, or None to keep it. Before playback starts nothing changes (the
    metered path stays back unless a path fails, which the kernel handles). The metered path
    joins only for a buffer that drains (or stands still): one that is filling, as after
    startup, gets its segments faster than it plays them, so they meet their deadlines without
    help; and a drop of more than FLUSH_DROP_S between two samples (a second apart) is the
    player emptying its own buffer (a seek, a decoder error, segments replaced by others),
    not a network falling behind, so the next sample decides."""
    if obs.buffer_s is None or not obs.started:
        return None
    b = obs.buffer_s
    if using:
        if b >= marks.high_s:
            return Decision(False, f"buffer {b:.1f} s at or above the high mark "
                                   f"{marks.high_s:g} s")
        return None
    prev = obs.previous_buffer_s
    if prev is None or b > prev or prev - b > FLUSH_DROP_S:
        return None  # filling, flushed, or no trend yet
    if b < marks.low_s:
        return Decision(True, f"buffer {b:.1f} s below the low mark {marks.low_s:g} s and "
                              f"not filling ({prev:.1f} s before)")
    if obs.next_segment_bytes and obs.unmetered_bps:
        need_s = obs.next_segment_bytes * 8 / obs.unmetered_bps
        if need_s + marks.margin_s > b:
            return Decision(True, f"the next segment ({obs.next_segment_bytes / 1e3:.0f} KB) "
                                  f"needs {need_s:.1f} s at the unmetered rate "
                                  f"{obs.unmetered_bps / 1e6:.2f} Mbit/s, the buffer holds "
                                  f"{b:.1f} s")
    return None


@dataclass
class PlayerView:
    """The player's state as its events tell it (the probe's `buffer`, `startup` and
    `segment` events), folded one batch at a time."""

    buffer_s: float | None = None
    previous_buffer_s: float | None = None
    started: bool = False
    seen: int = -1  # the highest event seq folded
    segment_bytes: int | None = None  # the last video segment's size
    segment_bps: float | None = None  # its download rate (all paths together)

    def fold(self, events: Sequence[BaseEvent]) -> None:
        # Imported here: the transports' own programs (the mphttp proxy) import this module,
        # and start without loading pydantic and the QoE models.
        from mpstream.qoe.events import BufferEvent, SegmentEvent, StartupEvent
        from mpstream.qoe.metrics import segment_rate_bps

        for e in sorted(events, key=lambda e: e.seq):
            if e.seq <= self.seen:
                continue
            self.seen = e.seq
            if isinstance(e, BufferEvent):
                self.previous_buffer_s = self.buffer_s
                self.buffer_s = e.data.level_s
            elif isinstance(e, StartupEvent):
                self.started = True
            elif isinstance(e, SegmentEvent) and e.data.kind == "video" and e.data.bytes:
                self.segment_bytes = e.data.bytes
                # A segment that took no time keeps the rate of the one before.
                self.segment_bps = segment_rate_bps(e.data) or self.segment_bps


@dataclass
class ToggleEvent:
    t_s: float  # seconds since the controller started
    t_unix: float
    path: int
    action: str  # "nobackup" (the metered path carries data) or "backup"
    reason: str
    buffer_s: float | None


def mptcp_endpoint_id(path: int) -> int:
    """The client's MPTCP endpoint id of emulated path `path` (netem/steps/mptcp.py numbers them
    from 1; the primary path has none: it carries the initial subflow)."""
    return path + 1


# A transport's lever on a path: (path index, held back?) -> None, or raises with the reason.
PathHolder = Callable[[int, bool], None]
# The player's events after a seq (-1: all), in any order; None when none can be read now.
EventsAfter = Callable[[int], Sequence["BaseEvent"] | None]


def set_endpoint_backup(netns: str | None, endpoint_id: int, backup: bool) -> None:
    """`ip mptcp endpoint change id N backup|nobackup` in `netns`: MP_PRIO on every subflow
    from that endpoint's address."""
    argv = ["ip", *(["-n", netns] if netns else []), "mptcp", "endpoint", "change", "id",
            str(endpoint_id), "backup" if backup else "nobackup"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UserError(f"`{' '.join(argv)}` failed: "
                        f"{(done.stderr or done.stdout).strip() or done.returncode}")


def mptcp_holder(netns: str | None) -> PathHolder:
    """Kernel MPTCP's lever: a held path's client endpoint is flagged backup."""
    return lambda path, held: set_endpoint_backup(netns, mptcp_endpoint_id(path), held)


def no_holder(path: int, held: bool) -> None:
    """The lever of a transport that has none (only `always` runs on it)."""
    raise UserError(f"path {path}: this transport cannot hold a path back")


@dataclass
class PathPolicyController:
    """Runs a policy for one session: one that adapts (`deadline`, `fast-start`) polls the
    player's events (`events(seq)`: those after the last it folded, e.g. from the collector's
    client) and the client's path counters
    (`counters()`) every `poll_s` and holds or releases its paths (`held`) by the transport's
    lever (`hold`); `always` and `backup` only keep the record. `failure` says why a toggle
    failed (the session then fails with it). On exit every held path is held again, as the
    session started it."""

    policy: PathPolicy
    held: Sequence[int]  # the paths it holds back (policy.held_paths: metered, or slower)
    hold: PathHolder = no_holder
    events: EventsAfter = lambda seq: None
    counters: Callable[[], list[dict[str, int]]] = list
    marks: DeadlineMarks = field(default_factory=DeadlineMarks)
    poll_s: float = 0.25
    toggles: list[ToggleEvent] = field(default_factory=list)
    failure: str | None = None
    view: PlayerView = field(default_factory=PlayerView)

    def __post_init__(self) -> None:
        # backup and deadline start with the metered paths held back (the profile's endpoint
        # flag); always leaves them as the profile set them up.
        self.using = not self.policy.starts_held
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()
        self._rate = RateEstimate()

    @contextlib.contextmanager
    def running(self) -> Iterator[PathPolicyController]:
        self._t0 = time.monotonic()
        if self.policy.adapts:
            self._thread = threading.Thread(target=self._loop, name="path-policy", daemon=True)
            self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._restore()

    def _restore(self) -> None:
        if not self.policy.starts_held or not self.using:
            return
        for path in self.held:
            with contextlib.suppress(UserError, OSError):  # the topology may be gone already
                self.hold(path, True)
        self.using = False

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.step()
            except Exception as exc:  # a toggle or a read that failed: the session says why
                self.failure = f"path policy {self.policy.name}: {exc}"
                return

    def step(self) -> Decision | None:
        """One poll: fold new events, measure, decide, toggle."""
        found = self.events(self.view.seen)
        if found:
            self.view.fold(found)
        self._rate.add(time.monotonic(), self.counters(), set(self.held))
        obs = Observation(self.view.buffer_s, self.view.started, self.view.segment_bytes,
                          self._rate.unmetered_bps(self.view.segment_bps),
                          self.view.previous_buffer_s)
        decision = self.policy.decide(self.using, obs, self.marks)
        if decision is not None:
            self.apply(decision)
        return decision

    def apply(self, decision: Decision) -> None:
        action = "nobackup" if decision.use_metered else "backup"
        for path in self.held:
            self.hold(path, not decision.use_metered)
            self.toggles.append(ToggleEvent(
                t_s=round(time.monotonic() - self._t0, 3), t_unix=round(time.time(), 3),
                path=path, action=action, reason=decision.reason, buffer_s=self.view.buffer_s))
        self.using = decision.use_metered

    def report(self) -> dict[str, Any]:
        return {"policy": self.policy.name, "held_paths": sorted(self.held),
                "marks": asdict(self.marks) if self.policy.adapts else None,
                "toggles": [asdict(t) for t in self.toggles], "failure": self.failure}


class RateEstimate:
    """The unmetered paths' rate while the player downloads: the last segment's download rate,
    trusted only while the unmetered paths carried (nearly) all the bytes the client received
    over the last few seconds, i.e. it was their rate; None otherwise (a segment that came
    partly over the metered path says little of the others, and scaling it by a byte share
    taken over another span underestimated it: a spurious join at 15 s of buffer)."""

    FREE_SHARE = 0.95

    WINDOW_S = 3.0

    def __init__(self) -> None:
        self.samples: list[tuple[float, int, int]] = []  # (t, unmetered rx, metered rx)

    def add(self, t: float, counters: list[dict[str, int]], metered: set[int]) -> None:
        if not counters:
            return
        free = sum(c.get("rx_bytes", 0) for i, c in enumerate(counters) if i not in metered)
        paid = sum(c.get("rx_bytes", 0) for i, c in enumerate(counters) if i in metered)
        self.samples.append((t, free, paid))
        while len(self.samples) > 2 and self.samples[1][0] < t - self.WINDOW_S:
            self.samples.pop(0)

    def unmetered_share(self) -> float | None:
        if len(self.samples) < 2:
            return None
        (_, f0, p0), (_, f1, p1) = self.samples[0], self.samples[-1]
        total = (f1 - f0) + (p1 - p0)
        return (f1 - f0) / total if total > 0 else None

    def unmetered_bps(self, segment_bps: float | None) -> float | None:
        share = self.unmetered_share()
        if segment_bps is None or share is None or share < self.FREE_SHARE:
            return None
        return segment_bps


def metered_figures(paths: Sequence[dict[str, Any]], metered: dict[int, float | None]
                    ) -> dict[str, float | None]:
    """metered_bytes (both directions on metered paths), metered_share (of all bytes the
    client's paths carried) and metered_cost (None when no metered path has a price) from a
    session's per-path byte counts (`paths`: index, rx_bytes, tx_bytes) and the metered paths'
    price per GB (index -> cost_per_gb or None)."""
    def carried(p: dict[str, Any]) -> int:
        return int(p.get("rx_bytes") or 0) + int(p.get("tx_bytes") or 0)

    total = sum(carried(p) for p in paths)
    paid = [p for p in paths if p.get("index") in metered]
    metered_bytes = sum(carried(p) for p in paid)
    priced = [p for p in paid if metered.get(p["index"]) is not None]
    cost = (sum(carried(p) / 1e9 * float(metered[p["index"]] or 0) for p in priced)
            if priced else None)
    return {"metered_bytes": metered_bytes,
            "metered_share": round(metered_bytes / total, 4) if total else None,
            "metered_cost": round(cost, 6) if cost is not None else None}


def check_for(policy: PathPolicy, transport: Any, profile: Any | None) -> None:
    """Refuses `policy` (a UserError naming why) before anything is built: a transport that
    cannot act on paths, a network with no path for it to hold."""
    if policy.acts and profile is not None and \
            profile.deployment.client.mptcp.path_manager == "userspace":
        raise UserError(f"path policy {policy.name}: it holds a path back through the "
                        "in-kernel path manager's endpoints, and this deployment's client runs "
                        "the userspace one: choose path_manager = \"kernel\" or the policy "
                        "always")
    held = policy.held_paths(profile) if profile is not None else []
    why = refusal(policy, transport.name, transport.path_policies, held)
    if why:
        raise UserError(why)
