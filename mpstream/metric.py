"""A figure's declaration: its name, the label and unit that the tables, the report and the
run pages show with it, and whether it is per path. The core's figures declare theirs beside
their code (a session's: `SessionMetrics`' fields in qoe/metrics.py; the QoE scores:
qoe/scores.py); the runner keeps the per-trial registry (runner/metrics/metric.py's
`declare`), where the workloads declare the session's figures they report."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str  # a per-path figure's: what follows `path<i>_` (rtt_ms for path0_rtt_ms)
    label: str
    unit: str = ""
    per_path: bool = False
