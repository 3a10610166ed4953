"""`mpstream run`, `mpstream report`, `mpstream demo`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console

from mpstream.output import console_for, json_option, print_json
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
@click.option("--pair", "pairs", multiple=True, metavar="NAME",
              help="Run only the trials of this trace pair (repeatable; a pattern names "
                   "several), for a scenario with `pairs`: one pair alone, e.g. to look again "
                   "at a pair whose figures stand out (`mpstream traces pairs SET` lists them).")
@click.option("--until", "until_text", default=None, metavar="METRIC:WIDTH[x]",
              help="Stop each condition once it is sure: when the anytime-valid 95% interval "
                   "of its mean METRIC is at most WIDTH either side (WIDTHx: of the ratio to "
                   "the scenario's baseline condition), after at least 3 trials "
                   "(docs/runs-and-report.md#runs-that-stop-when-sure). Default: the "
                   "scenario's `until`.")
@click.option("--max-trials", type=click.IntRange(3, 1000), default=None,
              help="With --until: the most trials a condition takes [default: the scenario's "
                   "max_trials, 10].")
@click.option("--dry-run", is_flag=True,
              help="Print the plan and its machine time, and run nothing.")
@json_option
def run(scenario: str, trials: int | None, out_dir: Path | None, retry_failed: bool,
        make_report: bool, pcap: bool, cluster: str | None, trial_margin: float,
        balance_hosts: bool, plan_only: bool, conditions: tuple[str, ...], pairs: tuple[str, ...],
        until_text: str | None, max_trials: int | None, dry_run: bool, as_json: bool) -> None:
    """Run SCENARIO (a name in runner/scenarios/ or a TOML file): every condition, player and
    trial, in interleaved order, keeping each trial's raw data. Exits 1 when a trial failed."""
    from mpstream.runner.run import failed_trials, plan_run, run_scenario, trials_failed
    from mpstream.runner.scenario import SCENARIOS_DIR, load_scenario
    from mpstream.runner.until import Until

    sc = load_scenario(scenario)
    until = None
    if until_text and trials is not None:
        raise click.UsageError("--trials fixes the count; --until stops when sure, up to "
                               "--max-trials: give one")
    if until_text or (sc.until and trials is None):  # --trials fixes a scenario's `until` too
        try:
            until = Until.parse(until_text or sc.until or "", max_trials or sc.max_trials)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--until") from None
    elif max_trials is not None:
        raise click.UsageError("--max-trials caps a run that stops when sure: give --until")
    path = Path(scenario) if Path(scenario).is_file() else SCENARIOS_DIR / f"{scenario}.toml"
    if out_dir is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        out_dir = RESULTS_DIR / f"{sc.name}-{stamp}"
    console = console_for(as_json)
    planned = plan_run(sc, out_dir, trials=trials, only=list(conditions), pcap=pcap,
                       until=until, retry_failed=retry_failed, pairs=list(pairs))
    for line in planned.describe():
        console.print(line, highlight=False, soft_wrap=True)
    if dry_run:
        if as_json:
            print_json({**planned.as_json(), "dry_run": True})
        return
    statuses = run_scenario(sc, out_dir, trials=trials, scenario_path=path,
                            retry_failed=retry_failed, console=console, pcap=pcap,
                            cluster=cluster, trial_margin_s=trial_margin,
                            balance_hosts=balance_hosts, plan_only=plan_only,
                            only=list(conditions), until=until, pairs=list(pairs))
    report = _report(out_dir, None, console) if make_report and not plan_only else None
    ran = [] if plan_only else [t.key for t in planned.selected if t.key in statuses]
    failed = failed_trials(planned.out_dir, ran)
    if as_json:
        print_json({**planned.as_json(), "dry_run": False, "ran": len(ran),
                    "ok": len(ran) - len(failed), "failed": len(failed),
                    "failed_trials": [{"key": k, "reason": r} for k, r in failed.items()],
                    "report": report.html if report else None})
    if failed:
        raise trials_failed(planned.out_dir, failed, len(ran))


def _report(run_dir: Path, out: Path | None, console: Console):
    from mpstream.runner.report.table import report_and_print

    return report_and_print(run_dir, out, console)


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
@json_option
def report(run_dir: Path, out: Path | None, p1203: bool, summary: Path | None,
           as_json: bool) -> None:
    """Write the HTML report, CSV files and PNG figures of a run folder, and print its tables."""
    console = console_for(as_json)
    rep = _report(run_dir, out, console)
    written: dict[str, Path | None] = {"summary": None, "p1203": None}
    if summary is not None:
        from mpstream.runner.layout import RUN_JSON, read_json
        from mpstream.runner.report.summary import write_summary

        written["summary"] = write_summary(rep, read_json(run_dir / RUN_JSON), summary)
        console.print(f"summary: {written['summary']}")
    if p1203:
        from mpstream.runner.report.build import write_p1203_inputs

        sessions = write_p1203_inputs(rep)
        written["p1203"] = rep.out_dir / "p1203"
        console.print(f"P.1203 mode-0 input of {len(sessions)} sessions: {written['p1203']}")
    if as_json:
        print_json({"run_dir": rep.run_dir, "report": rep.html, "out_dir": rep.out_dir,
                    "files": sorted(p.name for p in rep.out_dir.iterdir() if p.is_file()),
                    "trials": len(rep.trials), "ok": len(rep.trials) - len(rep.failed),
                    "failed": len(rep.failed),
                    "failed_trials": [{"key": f["key"], "reason": f["reason"]}
                                      for f in rep.failed], **written})


