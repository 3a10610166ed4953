"""The statistics of a trace pair set's traces (netem/tracepairs.py), as a summary the docs'
table of pairs is generated from (docs/mobile.md, scripts/docsfigures.py):

    MPSTREAM_TRACES=DIR .venv/bin/python scripts/tracepairs.py mobile-24 \\
        --summary docs/data/pairs-mobile-24.json

Each pair is a condition of the summary, with its downlink traces' figures over the pair's
window: the WiFi's, the cellular window's and their sum's mean rate (Mbit/s), the coefficient
of variation of the rate second by second, and the outage time (s in gaps of 0.5 s or more
without a delivery opportunity). `mpstream traces pairs SET` prints the same figures. The
cellular traces must be here (`mpstream traces fetch`, or MPSTREAM_TRACES).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mpstream.netem.tracepairs import load_pair_set
from mpstream.runner.report.summary import write_script_figures

UNITS = {f"{what}_{figure}": unit for what in ("wifi", "cellular", "sum")
         for figure, unit in (("mean_mbps", "Mbit/s"), ("cov", ""), ("outage_s", "s"))}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pair_set", help="a shipped set's name (netem/pairs/) or a TOML file")
    parser.add_argument("--summary", type=Path, required=True, help="the summary to write")
    args = parser.parse_args(argv[1:])
    found = load_pair_set(args.pair_set)
    rows = {pair.name: [pair.statistics()] for pair in found.pairs}
    print(write_script_figures(argv, rows, UNITS, args.summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
