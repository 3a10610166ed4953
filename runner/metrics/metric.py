"""The per-trial figures' declarations: each module that computes figures declares each of them
once, beside its code, with the label and unit the report, the tables and the run pages show
(`declare`; a `Metric` is mpstream/metric.py's, so that the session's figures, which the core
declares, are registered here as they are). A per-path figure is declared by the part of its
name after `path<i>_`.

A workload says in which order its own figures are shown (`Workload.shown`); the others follow
in the order they were declared, then any undeclared ones by name."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from mpstream.metric import Metric
from mpstream.registry import Registry
from mpstream.runner.workloads import workload_kinds

_TRIAL: Registry[Metric] = Registry.of_module("figure", lambda m: m.name)
_PER_PATH: Registry[Metric] = Registry.of_module("per-path figure", lambda m: m.name)


def declare(*metrics: Metric) -> tuple[Metric, ...]:
    for metric in metrics:
        table = _PER_PATH if metric.per_path else _TRIAL
        if metric.name not in table:
            table.register(metric)
        elif table.get(metric.name) != metric:
            raise ValueError(f"figure {metric.name!r} is declared twice, differently")
    return metrics


def _declared() -> None:
    # The workloads' modules import every module that declares figures: loading them (once)
    # makes every declaration known.
    workload_kinds()


def metric_label(name: str) -> tuple[str, str]:
    """A figure's label and unit (per path: "…, path 1"); an undeclared one: its name."""
    _declared()
    if name in _TRIAL:
        return _TRIAL.get(name).label, _TRIAL.get(name).unit
    if name.startswith("path") and "_" in name:
        head, rest = name.split("_", 1)
        if rest in _PER_PATH:
            return f"{_PER_PATH.get(rest).label}, path {head[4:]}", _PER_PATH.get(rest).unit
        return f"{rest}, path {head[4:]}", ""
    return name, ""


def metric_heading(name: str) -> str:
    """A figure's label with its unit in brackets, as tables and axes head it."""
    label, unit = metric_label(name)
    return f"{label} ({unit})" if unit else label


def is_declared(name: str) -> bool:
    """A figure some module computes (per path: `path<i>_` and a declared per-path name)."""
    _declared()
    if name in _TRIAL:
        return True
    head, _, rest = name.partition("_")
    return head.startswith("path") and head[4:].isdigit() and rest in _PER_PATH


def declared_names() -> list[str]:
    _declared()
    return sorted(_TRIAL.names())


def declared_metrics() -> list[Metric]:
    """Every declared figure in the order declared: the whole-trial ones, then the per-path
    ones (`mpstream list metrics`)."""
    _declared()
    return [*_TRIAL.values(), *_PER_PATH.values()]


def metric_order(present: Collection[str], first: Sequence[Metric] = ()) -> list[str]:
    """The figures in `present` in the order they are shown: `first` (a workload's own), the
    other declared whole-trial ones, then the rest (per path) by name."""
    _declared()
    order = list(dict.fromkeys(m.name for m in [*first, *_TRIAL.values()] if not m.per_path
                               and m.name in present))
    return order + sorted(set(present) - set(order))
