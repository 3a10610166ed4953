"""Run folders for the run pages' tests and benchmark (bench/ imports this too), made from the
real trials of the golden fixture (tests/fixtures/runs/video): each condition of the demo's
three (balanced, unbalanced, single) is given, in every round, a copy of one of its trials
(balanced: the unbalanced trial's data under the balanced label), renamed and renumbered as
`mpstream run` names them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "runs" / "video"
# condition label -> the golden trial its copies are made of
DEMO_CONDITIONS = {"balanced": "r00-unbalanced-dashjs", "unbalanced": "r00-unbalanced-dashjs",
                   "single": "r00-single-dashjs"}


def trial_key(round_: int, label: str) -> str:
    return f"r{round_:02d}-{label}-dashjs"


def make_run(out: Path, rounds: int = 1, scenario: str = "demo") -> Path:
    """A run folder at `out` with `rounds` trials of each demo condition."""
    golden = json.loads((GOLDEN / "run.json").read_text())
    by_key = {k: json.loads((GOLDEN / "trials" / k / "trial.json").read_text())["condition"]
              for k in set(DEMO_CONDITIONS.values())}
    conditions = [{**by_key[src], "label": label} for label, src in DEMO_CONDITIONS.items()]
    plan = [trial_key(r, label) for r in range(rounds) for label in DEMO_CONDITIONS]
    out.mkdir(parents=True)
    (out / "run.json").write_text(json.dumps({**golden, "scenario": scenario, "trials": rounds,
                                              "conditions": conditions, "plan": plan}))
    shutil.copy(GOLDEN / "scenario.toml", out / "scenario.toml")
    for order, key in enumerate(plan):
        round_, label = int(key[1:3]), key.split("-")[1]
        dest = out / "trials" / key
        shutil.copytree(GOLDEN / "trials" / DEMO_CONDITIONS[label], dest)
        record = json.loads((dest / "trial.json").read_text())
        record.update(key=key, order=order, round=round_, session_id=f"video-{key}",
                      condition={**record["condition"], "label": label})
        (dest / "trial.json").write_text(json.dumps(record, indent=2))
    return out
