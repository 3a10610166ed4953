"""Trace pairs: a phone's WiFi and cellular paths as one sample of the world, many of them.

A pair is a made-up WiFi trace (netem/traces.py `wifi_like`: a shape, a good rate and a seed)
and a window of a published cellular trace that starts at an offset (`window`), both of one
length, the pair set's `window_s`. A pair set is a small TOML file (netem/pairs/NAME.toml, or
any file) that says how to draw its pairs, and a seed: the cellular traces and how many start
offsets of each, the WiFi shapes and the range of the WiFi's good rate. The pairs are drawn
from the seed, so the set is the same on every machine, and no trace is copied into the
repository (the cellular ones are GPL-3: `mpstream traces fetch`).

A scenario names a set (`pairs = "NAME"`); each trial then plays one pair, whose traces are
written into a temporary folder for the trial (`TracePair.write`) and put on the condition's
network (`with_pair`): the WiFi trace on its unmetered path, the cellular one on its metered
path, and on a condition that plays the two paths' sum on one path, their sum there.
"""

from __future__ import annotations

import functools
import random
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mpstream.errors import UserError
from mpstream.netem import traces

if TYPE_CHECKING:
    from mpstream.netem.profile import Profile

PAIRS_DIR = Path(__file__).parent / "pairs"
DIRECTIONS = ("down", "up")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WifiTrace(_Frozen):
    """A made-up WiFi link: its shape (traces.WIFI_SHAPES), its good rate and its seed."""

    shape: str
    rate_bps: float = Field(gt=0)
    seed: int

    def stamps(self, direction: str, seconds: float) -> list[int]:
        # The uplink is the same shape (the user walks both ways) with its own fading.
        return traces.wifi_like(self.shape, self.rate_bps, seconds, self.seed,
                                fading=DIRECTIONS.index(direction))


class CellularTrace(_Frozen):
    """A published cellular trace played from `offset_s` on."""

    trace: str
    offset_s: int = Field(ge=0)

    def stamps(self, direction: str, seconds: float) -> list[int]:
        found = traces.find(self.trace, direction)
        if found is None:
            raise UserError(traces.not_found_message(self.trace))
        whole = [int(x) for x in found.read_text().split()]
        return traces.window(whole, self.offset_s * 1000, round(seconds * 1000))


class PairFiles(NamedTuple):
    """Where a pair's traces were written: each a Mahimahi name (NAME.down and NAME.up)."""

    wifi: Path
    cellular: Path
    sum: Path


class TracePair(_Frozen):
    """One WiFi trace and one cellular window of `window_s` seconds, and their name."""

    name: str
    wifi: WifiTrace
    cellular: CellularTrace
    window_s: float

    def stamps(self, direction: str) -> dict[str, list[int]]:
        """The pair's traces in one direction: wifi, cellular and their sum."""
        wifi = self.wifi.stamps(direction, self.window_s)
        cellular = self.cellular.stamps(direction, self.window_s)
        return {"wifi": wifi, "cellular": cellular, "sum": traces.merged(wifi, cellular)}

    def write(self, folder: Path) -> PairFiles:
        folder.mkdir(parents=True, exist_ok=True)
        for direction in DIRECTIONS:
            for what, stamps in self.stamps(direction).items():
                traces.write(folder / f"{what}.{direction}", stamps)
        return PairFiles(folder / "wifi", folder / "cellular", folder / "sum")

    def statistics(self, gap_ms: int = 500) -> dict[str, float]:
        """Each downlink trace's mean (Mbit/s), the coefficient of variation of its rate second
        by second, and its outage time (s in gaps of `gap_ms` or more) over the window."""
        out: dict[str, float] = {}
        for what, stamps in self.stamps("down").items():
            stats = traces.rate_statistics(stamps)
            out[f"{what}_mean_mbps"] = stats["mean_bps"] / 1e6
            out[f"{what}_cov"] = stats["cov"]
            out[f"{what}_outage_s"] = traces.outage_s(stamps, gap_ms)
        return out


class CellularDraw(_Frozen):
    trace: str
    offsets: int = Field(ge=1, le=100)

    @field_validator("trace")
    @classmethod
    def _published_with_a_length(cls, name: str) -> str:
        known = traces.PUBLISHED.get(name)
        if known is None or known.seconds is None:
            usable = [n for n, t in traces.PUBLISHED.items() if t.seconds is not None]
            raise ValueError(f"{name!r}: a pair's cellular trace is a published trace whose "
                             f"length is known, one of {', '.join(usable)}")
        return name


class PairSetSpec(_Frozen):
    """A pair set's file: how its pairs are drawn."""

    description: str = ""
    seed: int = 1
    window_s: float = Field(default=75.0, gt=0, le=3600)
    wifi_shapes: list[str] = Field(min_length=1)
    wifi_rate_mbit: tuple[int, int] = (6, 20)
    cellular: list[CellularDraw] = Field(min_length=1)

    @field_validator("wifi_shapes")
    @classmethod
    def _known_shapes(cls, shapes: list[str]) -> list[str]:
        unknown = [s for s in shapes if s not in traces.WIFI_SHAPES]
        if unknown:
            raise ValueError(f"no WiFi shape {', '.join(unknown)}: choose among "
                             f"{', '.join(traces.WIFI_SHAPES)}")
        return shapes

    @field_validator("wifi_rate_mbit")
    @classmethod
    def _ordered(cls, rates: tuple[int, int]) -> tuple[int, int]:
        if not 0 < rates[0] <= rates[1]:
            raise ValueError("give [low, high] Mbit/s, 0 < low <= high")
        return rates


