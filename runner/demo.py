"""`mpstream demo`: the thesis bandwidth experiment in a few minutes.

It runs the shipped scenario `demo` (runner/scenarios/demo.toml): the sample video encoded once
(cached), then one trial each of balanced MPTCP, unbalanced MPTCP and single-path TCP, then the
report, whose comparison table is printed here.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from mpstream.paths import REPO_ROOT
from mpstream.runner.report.build import build_report
from mpstream.runner.report.table import print_tables
from mpstream.runner.run import failed_trials, run_scenario, trials_failed
from mpstream.runner.scenario import SCENARIOS_DIR, load_scenario

DEMO_SCENARIO = SCENARIOS_DIR / "demo.toml"


def run_demo(out_dir: Path | None, console: Console) -> Path:
    started = time.monotonic()
    scenario = load_scenario(DEMO_SCENARIO)
    if out_dir is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        out_dir = REPO_ROOT / "results" / f"demo-{stamp}"
    console.print(f"[bold]mpstream demo[/]: {' '.join(scenario.description.split())}",
                  highlight=False)
    statuses = run_scenario(scenario, out_dir, scenario_path=DEMO_SCENARIO, console=console)
    rep = build_report(out_dir)
    print_tables(rep, console)
    share = {g: rep.summaries[g].get("download_share") for g in rep.groups}
    for g, s in share.items():
        if s is not None and s.n:
            console.print(f"{g}: mean per-segment download rate = {s.mean:.0%} of the sum of "
                          "its path rates", highlight=False)
    console.print(f"HTML report: [bold]{rep.html}[/]", highlight=False)
    console.print(f"demo took {time.monotonic() - started:.0f} s", highlight=False)
    failed = failed_trials(out_dir, statuses)
    if failed:
        raise trials_failed(out_dir, failed, len(statuses))
    return rep.html
