"""What long work costs in machine time, said before it starts (`run`, `tune`, `reproduce` and
their `--dry-run`): its trials, each the scenario's duration plus the overhead a trial was
measured to take (or, for a published run repeated as it was, that run's own time a trial)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Seconds a trial takes beyond its scenario's duration, the run's hand-over between trials
# included: network, servers and browser up and down, the page's load, the session's last
# events drained. The median over the runs in docs/data made on one machine of their span
# (first trial's start to last trial's end) a trial less their duration: 1.4 s for short
# sessions of one player, 12.8 s with a live stream or competing players.
# tests/unit/test_cost.py measures it again from docs/data.
TRIAL_OVERHEAD_S = 4.6


@dataclass(frozen=True)
class Cost:
    """`trials` trials of `seconds_a_trial` each; `basis` says how a trial's time is known."""

    trials: int
    seconds_a_trial: float
    basis: str

    @classmethod
    def of_trials(cls, trials: int, duration_s: float) -> Cost:
        return cls(trials, duration_s + TRIAL_OVERHEAD_S,
                   f"{duration_s:g} s a session + {TRIAL_OVERHEAD_S:g} s measured overhead "
                   "a trial")

    @property
    def seconds(self) -> float:
        return self.trials * self.seconds_a_trial

    def __str__(self) -> str:
        return (f"about {machine_time(self.seconds)} of machine time: {self.trials} trial(s) × "
                f"{self.seconds_a_trial:.1f} s ({self.basis})")

    def as_json(self) -> dict[str, Any]:
        return {"trials": self.trials, "seconds_a_trial": round(self.seconds_a_trial, 1),
                "machine_seconds": round(self.seconds), "basis": self.basis}


def machine_time(seconds: float) -> str:
    """52 s, 14 min, 3.2 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