class PairSet(_Frozen):
    """A pair set's pairs, drawn (`draw`)."""

    name: str
    description: str = ""
    window_s: float
    pairs: tuple[TracePair, ...]

    def named(self, name: str) -> TracePair:
        for pair in self.pairs:
            if pair.name == name:
                return pair
        raise UserError(f"pair set {self.name!r} has no pair {name!r} (`mpstream traces pairs "
                        f"{self.name}` lists them)")


def short_name(trace: str) -> str:
    """A published trace's name as a pair's name holds it: Verizon-LTE-short -> verizon-lte."""
    return trace.lower().removesuffix("-2016").removesuffix("-short").replace("-driving",
                                                                                 "-drive")


def draw(name: str, spec: PairSetSpec) -> PairSet:
    """The set's pairs from its seed: the offsets of each cellular trace (whole seconds within
    its length), the WiFi shapes spread evenly over the pairs in a shuffled order, and each
    pair's WiFi rate and seed."""
    rng = random.Random(f"pairs/{spec.seed}")
    windows = []
    for draw_ in spec.cellular:
        length = traces.PUBLISHED[draw_.trace].seconds or 0.0
        offsets = sorted(rng.sample(range(int(length)), min(draw_.offsets, int(length))))
        windows += [CellularTrace(trace=draw_.trace, offset_s=o) for o in offsets]
    shapes = [spec.wifi_shapes[i % len(spec.wifi_shapes)] for i in range(len(windows))]
    rng.shuffle(shapes)
    pairs = []
    for n, (cellular, shape) in enumerate(zip(windows, shapes, strict=True), start=1):
        wifi = WifiTrace(shape=shape, rate_bps=rng.randint(*spec.wifi_rate_mbit) * 1e6,
                         seed=rng.randrange(2**31))
        pairs.append(TracePair(
            name=f"p{n:02d}-{shape}-{short_name(cellular.trace)}-{cellular.offset_s}s",
            wifi=wifi, cellular=cellular, window_s=spec.window_s))
    return PairSet(name=name, description=spec.description, window_s=spec.window_s,
                   pairs=tuple(pairs))


def pair_set_names() -> list[str]:
    """The shipped pair sets (netem/pairs/NAME.toml)."""
    return sorted(p.stem for p in PAIRS_DIR.glob("*.toml"))


def pair_set_file(ref: str, base_dir: Path | None = None) -> Path:
    """The file of pair set `ref`: a file (beside the scenario first), else a shipped set."""
    for candidate in ([base_dir / ref] if base_dir else []) + [Path(ref),
                                                                PAIRS_DIR / f"{ref}.toml"]:
        if candidate.is_file():
            return candidate.resolve()
    raise UserError(f"no pair set {ref!r}: not a file, and not one of: "
                    f"{', '.join(pair_set_names()) or '(none)'}")


def load_pair_set(ref: str, base_dir: Path | None = None) -> PairSet:
    """The pair set a scenario names (a shipped set's name, or a TOML file), drawn."""
    path = pair_set_file(ref, base_dir)
    return _load(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _load(path: Path, _mtime: int) -> PairSet:
    try:
        spec = PairSetSpec.model_validate(tomllib.loads(path.read_text()))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"pair set {path}: not valid TOML: {exc}") from None
    except ValidationError as exc:
        said = "; ".join(f"{'.'.join(map(str, e['loc']))}: "
                         f"{e['msg'].removeprefix('Value error, ')}" for e in exc.errors())
        raise UserError(f"pair set {path}: {said}") from None
    return draw(path.stem, spec)


def pair_paths(profile: Profile) -> tuple[int, int]:
    """The (WiFi, cellular) paths of a network a pair plays on: its one unmetered path and its
    one metered path; any other network is refused."""
    metered = [i for i, p in enumerate(profile.paths) if p.metered]
    free = [i for i, p in enumerate(profile.paths) if not p.metered]
    if len(metered) != 1 or len(free) != 1:
        raise UserError(f"profile {profile.name!r}: a trace pair plays on two paths, one of "
                        "them metered (cellular, `metered = true`) and one not (WiFi); it has "
                        f"{len(free)} unmetered and {len(metered)} metered")
    return free[0], metered[0]


def with_pair(profile: Profile, files: PairFiles, sum_on: int | None = None) -> Profile:
    """The network with the pair's traces in place of its paths' rates or traces: WiFi on the
    unmetered path, cellular on the metered one, and the two paths' sum on path `sum_on` (the
    one path of a condition that plays their sum)."""
    wifi, cellular = pair_paths(profile)
    put = {wifi: files.wifi, cellular: files.cellular}
    if sum_on is not None:
        put[sum_on] = files.sum
    paths = list(profile.paths)
    for index, base in put.items():
        spec = paths[index]
        data = spec.model_dump(exclude_unset=True, exclude={"rate"})
        for side in ("uplink", "downlink"):
            # A direction's own rate or trace would win over the pair's trace.
            if data.get(side):
                data[side] = {k: v for k, v in data[side].items() if k not in ("rate", "trace")}
        paths[index] = type(spec).model_validate({**data, "trace": str(base)})
    return profile.model_copy(update={"paths": paths})
