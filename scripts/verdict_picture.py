#!/usr/bin/env python3
"""The README's picture (docs/verdict.svg), drawn from the run summaries in docs/data/: each
panel one run, so that its bars are compared only within the run that measured them side by
side (a ratio is never read across days).

    scripts/verdict_picture.py            write docs/verdict.svg (`make docs-picture`)
    scripts/verdict_picture.py --check    exit 1 when the file is not what the summaries give
                                          (`make docs-check`)

The SVG is made byte for byte the same from the same summaries: no date in its metadata, a fixed
salt for its element ids, and text kept as text (no glyph outlines from the machine's fonts).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "docs" / "data"
PICTURE = ROOT / "docs" / "verdict.svg"

# One colour per transport and deployment, the same in every panel.
COLOURS = {"tcp": "#8c8c8c", "mptcp-default": "#e08a2c", "mptcp-tuned": "#2c6fb0",
           "mpquic-lowest-id": "#3a9a5b"}
NAMES = {"tcp": "TCP, one path\n(the sum of both)", "mptcp-default": "MPTCP,\nstock kernel",
         "mptcp-tuned": "MPTCP,\nmptcp-tuned", "mpquic-lowest-id": "multipath\nQUIC"}


@dataclass(frozen=True)
class Panel:
    title: str
    run: str  # a summary in docs/data/
    metric: str
    unit: str
    conditions: tuple[str, ...]


PANELS = (
    Panel("Startup delay, unbalanced paths\n(25 + 5 Mbit/s; lower is better)",
          "mptcp-tuned-startup-2026-11-30", "startup_delay_ms", "ms",
          ("tcp", "mptcp-default", "mptcp-tuned")),
    Panel("Per-segment download rate, unbalanced\n(25 + 5 Mbit/s; higher is better)",
          "mptcp-fast-start-2026-11-29", "download_rate_mbps", "Mbit/s",
          ("tcp", "mptcp-default", "mptcp-tuned")),
    Panel("Per-segment download rate, balanced\n(15 + 15 Mbit/s; higher is better)",
          "schedulers-balanced-2026-11-27", "download_rate_mbps", "Mbit/s",
          ("tcp", "mptcp-default", "mpquic-lowest-id")),
)


def _metric(run: str, condition: str, metric: str) -> tuple[float, float, float]:
    """(mean, low, high) of the 95% interval of one condition's metric in a summary."""
    summary = json.loads((DATA_DIR / f"{run}.json").read_text())
    for c in summary["conditions"]:
        if c["group"] == condition or c["label"] == condition:
            m = c["metrics"][metric]
            return m["mean"], m["ci95"][0], m["ci95"][1]
    raise SystemExit(f"docs/data/{run}.json has no condition {condition}")


def draw() -> bytes:
    plt.rcParams.update({"svg.hashsalt": "mpstream", "svg.fonttype": "none",
                         "font.family": "DejaVu Sans", "font.size": 9})
    fig, axes = plt.subplots(1, len(PANELS), figsize=(11, 3.6))
    for ax, panel in zip(axes, PANELS, strict=True):
        values = [_metric(panel.run, c, panel.metric) for c in panel.conditions]
        means = [v[0] for v in values]
        errors = [[v[0] - v[1] for v in values], [v[2] - v[0] for v in values]]
        x = range(len(values))
        ax.bar(x, means, yerr=errors, capsize=4, width=0.65,
               color=[COLOURS[c] for c in panel.conditions])
        for i, mean in enumerate(means):
            ax.annotate(f"{mean:.0f}" if panel.unit == "ms" else f"{mean:.1f}", (i, 0),
                        xytext=(0, 4), textcoords="offset points", ha="center",
                        color="white", weight="bold")
        ax.set_xticks(list(x), [NAMES[c] for c in panel.conditions])
        ax.set_ylabel(panel.unit)
        ax.set_title(f"{panel.title}\nrun {panel.run}", fontsize=9)
        ax.spines[["top", "right"]].set_visible(False)
    fig.text(0.5, 0.005, "Mean of each condition's trials with its 95% interval; dash.js in "
             "Chromium on emulated paths. Data: docs/data/<run>.json.", ha="center",
             fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    out = io.BytesIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare docs/verdict.svg with what the summaries give")
    args = ap.parse_args(argv)
    drawn = draw()
    if args.check:
        if not PICTURE.is_file() or PICTURE.read_bytes() != drawn:
            print(f"{PICTURE.relative_to(ROOT)} is not what docs/data gives: run "
                  "`make docs-picture`", file=sys.stderr)
            return 1
        print(f"{PICTURE.relative_to(ROOT)} matches its {len(PANELS)} summaries")
        return 0
    PICTURE.write_bytes(drawn)
    print(f"wrote {PICTURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
