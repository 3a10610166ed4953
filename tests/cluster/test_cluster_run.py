"""`mpstream run --cluster local:2` of an iperf scenario (2 conditions x 2 rounds, whole rounds
to hosts): every trial ran once, on both hosts, each host every condition once, never two at
once on one host, in the plan's order; the report has a local run's CSV columns and a per-host
table; a trial past its time limit is recorded as a timeout; a video scenario's media travels
to each host once."""

import csv
import itertools
import json
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from mpstream.runner.layout import load_trials
from mpstream.runner.scenario import expand_trials, load_scenario
from tests.scenarios import balanced_and_single

from .conftest import iperf_scenario, mpstream

pytestmark = pytest.mark.timeout(600)


def _run(*args: str, exit_code: int = 0) -> tuple[str, float]:
    t0 = time.monotonic()
    proc = mpstream("run", *args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = proc.communicate(timeout=500)
    assert proc.returncode == exit_code, output
    return " ".join(output.split()), time.monotonic() - t0  # as one line: rich wraps it


def _header(path: Path) -> list[str]:
    with path.open() as fh:
        return next(csv.reader(fh))


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cluster-run")
    scenario = iperf_scenario(folder)
    output, seconds = _run(str(scenario), "--cluster", "local:2", "--balance-hosts", "--out",
                           str(folder / "run"))
    return scenario, folder / "run", output, seconds


def test_every_trial_ran_once_on_both_hosts_one_at_a_time(cluster_run):
    scenario, run, output, _ = cluster_run
    plan = expand_trials(load_scenario(scenario))
    trials = load_trials(run)
    assert sorted(t.key for t in trials) == sorted(t.key for t in plan)
    assert len([p for p in (run / "trials").iterdir() if p.is_dir()]) == len(plan)
    assert all(t.ok for t in trials), [(t.key, t.record.reason) for t in trials]
    by_host: dict[str, list[tuple[datetime, datetime, str]]] = {}
    for t in trials:
        by_host.setdefault(t.record.host or "", []).append(
            (datetime.fromisoformat(t.record.started_at),
             datetime.fromisoformat(t.record.finished_at or ""), t.key))
    assert sorted(by_host) == ["local-1", "local-2"]
    for host, spans in by_host.items():
        spans.sort()
        for (_, end, a), (start, _, b) in itertools.pairwise(spans):
            assert start >= end, f"{host} ran {a} and {b} at once"
    # Whole rounds to hosts, each host's trials in the plan's order.
    rounds = {t.key: t.round for t in plan}
    for host, spans in by_host.items():
        assert len({rounds[key] for _, _, key in spans}) == 1, (host, spans)
        assert sorted(key.split("-", 1)[1] for _, _, key in spans) == ["balanced", "single"]
        order = [key for _, _, key in spans]
        assert order == [t.key for t in plan if t.key in order], (host, order)
    # the trial's own data came back whole, its log included
    for t in trials:
        assert {"trial.json", "trial.log", "iperf.json", "samples-server.csv"} <= {
            p.name for p in t.dir.iterdir()}
        assert json.loads((t.dir / "iperf.json").read_text())["end"]
    assert "4 ok, 0 failed" in output


def test_the_report_has_a_local_runs_columns_and_a_table_per_host(cluster_run, tmp_path):
    scenario, run, _, _ = cluster_run
    _run(str(scenario), "--trials", "1", "--out", str(tmp_path / "local"))
    for name in ("trials.csv", "conditions.csv", "segments.csv", "paths_per_second.csv",
                 "reference.csv", "hosts.csv"):
        assert _header(run / "report" / name) == _header(tmp_path / "local" / "report" / name)
    with (run / "report" / "hosts.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["host"] for r in rows} == {"local-1", "local-2"}
    assert sum(int(r["trials"]) for r in rows) == 4
    assert all(15 < float(r["median_throughput_mbps"]) < 31 for r in rows), rows
    html = (run / "report" / "report.html").read_text()
    assert "Per host" in html and "local-2" in html
    # one host: no such table
    assert "Per host" not in (tmp_path / "local" / "report" / "report.html").read_text()


def test_a_trial_past_its_time_limit_is_a_timeout(tmp_path):
    scenario = iperf_scenario(tmp_path, duration=6)
    out = tmp_path / "run"
    # No margin: every trial outlives its limit (the network and iperf3 take time to start).
    output, _ = _run(str(scenario), "--trials", "1", "--cluster", "local:2", "--trial-margin",
                     "0", "--out", str(out), "--no-report", exit_code=1)  # done, trials failed
    trials = load_trials(out)
    assert len(trials) == 2
    for t in trials:
        assert t.record.status == "failed" and t.record.reason.startswith("timeout"), t.record
        assert t.record.host in ("local-1", "local-2")
        assert 6 <= (t.record.elapsed_s or 0) < 60
        assert "trial.log" in {p.name for p in t.dir.iterdir()}
    assert "0 ok, 2 failed" in output


def test_a_video_scenario_on_two_hosts_plays_the_media_where_the_run_has_it(tiny_media,
                                                                            tmp_path):
    # The media is under /tmp, which the hosts of a local cluster see as the user does: each
    # host finds the same content at the run's own path and copies nothing (a host that holds
    # other content there, or none, gets the tree by its hash: tests/unit/test_runner_cluster.py).
    # The trials speak (multipath) QUIC through the hop, which each host runs for itself.
    scenario = tmp_path / "video-cluster.toml"
    scenario.write_text(balanced_and_single("video-cluster", kind="video", trials=2, seed=3,
                                            duration_s=8, media_dir=tiny_media,
                                            multipath="mpquic", single="quic"))
    out = tmp_path / "run"
    _run(str(scenario), "--cluster", "local:2", "--out", str(out))
    trials = load_trials(out)
    assert len(trials) == 4 and all(t.ok for t in trials), [t.record.reason for t in trials]
    assert {t.record.host for t in trials} == {"local-1", "local-2"}
    for t in trials:
        events = json.loads((t.dir / "events.json").read_text())
        assert any(e["type"] == "startup" for e in events), t.key
        # A trial folder comes back as a tar, which keeps no holes: nginx's sparse probe file
        # would arrive as a gigabyte. Only what the report reads travels.
        assert not (t.dir / "server" / "probe.blob").exists(), t.key
        assert sum(f.stat().st_size for f in t.dir.rglob("*") if f.is_file()) < 50 << 20
    copied = [line for line in (out / "cluster.log").read_text().splitlines()
              if "media tree" in line and "copied" in line]
    assert copied == []
    assert (out / "report" / "report.html").is_file()
    for t in trials:
        assert t.record.transport == ("mpquic" if t.condition == "balanced" else "quic")
        assert "noq" in (t.record.transport_implementation or ""), t.key
        assert (t.dir / "quic-gateway.jsonl").stat().st_size > 0, t.key
    # The per-path figures of QUIC trials came back with them. How the multipath trials split
    # varies (noq fills path 0 first, and the tiny ladder's segments often fit in its window);
    # that both paths carried data is the session's own proof (quic_paths), checked by ok.
    with (out / "report" / "conditions.csv").open() as fh:
        means = {(r["condition"], r["metric"]): r["mean"] for r in csv.DictReader(fh)}
    shares = [float(means[("balanced", f"path{p}_bytes_share")]) for p in (0, 1)]
    assert sum(shares) == pytest.approx(1.0) and min(shares) > 0, means
    assert float(means[("single", "path0_bytes_share")]) == 1.0

