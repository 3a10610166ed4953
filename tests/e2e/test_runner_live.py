"""`mpstream run` on a live stream, end to end (a long proof: `make test-live`, not part of
`make test`): the run starts one `mpstream live synthetic`, every trial joins it with a target
latency, and the report gives latency to live (mean, p95) and stalls per condition with
confidence intervals that match the raw events. A path failure under MPTCP keeps playing; the
stream is ended with the run and no ffmpeg is left."""

import csv
import json
import os
from pathlib import Path

import pytest

from mpstream.qoe.metrics import live_latency
from mpstream.qoe.stats import summarize
from mpstream.runner.layout import load_trials
from mpstream.runner.report.build import build_report
from mpstream.runner.run import run_scenario
from mpstream.runner.scenario import load_scenario, parse_scenario

pytestmark = [pytest.mark.timeout(900), pytest.mark.long]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    full = load_scenario("live")
    raw = full.model_dump(mode="json", exclude={"media"})
    keep = {"balanced", "failure-mptcp"}
    raw.update(trials=2, duration_s=30, players=["hlsjs"],
               conditions=[c for c in raw["conditions"] if c["label"] in keep])
    raw["live"]["window_s"] = 20
    # The scenario's balanced paths (2 x 300 kbit/s) carry the top rung (about 430 kbit/s with
    # audio) with little to spare, so stalls there are part of what it measures, and how far
    # latency climbs after them varies from trial to trial. Here they get room (2 x 1.5 Mbit/s),
    # so that latency staying near the target is a property of the player, the live server and
    # the report, which this test checks; the failure condition keeps the scenario's rates.
    balanced = next(c for c in raw["conditions"] if c["label"] == "balanced")
    balanced["set"] = {**balanced["set"], "paths.*.rate": "1500kbit"}
    scenario = parse_scenario(raw, base_dir=full.base_dir)
    out = tmp_path_factory.mktemp("run-live") / "live"
    out.parent.chmod(0o755)
    statuses = run_scenario(scenario, out, progress=False)
    return scenario, out, statuses


def _csv(path: Path) -> list[dict]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_live_run_reports_latency_and_stalls_with_confidence_intervals(run):
    scenario, out, statuses = run
    assert set(statuses.values()) == {"ok"}, statuses
    # The run's live stream ended with the run, ffmpeg with it.
    state = json.loads((out / "live-tree" / "live.json").read_text())
    assert state["state"] == "ended"
    assert not Path(f"/proc/{state['extra']['ffmpeg_pid']}").exists()
    target = scenario.live.target_latency_s
    build_report(out)
    rows = {(r["condition"], r["metric"]): r for r in _csv(out / "report" / "conditions.csv")}
    for cond in ("balanced", "failure-mptcp"):
        trials = [r for r in load_trials(out) if r.ok and r.condition == cond]
        assert len(trials) == 2
        means, p95s, stalls = [], [], []
        for rec in trials:
            events = json.loads((rec.dir / "events.json").read_text())
            samples = [e["data"] for e in events if e["type"] == "live_latency"]
            n_stalls = sum(1 for e in events if e["type"] == "stall_start")
            seen = [(s["latency_s"], s["target_s"], s["playback_rate"]) for s in samples]
            assert len(samples) >= scenario.duration_s - 8, (rec.key, seen)
            # hls.js raises its target by a second after each stall (liveSyncOnStallIncrease).
            assert all(target - 0.5 <= s["target_s"] <= target + n_stalls + 0.5
                       for s in samples), (rec.key, n_stalls, seen)
            lat = live_latency(events)
            means.append(lat["mean_s"])
            p95s.append(lat["p95_s"])
            stalls.append(n_stalls)
            values = sorted(s["latency_s"] for s in samples)
            if cond == "balanced":
                # Near the player's target, not drifting away: the median sample within the
                # target it ended with plus one segment. (After a path failure latency grows
                # and is caught up only slowly: that is the result the scenario measures.)
                assert values[len(values) // 2] <= samples[-1]["target_s"] + \
                    scenario.live.segment_duration, (rec.key, seen)
            else:
                # Playback went on through the outage: samples cover the whole session.
                t = [e["t_ms"] for e in events if e["type"] == "live_latency"]
                assert t[-1] - t[0] >= (scenario.duration_s - 10) * 1000, (rec.key, seen)
        for metric, values in (("live_latency_mean_s", means), ("live_latency_p95_s", p95s),
                               ("stall_count", stalls)):
            row, want = rows[(cond, metric)], summarize(values)
            assert int(row["n"]) == 2
            assert float(row["mean"]) == pytest.approx(want.mean, rel=1e-6)
            assert float(row["ci95_high"] or "nan") == pytest.approx(
                want.ci_high, rel=1e-6, nan_ok=True)
    html = (out / "report" / "report.html").read_text()
    assert "latency to live, mean" in html and "latency to live, p95" in html
    assert not [p for p in Path("/proc").glob("[0-9]*/cwd")
                if _link(p).startswith(str(out / "live-tree"))], "a process still in the tree"


def _link(p: Path) -> str:
    try:
        return os.readlink(p)
    except OSError:
        return ""
