"""Where a trial's time goes: a clock that the trial starts and that the parts it calls mark as
they pass the steps of a trial (network up, servers up, browser and page ready, playback, ...).
Each mark closes a phase: the seconds since the previous mark go to the phase it names, so the
phases add up to the time from the clock's start to its last mark.

The clock is found through a context variable, so that a part deep below the trial (the player
session) marks its phases without every layer between passing the clock on; outside a trial no
clock is running and a mark does nothing. A command that runs a trial and shows its progress
(`mpstream play`) is told of each mark as it is made (`told`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar

# The steps of a trial, in order. A phase a trial passes more than once (teardown: the servers,
# then the network) adds up.
PREPARED = "prepared"  # the site and transport chosen, the record begun
NETWORK_UP = "network_up"  # namespaces, links and emulators (or the real paths checked)
SERVERS_UP = "servers_up"  # nginx and the collector, and the browser started beside them
WATCHING = "watching"  # the samplers (and captures) watching the paths started
BROWSER_UP = "browser_up"  # the browser started in the client's namespace
PAGE_READY = "page_ready"  # the player page loaded
PLAYBACK = "playback"  # from the page loaded to the session's end (startup delay included)
RESULTS = "results"  # the collector's summary, the proofs and counters, the files written
TORN_DOWN = "torn_down"  # the browser, servers and network gone
ORDER = (PREPARED, NETWORK_UP, SERVERS_UP, WATCHING, BROWSER_UP, PAGE_READY, PLAYBACK, RESULTS,
         TORN_DOWN)

_CURRENT: ContextVar[PhaseClock | None] = ContextVar("phase_clock", default=None)
_LISTENER: ContextVar[Callable[[str], None] | None] = ContextVar("phase_listener", default=None)


class PhaseClock:
    """Seconds per phase, in the order the phases first closed."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self.seconds: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        """Closes `phase` now: the time since the previous mark is added to it."""
        now = time.monotonic()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + (now - self._last)
        self._last = now

    def rounded(self) -> dict[str, float]:
        return {name: round(s, 3) for name, s in self.seconds.items()}


@contextlib.contextmanager
def phase_clock() -> Iterator[PhaseClock]:
    """A clock started now that `mark` reaches until the block ends."""
    clock = PhaseClock()
    token = _CURRENT.set(clock)
    try:
        yield clock
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def told(listener: Callable[[str], None]) -> Iterator[None]:
    """`listener(phase)` after each mark made in the block."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def mark(phase: str) -> None:
    """Closes `phase` on the running clock (nothing outside a trial), then tells the listener."""
    clock = _CURRENT.get()
    if clock is not None:
        clock.mark(phase)
    listener = _LISTENER.get()
    if listener is not None:
        listener(phase)
