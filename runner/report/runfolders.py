"""The run folders under a results folder, read for the run pages (runner/report/runpages.py): the
runs there, a run's conditions with their summary figures, and a trial's timeline.

Everything comes from the run folder's own files (layout.py): a run's figures and intervals are
the report's own (analysis.analyze over its trials, kept in memory until a trial changes), so
that the pages, `mpstream report` and its summary give the same numbers. Nothing is copied.

Only folders under the results folder are ever read: a run id or trial key is a plain name
(no separator, no leading dot), and a name that is a symbolic link, or whose folder resolves
anywhere else, is no run (`NotARun`), as if it did not exist.
"""

from __future__ import annotations

import math
import os
import re
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mpstream.qoe.stats import Summary
from mpstream.runner.layout import RUN_JSON, TRIAL_JSON, TRIALS, RunScenario, TrialData, read_json
from mpstream.runner.record import load_record

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,199}")
# Per-path throughput is drawn in bins of this many seconds (the samplers poll every 100 ms).
THROUGHPUT_BIN_S = 0.5


class NotARun(LookupError):
    """A run id or trial key that names no run folder (or trial) under the results folder."""


# --- what the pages and the API give (also their OpenAPI schemas) ---


class RunOut(BaseModel):
    """A run folder: its id (the folder's name), its scenario, when its first trial started,
    and how many of its trials finished, and finished ok."""

    model_config = ConfigDict(extra="forbid")
    id: str
    scenario: str
    description: str
    started: str | None
    trials: int
    ok: int
    failed: int
    planned: int


class RunsOut(BaseModel):
    """GET /api/runs"""

    model_config = ConfigDict(extra="forbid")
    runs: list[RunOut]


class FigureOut(BaseModel):
    """One metric of a condition over its ok trials: mean, sample sd and the 95% interval of
    the mean (null where n is too small to bound it), as the report has them: anytime-valid
    for a run that stopped when sure (`RunDetailOut.intervals`); units as in the report."""

    model_config = ConfigDict(extra="forbid")
    metric: str
    name: str
    unit: str
    n: int
    mean: float | None
    sd: float | None
    ci95_low: float | None
    ci95_high: float | None


class ConditionOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str  # the scenario's condition label (balanced, unbalanced, single, ...)
    group: str  # label[/player][/browser]...: the factors that vary in the run
    trials: int
    ok: int
    failed: int
    figures: list[FigureOut]


class TrialOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    condition: str
    group: str
    status: str
    reason: str
    transport: str | None
    started: str | None
    metrics: dict[str, float | None]


class RunDetailOut(BaseModel):
    """GET /api/runs/{run_id}: the run's conditions side by side, and its trials."""

    model_config = ConfigDict(extra="forbid")
    run: RunOut
    source: str  # where the figures came from: computed from the trials, as the report does
    intervals: str  # what the intervals are: "95% CI", or "anytime-valid 95% interval"
    conditions: list[ConditionOut]
    trial_list: list[TrialOut]


class PathEventOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    t_s: float
    path: int
    what: str
    detail: str = ""  # why (a path policy's reason for a toggle)


class TimelineOut(BaseModel):
    """GET /api/runs/{run_id}/trials/{key}/timeline: a trial over time, in seconds on the
    trial clock (the kernel samplers'), or on the page's clock when the two cannot be joined
    (`clock`). Points are [t_s, value]; rates in bit/s, levels in seconds."""

    model_config = ConfigDict(extra="forbid")
    key: str
    condition: str
    status: str
    reason: str
    transport: str | None
    clock: str  # "trial" or "page"
    paths: list[str]
    throughput_bps: list[list[list[float]]]  # per path: [t_s, bit/s] per bin
    buffer_s: list[list[float]]
    bitrate_bps: list[list[float]]  # the rendition playing, from each switch on
    segment_rate_bps: list[list[float]]  # each video segment's download rate, at its end
    stalls: list[list[float]]  # [start, end]
    path_events: list[PathEventOut]
    end_s: float


# --- finding run folders, and nothing else ---


def run_folder(results: Path, run_id: str) -> Path:
    """The folder of run `run_id` directly under `results`; NotARun for any other name."""
    return _child(Path(results), run_id, RUN_JSON)


def trial_folder(run_dir: Path, key: str) -> Path:
    """A finished trial's folder, trials/<key>/, of a run folder; NotARun for any other."""
    return _child(run_dir, f"{TRIALS}/{key}", TRIAL_JSON, name=key)


def _child(anchor: Path, relative: str, marker: str, name: str | None = None) -> Path:
    """anchor/relative when it holds `marker`, and neither it, nor a folder between it and the
    anchor, nor the marker is a symbolic link (which could lead anywhere)."""
    if not NAME.fullmatch(relative if name is None else name):
        raise NotARun(relative)
    path = anchor / relative
    if not (path / marker).is_file() or not _unlinked(anchor, path / marker):
        raise NotARun(relative)
    return path


def _unlinked(anchor: Path, path: Path) -> bool:
    """`path`, below `anchor`, is reached with no symbolic link on the way."""
    return path.resolve() == anchor.resolve() / path.relative_to(anchor)