@click.command()
@click.argument("summaries", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Every summary in docs/data/.")
@click.option("--headline", is_flag=True,
              help="The headline set (docs/data/headline.toml): each figure decided against "
                   "the published one as trials come in (docs/reproduction.md).")
@click.option("--set", "headline_set", type=click.Path(dir_okay=False, path_type=Path),
              default=None, metavar="FILE", help="A headline set of your own, as --headline.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the new runs, their summaries and reproduction.csv/.html go "
                   "(default: results/reproduce-<UTC time>).")
@click.option("--trials", type=click.IntRange(1, 1000), default=None,
              help="Trials per condition in place of the summary's own count.")
@click.option("--until", "until_text", default=None, metavar="METRIC:WIDTH[x]",
              help="Stop each condition when sure, as `mpstream run --until`, in place of the "
                   "summary's count.")
@click.option("--max-trials", type=click.IntRange(3, 1000), default=10, show_default=True,
              help="With --until: the most trials a condition takes.")
@click.option("--cluster", default=None, metavar="ADDRESS|local:N",
              help="Run on a cluster's hosts, as `mpstream run --cluster`.")
@click.option("--tolerance", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              metavar="FRACTION",
              help="Also count a figure as agreeing when its new mean is within this fraction "
                   "of the published one (0.02: 2%): one run's interval says nothing of how "
                   "runs on other days differ.")
@click.option("--update", is_flag=True,
              help="Replace each published summary in docs/data/ with the new one (then run "
                   "`make docs-figures`).")
@click.option("--dry-run", is_flag=True,
              help="Print each summary's run and its machine time, and run nothing.")
@json_option
def reproduce(summaries: tuple[str, ...], every: bool, headline: bool,
              headline_set: Path | None, out_dir: Path | None, trials: int | None,
              until_text: str | None, max_trials: int, cluster: str | None,
              tolerance: float, update: bool, dry_run: bool, as_json: bool) -> None:
    """Run again the command each run summary SUMMARY (a file in docs/data/, or its name)
    records, with today's code, and set each figure the docs quote from it beside the new one:
    DIR/reproduction.csv and .html (docs/runs-and-report.md#reproducing-the-docs-figures).
    With --headline or --set: the set's figures, each decided as trials come in (agrees,
    disagrees or undecided at its cap): DIR/headline.json.
    Exits 1 when a figure disagrees or a trial failed."""
    from mpstream.runner.reproduce import print_plan, summary_files
    from mpstream.runner.reproduce import reproduce as run_reproduction
    from mpstream.runner.until import Until

    if out_dir is None:
        out_dir = RESULTS_DIR / f"reproduce-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    if headline or headline_set:
        if summaries or every or trials is not None or until_text or update:
            raise click.UsageError("--headline and --set decide each figure themselves: give "
                                   "no summaries, --all, --trials, --until or --update with them")
        _reproduce_set(headline_set, out_dir, cluster, dry_run, as_json)
        return
    if trials is not None and until_text:
        raise click.UsageError("give --trials or --until, not both")
    until = None
    if until_text:
        try:
            until = Until.parse(until_text, max_trials)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--until") from None
    console = console_for(as_json)
    files = summary_files(list(summaries), every)
    planned = print_plan(files, trials, until, console)
    if dry_run:
        if as_json:
            print_json({**planned, "dry_run": True})
        return
    said = run_reproduction(files, out_dir, trials=trials, until=until, cluster=cluster,
                            update=update, tolerance=tolerance, console=console)
    if as_json:
        print_json({**said, "dry_run": False, "planned": planned, "out_dir": out_dir.resolve(),
                    "table": out_dir.resolve() / "reproduction.csv"})
    _exit_for(said["disagree"], said["figures"], said["failed_trials"],
              out_dir / "reproduction.csv")


def _reproduce_set(path: Path | None, out_dir: Path, cluster: str | None, dry_run: bool,
                   as_json: bool) -> None:
    from mpstream.runner.reproduce.headline import (
        HEADLINE_SET,
        load_set,
        print_plan,
        reproduce_headline,
    )

    console = console_for(as_json)
    chosen = load_set(path or HEADLINE_SET)
    planned = print_plan(chosen, console)
    if dry_run:
        if as_json:
            print_json({**planned, "dry_run": True})
        return
    said = reproduce_headline(chosen, out_dir, cluster=cluster, console=console)
    if as_json:
        print_json({**said, "dry_run": False, "planned": planned,
                    "out_dir": out_dir.resolve()})
    _exit_for(said["disagree"], len(said["figures"]), said["failed_trials"],
              out_dir / "headline.json")


def _exit_for(disagree: int, figures: int, failed: int, table: Path) -> None:
    """Exit 1 when a figure disagrees or a trial failed, the table kept."""
    from mpstream.errors import EXIT_FAILED, UserError

    if disagree or failed:
        raise UserError(f"{disagree} of {figures} figure(s) disagree and {failed} trial(s) "
                        f"failed: {table}", exit_code=EXIT_FAILED)


@click.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run folder (default: results/demo-<UTC time>).")
def demo(out_dir: Path | None) -> None:
    """Encode the sample, play it over balanced MPTCP, unbalanced MPTCP and single-path TCP,
    and print the comparison (a short version of the thesis bandwidth experiment)."""
    from mpstream.runner.demo import run_demo

    run_demo(out_dir, Console())
