"""Trial records and trial data for unit tests that need one without running a trial."""

from pathlib import Path
from typing import Any

from mpstream.runner.layout import TrialData
from mpstream.runner.record import TrialRecord
from mpstream.runner.scenario import Condition


def trial_record(key: str = "r00-x-dashjs", label: str = "x", **fields: Any) -> TrialRecord:
    defaults: dict[str, Any] = {
        "round": 0, "order": 0, "status": "ok", "started_at": "2026-11-22T12:00:00+00:00",
        "condition": Condition(label=label, profile="thesis-bandwidth-balanced")}
    return TrialRecord(key=key, **(defaults | fields))


def trial_data(dir: Path, key: str = "r00-x-dashjs", label: str = "x", *,
               files: dict[str, Any] | None = None, **fields: Any) -> TrialData:
    """A trial folder `dir` whose record has `fields`; `files` (events, session, profile, …)
    stand in for the folder's files."""
    return TrialData(Path(dir), trial_record(key, label, **fields), **(files or {}))