def _trial_names(run_dir: Path) -> list[str]:
    """The run's finished trial folders, by name: plain folders with a trial.json."""
    trials = run_dir / TRIALS
    if not trials.is_dir() or not _unlinked(run_dir, trials):
        return []
    return [p.name for p in sorted(trials.iterdir()) if _is_trial(run_dir, p.name)]


def _is_trial(run_dir: Path, name: str) -> bool:
    try:
        trial_folder(run_dir, name)
    except NotARun:
        return False
    return True


def _no_links_out(folder: Path) -> None:
    """NotARun when anything in a trial folder, at any depth, is a symbolic link."""
    for top, dirs, files in os.walk(folder):
        if any(Path(top, entry).is_symlink() for entry in (*dirs, *files)):
            raise NotARun(folder.name)


def _trial_folders(run_dir: Path) -> list[Path]:
    """The run's finished trial folders; NotARun when a file in one is a link."""
    folders = [run_dir / TRIALS / name for name in _trial_names(run_dir)]
    for folder in folders:
        _no_links_out(folder)
    return folders


def _trials(run_dir: Path) -> list[TrialData]:
    """The run's finished trials in the order they ran, as layout.load_trials reads them, but
    only from plain trial folders (NotARun when a file in one is a link)."""
    out = []
    for folder in _trial_folders(run_dir):
        record = load_record(folder / TRIAL_JSON)
        if record is not None:
            out.append(TrialData(folder, record))
    out.sort(key=lambda t: (t.record.order, t.key))
    return out


# --- the list ---


def list_runs(results: Path) -> list[RunOut]:
    """The run folders directly under `results`, newest first."""
    results = Path(results)
    if not results.is_dir():
        return []
    out = []
    for entry in results.iterdir():
        try:
            out.append(run_info(run_folder(results, entry.name)))
        except NotARun:
            continue
    out.sort(key=lambda r: (r.started or "", r.id), reverse=True)
    return out


