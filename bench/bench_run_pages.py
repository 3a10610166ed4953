"""Load time of the run pages (`mpstream serve --results`) for a run folder of 75 trials: the run
page (its conditions side by side) and a trial's timeline, as a browser gets them.

    .venv/bin/python bench/bench_run_pages.py [--rounds 25] [--repeat 10]
        [--summary docs/data/bench-run-pages-DATE.json]

The run folder holds 3 conditions x --rounds trials, copies of the golden fixture's real trials
(tests/runfolder.py). The pages are served as `serve` serves them (nginx, gunicorn with one
worker, so that "first" is the one cold request), and measured two ways: the server's answer
(requests: time to the whole body; "fresh worker": the first page a newly started collector
worker serves, as after `serve` starts) and Chromium's (navigation to the page's `load` event; for
the trial page until its charts are drawn). The run page is timed before the report exists
(its figures computed from the trials, then kept) and after `mpstream report` wrote
conditions.csv and trials.csv (as `mpstream run` does when it ends). Goal: under 1 s each.
Prints figures; not a pass/fail test. The machine's CPU is shared: figures vary run to run.
`--summary` writes them as a run summary for the docs (scripts/docsfigures.py), a case a
condition: `first_ms` its first load, `load_ms` each of the others.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests
from playwright.sync_api import sync_playwright

from mpstream.cli import COLLECTOR_APP
from mpstream.paths import REPO_ROOT
from mpstream.runner.report.build import build_report
from mpstream.runner.report.summary import BenchRecord
from mpstream.server.cli import RESULTS_ENV
from mpstream.server.stack import ServerStack

# The tests' run folders and browser flags.
sys.path.insert(0, str(REPO_ROOT))
from tests.e2e.test_server_dashboard import CHROMIUM_ARGS, free_port
from tests.runfolder import make_run, trial_key

RUN = "bench-run"


def fetch_s(url: str) -> float:
    t0 = time.perf_counter()
    r = requests.get(url, timeout=120)
    took = time.perf_counter() - t0
    r.raise_for_status()
    return took


def browser_s(page, url: str, ready: str | None) -> float:
    """Seconds from navigation to the load event (and `ready`, a selector, when given)."""
    t0 = time.perf_counter()
    page.goto(url, wait_until="load")
    if ready:
        page.wait_for_selector(ready, timeout=60_000)
    return time.perf_counter() - t0


# A case's label in the summary -> what it times, as printed.
CASES = {
    "run-computed-server": "run page, no report yet (figures computed), server",
    "run-kept-chromium": "run page, no report yet (figures kept), Chromium",
    "run-csv-server": "run page, from the report's CSV files, server (fresh worker)",
    "run-csv-chromium": "run page, from the report's CSV files, Chromium",
    "trial-server": "trial timeline page, server (fresh worker)",
    "trial-chromium": "trial timeline page to its charts drawn, Chromium",
}


def row(rows: dict[str, list[dict[str, float]]], case: str, first: float,
        rest: list[float]) -> None:
    print(f"{CASES[case]:58} {first * 1000:8.0f} {statistics.median(rest) * 1000:9.0f} "
          f"{max(rest) * 1000:8.0f}")
    rows[case] = [{"first_ms": first * 1000}, *({"load_ms": x * 1000} for x in rest)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=25, help="trials per condition (3 conditions)")
    ap.add_argument("--repeat", type=int, default=10, help="loads after the first, per case")
    ap.add_argument("--summary", type=Path, help="also write the figures as a run summary")
    args = ap.parse_args()
    record = BenchRecord()
    rows: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="mps-bench-runs-") as tmp:
        results = Path(tmp) / "results"
        run = make_run(results / RUN, rounds=args.rounds)
        n = len(list((run / "trials").iterdir()))
        key = trial_key(args.rounds // 2, "unbalanced")
        (Path(tmp) / "media").mkdir()
        with ServerStack(Path(tmp) / "media", port=free_port(), collector_app=COLLECTOR_APP,
                         collector_env={RESULTS_ENV: str(results)}, collector_workers=1) as s, \
                sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                         args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            run_url, trial_url = f"{s.base_url}/runs/{RUN}", f"{s.base_url}/runs/{RUN}/trials/{key}"
            print(f"run folder of {n} trials; ms: first load, then median and max of "
                  f"{args.repeat} more")
            print(f"{'case':58} {'first':>8} {'median':>9} {'max':>8}")
            first = fetch_s(run_url)
            row(rows, "run-computed-server", first,
                [fetch_s(run_url) for _ in range(args.repeat)])
            row(rows, "run-kept-chromium", browser_s(page, run_url, None),
                [browser_s(page, run_url, None) for _ in range(args.repeat)])
            t0 = time.perf_counter()
            build_report(run)
            report_s = time.perf_counter() - t0
            print(f"(mpstream report of the run took {report_s:.0f} s)")
            rows["report"] = [{"report_s": report_s}]
            # A fresh worker, as after `serve` starts: its first page loads the report's code.
            s.stop_collector()
            s.start_collector()
            row(rows, "run-csv-server",
                fetch_s(run_url), [fetch_s(run_url) for _ in range(args.repeat)])
            row(rows, "run-csv-chromium",
                browser_s(page, run_url, None),
                [browser_s(page, run_url, None) for _ in range(args.repeat)])
            s.stop_collector()
            s.start_collector()
            row(rows, "trial-server", fetch_s(trial_url),
                [fetch_s(trial_url) for _ in range(args.repeat)])
            ready = "body[data-charts-ready='1']"
            row(rows, "trial-chromium",
                browser_s(page, trial_url, ready),
                [browser_s(page, trial_url, ready) for _ in range(args.repeat)])
            browser.close()
    if args.summary:
        units = {"first_ms": "ms", "load_ms": "ms", "report_s": "s"}
        print(f"summary: {record.write(args.summary, sys.argv, rows, units)}")


if __name__ == "__main__":
    main()
