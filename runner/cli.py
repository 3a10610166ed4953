"""`mpstream run`, `mpstream report`, `mpstream demo`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console

from mpstream.paths import REPO_ROOT

RESULTS_DIR = REPO_ROOT / "results"


@click.command()
@click.argument("scenario")
@click.option("--trials", type=click.IntRange(1, 1000), default=None,
              help="Trials per condition (default: the scenario's; on resume, the run's).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run folder (default: results/<scenario>-<UTC time>). Give an existing run "
                   "folder to resume it: with the trials, conditions and --pcap it was "
                   "planned with, unless given again.")
@click.option("--retry-failed", is_flag=True, help="On resume, run failed trials again too.")
@click.option("--report/--no-report", "make_report", default=True,
              help="Write the report when the run ends (default: yes).")
@click.option("--pcap", is_flag=True,
              help="Keep a packet capture of each trial (headers only, every client path "
                   "interface and the server's; trials/<key>/pcap/*.pcap.gz, for Wireshark).")
@click.option("--cluster", default=None, metavar="ADDRESS|local:N",
              help="Run the trials on a cluster's hosts, one per host at a time: the head at "
                   "ADDRESS (IP:PORT, see `mpstream cluster`), or local:N, N hosts in "
                   "namespaces of this machine for this run (docs/cluster.md).")
@click.option("--trial-margin", type=click.FloatRange(0, 86400), default=180.0,
              show_default=True, metavar="SECONDS",
              help="With --cluster: how long a trial may run past the scenario's duration "
                   "before it is stopped and recorded as failed (timeout).")
@click.option("--balance-hosts", is_flag=True,
              help="With --cluster: whole rounds to hosts (round r on host r mod the number "
                   "of hosts), so that every host runs every condition equally often.")
@click.option("--plan-only", is_flag=True,
              help="Prepare the run folder (run.json with the plan, the media) and run no "
                   "trial: run each elsewhere with `mpstream trial OUT --key KEY`, e.g. in a "
                   "batch system's array job (docs/cluster.md).")
@click.option("--condition", "conditions", multiple=True, metavar="LABEL",
              help="Run only this condition of the scenario (repeatable), e.g. one added to a "
                   "scenario whose run folder has the others; a pattern names several "
                   "('*-cubic': a sweep's cubic column; '*': all). On resume, the conditions "
                   "the run was planned with, unless given.")
def run(scenario: str, trials: int | None, out_dir: Path | None, retry_failed: bool,
        make_report: bool, pcap: bool, cluster: str | None, trial_margin: float,
        balance_hosts: bool, plan_only: bool, conditions: tuple[str, ...]) -> None:
    """Run SCENARIO (a name in runner/scenarios/ or a TOML file): every condition, player and
    trial, in interleaved order, keeping each trial's raw data."""
    from mpstream.runner.run import run_scenario
    from mpstream.runner.scenario import SCENARIOS_DIR, load_scenario

    sc = load_scenario(scenario)
    path = Path(scenario) if Path(scenario).is_file() else SCENARIOS_DIR / f"{scenario}.toml"
    if out_dir is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        out_dir = RESULTS_DIR / f"{sc.name}-{stamp}"
    console = Console()
    run_scenario(sc, out_dir, trials=trials, scenario_path=path, retry_failed=retry_failed,
                 console=console, pcap=pcap, cluster=cluster, trial_margin_s=trial_margin,
                 balance_hosts=balance_hosts, plan_only=plan_only, only=list(conditions))
    if make_report and not plan_only:
        _report(out_dir, None, console)


def _report(run_dir: Path, out: Path | None, console: Console):
    from mpstream.runner.report import build_report
    from mpstream.runner.table import print_tables

    rep = build_report(run_dir, out)
    print_tables(rep, console)
    console.print(f"report: {rep.html}")
    return rep


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to write the report (default: RUN_DIR/report).")
@click.option("--p1203-input", "p1203", is_flag=True,
              help="Also write each session's ITU-T P.1203 mode-0 input JSON to "
                   "REPORT/p1203/<trial>.json (docs/qoe.md).")
@click.option("--summary", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the run's summary (per condition: n, mean, sd, 95% interval of "
                   "each metric; the command, commit, kernel and load) as JSON, the form "
                   "docs/data/ keeps (its name is the run's id there).")
def report(run_dir: Path, out: Path | None, p1203: bool, summary: Path | None) -> None:
    """Write the HTML report, CSV files and PNG figures of a run folder, and print its tables."""
    console = Console()
    rep = _report(run_dir, out, console)
    if summary is not None:
        from mpstream.runner.layout import RUN_JSON, read_json
        from mpstream.runner.summary import write_summary

        path = write_summary(rep, read_json(run_dir / RUN_JSON), summary)
        console.print(f"summary: {path}")
    if p1203:
        from mpstream.runner.report import write_p1203_inputs

        written = write_p1203_inputs(rep)
        console.print(f"P.1203 mode-0 input of {len(written)} sessions: {rep.out_dir / 'p1203'}")


@click.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run folder (default: results/demo-<UTC time>).")
def demo(out_dir: Path | None) -> None:
    """Encode the sample, play it over balanced MPTCP, unbalanced MPTCP and single-path TCP,
    and print the comparison (a short version of the thesis bandwidth experiment)."""
    from mpstream.runner.demo import run_demo

    run_demo(out_dir, Console())