def _trial_jsons(run_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """(folder name, trial record as JSON) of each finished trial."""
    out = []
    for name in _trial_names(run_dir):
        data = read_json(run_dir / TRIALS / name / TRIAL_JSON)
        if isinstance(data, dict):
            out.append((name, data))
    return out


def trial_keys(run_dir: Path) -> list[str]:
    """The run's finished trials, in the order they ran."""
    trials = _trial_jsons(run_dir)
    trials.sort(key=lambda t: (t[1].get("order", 0), t[0]))
    return [name for name, _ in trials]


def run_info(run_dir: Path) -> RunOut:
    run = read_json(run_dir / RUN_JSON) or {}
    trials = [data for _, data in _trial_jsons(run_dir)]
    started = min((t["started_at"] for t in trials if t.get("started_at")), default=None)
    if started is None:
        started = datetime.fromtimestamp((run_dir / RUN_JSON).stat().st_mtime, UTC).isoformat()
    ok = sum(1 for t in trials if t.get("status") == "ok")
    ran = RunScenario.of(run)
    return RunOut(id=run_dir.name, scenario=str(ran.name or run_dir.name),
                  description=" ".join(ran.description.split()),
                  started=started, trials=len(trials), ok=ok, failed=len(trials) - ok,
                  planned=len(run.get("plan") or []))


# --- a run's conditions ---


def run_detail(run_dir: Path) -> RunDetailOut:
    """The run's conditions with their figures, as the report's analysis gives them (kept
    while no trial changes)."""
    from mpstream.runner.report.analysis import interval_name

    # The folders are checked on every request, kept figures or not: a link put in one since
    # makes the run unreadable at once.
    signature = _signature(run_dir, _trial_folders(run_dir))
    conditions, trials = _computed(run_dir, signature)
    return RunDetailOut(run=run_info(run_dir), source="computed from the trials",
                        intervals=interval_name(read_json(run_dir / RUN_JSON) or {}),
                        conditions=conditions, trial_list=trials)


def _signature(run_dir: Path, trial_folders: list[Path]) -> tuple[tuple[str, int], ...]:
    """What the computed figures depend on: each trial record and when it was written, and
    run.json (whether the run stopped when sure decides its intervals)."""
    return tuple((str(path.relative_to(run_dir)), path.stat().st_mtime_ns)
                 for path in (run_dir / RUN_JSON, *(f / TRIAL_JSON for f in trial_folders)))


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


@lru_cache(maxsize=8)
def _computed(run_dir: Path, signature: tuple[tuple[str, int], ...]
              ) -> tuple[list[ConditionOut], list[TrialOut]]:
    """The report's per-trial figures and per-group summaries (analysis.analyze) of the run's
    plain trial folders, cached by the files they come from (`signature`)."""
    from mpstream.errors import UserError
    from mpstream.runner.report.analysis import analyze

    try:
        a = analyze(run_dir, _trials(run_dir))
    except UserError:  # no finished trial yet
        return [], []
    conditions = []
    for group in a.groups:
        ok = len(a.per_trial.get(group, []))
        failed = sum(1 for f in a.failed if f["group"] == group)
        conditions.append(ConditionOut(
            label=group.condition, group=str(group), trials=ok + failed, ok=ok, failed=failed,
            figures=[_figure(m, a.summaries[group][m]) for m in a.metric_order]))
    trials = [_trial_out(rec, str(a.group_of_trial[rec.key]), a.by_key.get(rec.key, {}))
              for rec in a.trials]
    return conditions, trials


def _figure(metric: str, s: Summary) -> FigureOut:
    from mpstream.runner.metrics.metric import metric_label

    name, unit = metric_label(metric)
    return FigureOut(metric=metric, name=name, unit=unit, n=s.n, mean=_finite(s.mean),
                     sd=_finite(s.sd), ci95_low=_finite(s.ci_low), ci95_high=_finite(s.ci_high))


def _trial_out(rec: TrialData, group: str, figures: dict[str, Any]) -> TrialOut:
    r = rec.record
    return TrialOut(key=rec.key, condition=rec.condition, group=group, status=r.status,
                    reason=r.reason or r.player_failure or "", transport=r.transport,
                    started=r.started_at,
                    metrics={m: _finite(v) for m, v in figures.items() if m != "key"})


# --- a trial's timeline ---


def trial_timeline(run_dir: Path, key: str) -> TimelineOut:
    """What the trial page draws: per-path throughput from the client's kernel samples, the
    buffer level, the bitrate, each segment's download rate and the stalls from the player's
    events, and the paths' events (the profile's timed failures, the path policy's toggles)."""
    from mpstream.runner.metrics.common import binned_by_path
    from mpstream.runner.metrics.evidence import page_clock
    from mpstream.server.dashboard import timeline as session_timeline

    folder = trial_folder(run_dir, key)
    _no_links_out(folder)
    record = load_record(folder / TRIAL_JSON)
    if record is None:
        raise NotARun(key)
    rec = TrialData(folder, record)
    events = rec.events
    page = session_timeline(events) if events else None
    page_s = page_clock(rec)
    first_ms = min((e["t_ms"] for e in events), default=0.0)
    shift = page_s(first_ms) if events else 0.0
    clock = "trial" if shift is not None else "page"
    shift = shift or 0.0

    def moved(points: list[list[float]]) -> list[list[float]]:
        return [[round(t + shift, 3), v] for t, v in points]

    names = [p.name for p in record.paths]
    bins = binned_by_path(rec.path_samples("client"), rec.receiver_column, THROUGHPUT_BIN_S)
    throughput = []
    for p in range(len(names)):
        by_bin = bins.get(p, {})
        span = range(min(by_bin), max(by_bin) + 1) if by_bin else range(0)
        throughput.append([[round((b + 0.5) * THROUGHPUT_BIN_S, 3),
                            by_bin.get(b, 0.0) * 8 / THROUGHPUT_BIN_S] for b in span])
    path_events = _path_events(rec, names) if clock == "trial" else []
    ends = [page["end"] + shift] if page else []
    ends += [pts[-1][0] for pts in throughput if pts]
    return TimelineOut(
        key=rec.key, condition=rec.condition, status=record.status,
        reason=record.reason or record.player_failure or "", transport=record.transport,
        clock=clock, paths=names, throughput_bps=throughput,
        buffer_s=moved(page["buffer"]) if page else [],
        bitrate_bps=moved(page["bitrate"]) if page else [],
        segment_rate_bps=moved(page["rates"]) if page else [],
        stalls=moved(page["stalls"]) if page else [],
        path_events=path_events, end_s=round(max(ends, default=0.0), 3))


def _event_detail(event: dict[str, Any]) -> str:
    """What a profile's path event set, beside what it did: "downlink, rate 2000000"."""
    parts = []
    for key, value in event.items():
        if key in ("at_s", "path", "action") or value is None:
            continue
        if isinstance(value, dict):
            parts += [f"{k} {v}" for k, v in value.items() if v is not None]
        else:
            parts.append(str(value) if key == "dir" else f"{key} {value}")
    return ", ".join(parts)


def _path_events(rec: TrialData, names: list[str]) -> list[PathEventOut]:
    """The profile's timed path events and the path policy's toggles on the trial clock."""
    t0, started = rec.t0_unix, rec.record.events_started_unix
    out = []
    if t0 is not None and started is not None:
        for e in rec.profile.get("events") or []:
            ref = e.get("path")
            path = names.index(ref) if isinstance(ref, str) and ref in names else ref
            if isinstance(path, int) and e.get("at_s") is not None:
                detail = _event_detail(e)
                out.append(PathEventOut(t_s=round(started + float(e["at_s"]) - t0, 3),
                                        path=path, what=str(e.get("action", "event")),
                                        detail=detail))
    if t0 is not None:
        for tg in rec.record.path_policy_toggles:
            what = "joins" if tg.action == "nobackup" else "leaves"
            if tg.buffer_s is not None:
                what += f" at {tg.buffer_s:.1f} s buffered"
            out.append(PathEventOut(t_s=round(tg.t_unix - t0, 3), path=tg.path,
                                    what=f"policy: {what}", detail=tg.reason))
    return sorted(out, key=lambda e: e.t_s)
