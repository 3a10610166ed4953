"""The proxy's clock: monotonic time for its decisions, Unix time for its statistics (the trial
clock's are in Unix time)."""

from __future__ import annotations

import time


def now() -> float:
    return time.monotonic()


def unix(t_monotonic: float) -> float:
    """A monotonic time as Unix time."""
    return round(time.time() - (time.monotonic() - t_monotonic), 6)
