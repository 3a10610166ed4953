"""Golden runs: two small run folders written by `mpstream run` before the trial became typed
parts (a dash.js run over unbalanced MPTCP and single-path TCP, and an iperf3 run), with the
CSV files `mpstream report` made of them then. The report of today must give the same rows:
the trial record's migration, the one reading of a trial's data and the report's metrics all
stand behind these files. One definition changed since, on purpose: a path's smoothed RTT
counts each poll by the bytes sent since the one before (runner/metrics/common.py says why);
the files hold those figures, every other one as it was."""

import csv
import shutil
from pathlib import Path

import pytest

from mpstream.runner.report.build import build_report

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "runs"
CSVS = ("conditions.csv", "trials.csv", "segments.csv")
# Metrics the report gained after these files were written: left out of the comparison, every
# other column and row must be as it was.
ADDED_SINCE = {"down_switches", "bitrate_utilization", "transport", "scheduler", "path_policy",
               "path0_tail_share", "path1_tail_share", "deployment", "first_download_ms"}


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as fh:
        return list(csv.reader(fh))


def _without_added(rows: list[list[str]]) -> list[list[str]]:
    if rows and "metric" in rows[0]:  # conditions.csv: one row per metric
        col = rows[0].index("metric")
        return [r for r in rows if r[col] not in ADDED_SINCE]
    keep = [i for i, name in enumerate(rows[0]) if name not in ADDED_SINCE] if rows else []
    return [[r[i] for i in keep] for r in rows]


@pytest.mark.parametrize("run", ["video", "iperf"])
@pytest.mark.parametrize("name", CSVS)
def test_report_of_a_run_from_before_the_refactor_is_unchanged(tmp_path, run, name):
    run_dir = tmp_path / run
    shutil.copytree(FIXTURES / run, run_dir)
    report = build_report(run_dir, tmp_path / "report")
    expected = _rows(FIXTURES / f"{run}-expected" / name)
    got = _without_added(_rows(report.out_dir / name))
    assert got[0] == expected[0], f"{name}: columns changed"
    assert got == expected
