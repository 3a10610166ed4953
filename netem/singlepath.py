"""The single paths a user without multipath has: the baselines multipath is measured against.

A condition says `single_path = "NAME"` and plays a one-path transport (TCP unless it names
another) over the path NAME picks on its network:

- `best`: the path a phone uses when it may use one: its WiFi, i.e. the unmetered path with
  the highest mean downlink rate (on a network with no metered path, the fastest path);
- `cellular`: the metered path (the network must have exactly one);
- `sum`: one path carrying what all paths carry together (on the best path's delay and queue,
  at the sum of the paths' rates in each direction): the capacity multipath could reach at best.
  Over trace pairs (netem/tracepairs.py) it is the two traces' sum, opportunity by opportunity;
  on a network of traces without pairs it is refused (two traces have no fixed sum).

The path is decided on the condition's own network, once, as the condition resolves; over trace
pairs that network keeps its WiFi (unmetered) and cellular (metered) paths, so `best` is the
WiFi in every pair, as a phone's choice would be: it cannot know which path the next minute
favours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from mpstream.netem.profile import Profile

Direction = Literal["uplink", "downlink"]
DIRECTIONS: tuple[Direction, Direction] = ("uplink", "downlink")


def _rate(profile: Profile, index: int, direction: Direction) -> float:
    rate = profile.link(index, direction).mean_bps()
    return float("inf") if rate is None else rate


class SinglePath:
    """How a condition's one path is chosen on its network (`path`), and what else changes on
    it (`overrides`: dotted profile keys, as a condition's `set`)."""

    name: ClassVar[str]
    summary: ClassVar[str]
    # Over trace pairs its path carries the pair's sum (netem/tracepairs.py `with_pair`).
    carries_sum: ClassVar[bool] = False

    def path(self, profile: Profile) -> int:
        raise NotImplementedError

    def overrides(self, profile: Profile) -> dict[str, Any]:
        return {"tcp_path": self.path(profile)}


class Best(SinglePath):
    name = "best"
    summary = ("TCP on the best single path, the one a phone uses: its unmetered path with the "
               "highest mean downlink rate (WiFi)")

    def path(self, profile: Profile) -> int:
        free = [i for i, p in enumerate(profile.paths) if not p.metered]
        return max(free, key=lambda i: (_rate(profile, i, "downlink"), -i))


class Cellular(SinglePath):
    name = "cellular"
    summary = "TCP on the cellular path: the network's one metered path"

    def path(self, profile: Profile) -> int:
        metered = [i for i, p in enumerate(profile.paths) if p.metered]
        if len(metered) != 1:
            raise ValueError(f"single_path = \"cellular\" plays the network's one metered path "
                             f"(`metered = true`), and profile {profile.name!r} has "
                             f"{len(metered)}")
        return metered[0]


class Sum(Best):
    name = "sum"
    summary = ("TCP on one path of the paths' summed capacity (the best path's delay and "
               "queue): what multipath could reach at best")
    carries_sum = True

    def overrides(self, profile: Profile) -> dict[str, Any]:
        index = self.path(profile)
        out: dict[str, Any] = {"tcp_path": index}
        for direction in DIRECTIONS:
            links = [profile.link(i, direction) for i in range(len(profile.paths))]
            if any(link.trace is not None for link in links):
                raise ValueError("single_path = \"sum\" on paths of traces: two traces have no "
                                 "fixed sum; give the scenario a pair set (`pairs`), whose "
                                 "pairs carry their sum, or paths of fixed rates")
            if any(link.rate_bps is None for link in links):
                raise ValueError("single_path = \"sum\": an unlimited path has no sum")
            out[f"paths.{index}.{direction}.rate"] = sum(link.rate_bps or 0 for link in links)
        return out


SINGLE_PATH_TYPES: dict[str, type[SinglePath]] = {
    cls.name: cls for cls in (Best, Cellular, Sum)}
SINGLE_PATHS: dict[str, str] = {name: cls.summary for name, cls in SINGLE_PATH_TYPES.items()}


def known_single_path(name: str | None) -> str | None:
    """`name` (or None) when it is one; a ValueError naming them, for a condition's validator."""
    if name is not None and name not in SINGLE_PATHS:
        raise ValueError(f"{name!r} is no single path: choose one of "
                         f"{', '.join(SINGLE_PATHS)} (docs/mobile.md)")
    return name


def single_path_named(name: str) -> SinglePath:
    known_single_path(name)
    return SINGLE_PATH_TYPES[name]()
