#!/usr/bin/env python3
"""The docs' measured figures, generated from the run summaries in docs/data/ and checked.

A measurement in README.md or docs/ is written in one of two ways, both tied to a summary that
`mpstream report RUN --summary docs/data/<run>.json` wrote:

- a table generated from a summary, between a spec and an end marker:

      <!-- figures
      data = "data/schedulers-idle-2026-11-27.json"
      baseline = "tcp"
      [names]
      tcp = "TCP, one 30 Mbit/s path"
      [[columns]]
      head = "startup (ms)"
      metric = "startup_delay_ms"
      show = "mean_ci"
      digits = 0
      -->
      | ... written by `make docs-figures` ...
      <!-- /figures -->

  `show` is one of mean, median (a benchmark's, over its rounds), mean_ci (mean [95% interval]),
  ratio (the mean over the baseline condition's), pct and pct_ci (a share as a percentage);
  `rows` lists the conditions (default: all, in the run's order); `digits` the decimals; a
  column's `skip` the conditions it leaves blank (a single path's share of a split), its `scale`
  a factor for another unit (1e-6: bytes shown as MB), its `baseline` the condition its ratio is
  of (default: the row's in the table's `[baselines]`, else the table's `baseline`), its `data`
  another summary of the same conditions (one scenario run two ways, side by side). A sweep's
  one metric is laid out by its two factors with a `[grid]` in place of the columns: `rows` and
  `columns` (the factors' values), `label` (how they name a condition, "{row}-{column}"),
  `metric`, `show` and `digits`; `[names]` names the rows and columns; `[grid.data]` gives a
  column its own summary (a sweep run a column at a time).
  A run over trace pairs has its figures over pairs (the summary's `paired` section) laid out
  with `[[paired]]` columns in place of `[[columns]]`: each a `metric` and its `statistic` over
  pairs (mean, p50, p95, ...), `show` one of value, difference (condition less baseline, with
  its bootstrap interval) and ratio (value over the baseline's over the same pairs), `digits`
  and `scale` as above, `skip` the rows it leaves blank, `baseline` the group it is beside
  (default: the scenario's baseline condition; another is the run's `baseline_abr`); the
  baseline's own row shows its values.
- a paragraph generated from summaries (a page whose prose must carry no comments, as the
  README's verdict): a spec with `text` in place of the columns, each figure in it written
  `{RUN CONDITION METRIC WHAT DIGITS}` (WHAT as for a number in a sentence, below):

      <!-- figures
      text = '''MPTCP started at
        {mptcp-tuned-startup-2026-11-30 mptcp-tuned startup_delay_ms ratio:tcp 2}× TCP's.'''
      -->
      MPTCP started at 1.04× TCP's.
      <!-- /figures -->

- a number in a sentence followed by a comment naming where it comes from, the run, the
  condition, the metric and what of it: `1.04× <!--fig schedulers-idle-2026-11-27 mpquic-ecf
  startup_delay_ms ratio:tcp-->` (mean, median, lo, hi, pct, min, max, ratio:CONDITION). The number
  must equal that figure at the precision it is written with. The run as a whole is the
  condition `run`: its `minutes` (from its first trial's start to its last's end), its
  `seconds_a_trial` (that time over its trials), as `<!--fig RUN run minutes mean-->`, and the
  `load` average sampled while it ran (`<!--fig RUN run load max-->`, or min or median).
  A figure over trace pairs is `paired:STAT`, `paired-ratio:STAT` (over the baseline's over the
  same pairs), `paired-diff:STAT`, `paired-lo:STAT` or `paired-hi:STAT` (its interval); STAT@GROUP
  beside GROUP.

Anything else shaped like a measurement (a number with an interval `[a, b]` beside it, or a
ratio `1.20×`) is an error, unless it stands in a region that says why it is not checked yet:
`<!-- unchecked: REASON -->` ... `<!-- /unchecked -->` (for instance figures from a run whose
folder was not kept: the check counts them, so the debt stays visible). A decimal with a unit
(`0.14 s`) and a whole number of milliseconds or percent (`1138 ms`, `17%`) read as measured
too, and so does a bare share of two or more decimals (`0.872`); inline code is not read.
Settings and goals written so (a 2× buffer, a 100 ms poll, a goal of 1.05× TCP's) are marked
`<!--setting-->` or `<!--goal-->` after the number (a publication's own figure,
`<!--cited-->`), or stand in a region that says what they are: `<!-- settings: WHAT -->` ...
`<!-- /settings -->` (a table of presets).

    scripts/docsfigures.py          check; exit 1 with each wrong or unsourced figure
    scripts/docsfigures.py --write  regenerate the tables from the summaries
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import textwrap
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "docs" / "data"

BLOCK = re.compile(r"<!-- figures\n(?P<spec>.*?)-->\n(?P<body>.*?)<!-- /figures -->", re.S)
INLINE = re.compile(r"(?P<num>-?\d+(?:\.\d+)?)(?P<unit>[ \t]*(?:×|%|[A-Za-zµ/]+)?)[ \t]*"
                    r"<!--fig (?P<run>\S+) (?P<cond>\S+) (?P<metric>\S+) (?P<what>\S+)\s*-->")
UNCHECKED = re.compile(r"<!-- unchecked: (?P<why>.*?) -->(?P<body>.*?)<!-- /unchecked -->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
# What a measurement looks like when it is written by hand.
INTERVAL = re.compile(r"\d(?:\.\d+)?[ \t]*(?:ms|s|Mbit/s|%|MB)?[ \t]*\[-?\d+(?:\.\d+)?,[ \t]*-?\d")
RATIO = re.compile(r"\d+\.\d+[ \t]*(?:×|x(?![\w-]))(?![ \t]*<!--(?:fig|setting|goal|cited))")
# A spread of two decimals ("0.51-0.57", "1.07 s to 1.40 s"): the range some runs gave (not
# a range of Python versions).
SPREAD = re.compile(r"(?<![\w.])(?<!Python )\d+\.\d+[ \t]*(?:ms|s|Mbit/s|%|MB)?[ \t]*"
                    r"(?:-|–|to)[ \t]*\d+\.\d+(?![\w.])"
                    r"(?![ \t]*(?:ms|s|Mbit/s|%|MB)?[ \t]*<!--(?:setting|goal|cited))")
# A decimal with a unit ("22.7 Mbit/s", "0.14 s", "18.7%", "93.97 bytes"): what a run printed.
# A setting or a definition written so says so with <!--setting--> after it.
PLAIN = re.compile(r"(?<![\w.])\d+\.\d+[ \t]*(?:ms|µs|us|s|Mbit/s|Gbit/s|kbit/s|Mbps|%|MB|GB|KB|kB"
                   r"|MiB|GiB|KiB|B|bytes|packets|pkts|segments)"
                   r"(?![\w/])(?![ \t]*<!--(?:fig|setting|goal|cited))")
# A whole number of milliseconds or percent ("1138 ms", "17%"): a startup delay, a share. (Whole
# rates and sizes, "25 Mbit/s", "60 s", are far more often settings than figures, and are not
# held to this.)
WHOLE = re.compile(r"(?<![\w.,])\d+[ \t]*(?:ms|%)(?![\w/])(?![ \t]*<!--(?:fig|setting|goal|cited))")
# A share written bare ("0.872 of the path sum", "0.37 of the first segment"): the docs' most
# common figure, and the one two pages quoted differently before they were generated.
# (With a unit after it, it is one of the shapes above.)
SHARE = re.compile(r"(?<![\w.])0\.\d{2,}(?![\w.])"
                   r"(?![ \t]*(?:×|x(?![\w-])|%|<!--(?:fig|setting|goal|cited)"
                   r"|(?:ms|s|Mbit/s|Gbit/s|kbit/s|MB|GB|KB|kB)(?![\w/])))")
# Inline code (`paths.1.loss=0.05`): a command or a setting, not a figure.
CODE = re.compile(r"`[^`\n]+`")
MEASURED = (INTERVAL, RATIO, SPREAD, PLAIN, WHOLE, SHARE)
# A region of settings or definitions (a table of presets, a test's bounds): its numbers are
# what was set, not what was measured.
SETTINGS = re.compile(r"<!-- settings: (?P<why>.*?) -->(?P<body>.*?)<!-- /settings -->", re.S)


# The run as a whole, in a figure's condition, and what it gives.
RUN = "run"
RUN_METRICS = ("minutes", "seconds_a_trial")


class FigureError(Exception):
    pass


@dataclass
class Summary:
    path: Path
    data: dict

    @property
    def run_id(self) -> str:
        return self.path.stem

    def condition(self, label: str) -> dict:
        for c in self.data["conditions"]:
            if c["group"] == label or c["label"] == label:
                return c
        names = ", ".join(c["group"] for c in self.data["conditions"])
        raise FigureError(f"{self.path.name} has no condition {label!r} (it has {names})")

    def metric(self, label: str, metric: str) -> dict | None:
        return self.condition(label)["metrics"].get(metric)

    def is_run(self, label: str) -> bool:
        return label == RUN and not any(c["label"] == RUN for c in self.data["conditions"])

    def run_value(self, metric: str, what: str) -> float | None:
        """A figure of the run as a whole: its trials' wall time (whole, or a trial: `mean`)
        or the machine's load average (`min`, `median`, `max` of those sampled)."""
        run = self.data["run"]
        if metric == "load":
            if what not in ("min", "median", "max"):
                raise FigureError(f"the run's load is its min, median or max, not {what!r}")
            return (run.get("load_avg_1m") or {}).get(what)
        if metric not in RUN_METRICS or what != "mean":
            raise FigureError(f"the run has no figure {metric} {what}: "
                              f"{', '.join(f'{m} mean' for m in RUN_METRICS)} or load max")
        started, finished = run.get("started"), run.get("finished")
        if not started or not finished:
            return None
        seconds = (datetime.fromisoformat(finished) - datetime.fromisoformat(started)
                   ).total_seconds()
        if metric == "minutes":
            return seconds / 60
        return seconds / run["trials"] if run.get("trials") else None  # a benchmark has rounds

    def paired(self, label: str, metric: str, statistic: str,
               baseline: str | None = None) -> dict:
        """The figure over trace pairs of group `label` (the summary's `paired` section) beside
        `baseline` (default: the first, the scenario's baseline condition)."""
        for f in self.data.get("paired") or ():
            if (f["condition"], f["metric"], f["statistic"]) == (label, metric, statistic) \
                    and baseline in (None, f["baseline"]):
                return f
        beside = f" beside {baseline}" if baseline else ""
        raise FigureError(f"{self.path.name} has no figure over pairs {label} {metric} "
                          f"{statistic}{beside} (a run over trace pairs has them: `paired`)")

    def paired_value(self, label: str, metric: str, what: str) -> float | None:
        """paired:STAT, paired-ratio:STAT, paired-diff:STAT, paired-lo:STAT, paired-hi:STAT;
        @GROUP after STAT: beside that group (a run's other baseline, its `baseline_abr`)."""
        kind, statistic = what.split(":", 1)
        statistic, _, baseline = statistic.partition("@")
        f = self.paired(label, metric, statistic, baseline or None)
        if kind == "paired":
            return f["value"]
        if kind == "paired-ratio":
            base = f.get("baseline_value")
            return None if not base or f["value"] is None else f["value"] / base
        if kind == "paired-diff":
            return f.get("difference")
        if kind in ("paired-lo", "paired-hi"):
            return (f.get("ci95") or [None, None])[kind == "paired-hi"]
        raise FigureError(f"unknown figure over pairs {what!r}: paired, paired-ratio, "
                          "paired-diff, paired-lo or paired-hi, then :STAT")

    def value(self, label: str, metric: str, what: str) -> float | None:
        """One figure of the summary: mean, lo, hi, pct (the mean as a percentage), min or max
        (over the condition's trials, for the figures the summary keeps per trial) or
        ratio:BASE (the mean over condition BASE's); of the condition `run`, the run's own."""
        if self.is_run(label):
            return self.run_value(metric, what)
        if what.startswith("paired"):
            return self.paired_value(label, metric, what)
        if what in ("min", "max"):  # over the condition's trials
            values = [t[metric] for t in self.condition(label).get("trials", [])
                      if t.get(metric) is not None]
            return (min if what == "min" else max)(values) if values else None
        m = self.metric(label, metric)
        if m is None or m["mean"] is None:
            return None
        if what == "mean":
            return m["mean"]
        if what == "median":  # a benchmark's figure: the median of its rounds
            return m.get("median")
        if what in ("lo", "hi"):
            return m["ci95"][0 if what == "lo" else 1]
        if what == "pct":
            return 100.0 * m["mean"]
        if what.startswith("ratio:"):
            base = self.metric(what.split(":", 1)[1], metric)
            if base is None or not base["mean"]:
                return None
            return m["mean"] / base["mean"]
        raise FigureError(f"unknown figure {what!r}: mean, median, lo, hi, pct, min, max or "
                          "ratio:CONDITION")


def load_summary(path: Path) -> Summary:
    if not path.is_file():
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        raise FigureError(f"no run summary {shown}: write it with `mpstream report RUN "
                          "--summary` into docs/data/")
    return Summary(path, json.loads(path.read_text()))


def _fmt(x: float | None, digits: int) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def cell(s: Summary, label: str, col: dict, baseline: str | None) -> str:
    metric, show, d = col["metric"], col.get("show", "mean"), int(col.get("digits", 2))
    if label in col.get("skip", ()):  # a figure the condition has no use for (one path's share)
        return "–"
    m = s.metric(label, metric)
    if m is None or m["mean"] is None:
        return "–"
    # `scale` shows a metric in another unit (1e-6: bytes as MB); a ratio needs none.
    k = float(col.get("scale", 1))
    m = {**m, "mean": m["mean"] * k, "ci95": [None if v is None else v * k for v in m["ci95"]]}
    lo, hi = m["ci95"]
    if show == "mean":
        return _fmt(m["mean"], d)
    if show == "median":
        return _fmt(None if m.get("median") is None else m["median"] * k, d)
    if show == "mean_ci":
        if lo is None:
            return _fmt(m["mean"], d)
        return f"{_fmt(m['mean'], d)} [{_fmt(lo, d)}, {_fmt(hi, d)}]"
    if show in ("pct", "pct_ci"):
        text = f"{_fmt(100 * m['mean'], d)}%"
        if show == "pct_ci" and lo is not None:
            text += f" [{_fmt(100 * lo, d)}, {_fmt(100 * hi, d)}]"
        return text
    if show == "ratio":
        base = col.get("baseline", baseline)
        if base is None:
            raise FigureError(f"column {col.get('head')!r}: a ratio needs a baseline")
        return _fmt(s.value(label, metric, f"ratio:{base}"), d)
    raise FigureError(f"column {col.get('head')!r}: unknown show {show!r} "
                      "(mean, mean_ci, pct, pct_ci, ratio)")


# A figure in a generated paragraph: {RUN CONDITION METRIC WHAT DIGITS}.
PROSE_FIGURE = re.compile(r"\{(?P<run>\S+) (?P<cond>\S+) (?P<metric>\S+) (?P<what>\S+) "
                          r"(?P<digits>\d)\}")


def render_text(spec: dict, data_dir: Path = DATA_DIR) -> str:
    """A generated paragraph: `text` with each {RUN CONDITION METRIC WHAT DIGITS} replaced by
    that figure, wrapped at 100 columns (a paragraph of Markdown)."""
    loaded: dict[str, Summary] = {}

    def figure(m: re.Match) -> str:
        if m["run"] not in loaded:
            loaded[m["run"]] = load_summary(data_dir / f"{m['run']}.json")
        value = loaded[m["run"]].value(m["cond"], m["metric"], m["what"])
        if value is None:
            raise FigureError(f"{m['run']} has no {m['cond']} {m['metric']} {m['what']}")
        return _fmt(value, int(m["digits"]))

    text = PROSE_FIGURE.sub(figure, " ".join(spec["text"].split()))
    return "\n".join(textwrap.wrap(text, 100, break_on_hyphens=False,
                                   break_long_words=False)) + "\n"


def render(spec_text: str, page: Path, data_dir: Path = DATA_DIR) -> str:
    try:
        spec = tomllib.loads(spec_text)
    except tomllib.TOMLDecodeError as e:
        raise FigureError(f"the figures spec does not parse: {e}") from e
    if "text" in spec:
        return render_text(spec, data_dir)
    if "reproduction" in spec:
        return render_reproduction(spec, page)
    s = load_summary((page.parent / spec["data"]).resolve())
    if "grid" in spec:
        return render_grid(s, spec, page)
    if "paired" in spec:
        return render_paired(s, spec)
    # A column may read another run of the same conditions (here against on a cluster).
    col_data = {c["data"]: load_summary((page.parent / c["data"]).resolve())
                for c in spec["columns"] if "data" in c}
    names = spec.get("names", {})
    rows = spec.get("rows") or [c["group"] for c in s.data["conditions"]]
    cols = spec["columns"]
    lines = ["| " + " | ".join([spec.get("first", "condition")] + [c["head"] for c in cols])
             + " |", "|" + "---|" * (len(cols) + 1)]
    for label in rows:
        for summary in (s, *col_data.values()):
            summary.condition(label)  # a row a summary lacks is an error, not an empty row
        # A row may have its own baseline (MPQUIC's rows against MPQUIC's `always`).
        base = spec.get("baselines", {}).get(label, spec.get("baseline"))
        cells = [names.get(label, label)] + [cell(col_data.get(c.get("data"), s), label, c, base)
                                             for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _num(x: float | None, published: float) -> str:
    """A figure at the precision its published value needs: three significant digits."""
    if x is None:
        return "–"
    scale = abs(published) or abs(x) or 1
    return f"{x:.{max(0, 2 - math.floor(math.log10(scale)))}f}"


def _loads(runs: list[dict]) -> str:
    def one(r: dict) -> str:
        load = r.get("load_avg_1m") or {}
        return f"{_fmt(load.get('median'), 1)} ({_fmt(load.get('max'), 1)})"

    return ", ".join(one(r) for r in runs)


def _headline_parts(spec: dict, page: Path) -> list[dict]:
    """The headline.json files the spec names (one, or a list: a set run in parts, a working
    session each)."""
    names = spec["reproduction"]
    parts = []
    for name in [names] if isinstance(names, str) else names:
        path = (page.parent / name).resolve()
        try:
            parts.append(json.loads(path.read_text()))
        except (OSError, ValueError) as e:
            raise FigureError(f"cannot read {path}: {e}") from e
    return parts


def render_reproduction(spec: dict, page: Path) -> str:
    """The headline reproduction (`reproduce --headline`'s headline.json, kept in docs/data/;
    a list of them for a set run in parts): a row a figure with its published value, band, new
    mean and interval, decision and trials; a line a part with its commit, date and load; a
    row a run with its trials against the published count and its machine time; then each
    figure that does not agree with the explanation from the spec's [explain] (keyed "SUMMARY
    CONDITION METRIC WHAT"), which a disagreement must have."""
    parts = _headline_parts(spec, page)
    explain = spec.get("explain", {})
    lines = ["| seed | figure (summary: condition, metric) | published | agrees within | new "
             "[anytime 95%] | decision | trials (published run's) |", "|" + "---|" * 7]
    notes = []
    for row in (row for data in parts for row in data["figures"]):
        key = f"{row['summary']} {row['condition']} {row['metric']} {row['what']}"
        pub = row["published"]
        what = "" if row["what"] == "mean" else f" {row['what'].replace(':', ' of ')}"
        new = (f"{_num(row['new_mean'], pub)} [{_num(row['new_low'], pub)}, "
               f"{_num(row['new_high'], pub)}]")
        lines.append(f"| {row['seed']} | {row['summary']}: {row['condition']}, "
                     f"`{row['metric']}`{what} | {_num(pub, pub)} | {_num(row['band'][0], pub)}"
                     f" to {_num(row['band'][1], pub)} | {new} | {row['decision']} | "
                     f"{row['trials']} ({row['fixed_trials']}) |")
        if row["decision"] != "agrees":
            if key not in explain and row["decision"] == "disagrees":
                raise FigureError(f"{key} disagrees and [explain] says nothing of why")
            notes.append(f"- **{row['summary']}: {row['condition']}, {row['metric']}** "
                         f"({row['decision']}): {explain.get(key, 'no explanation yet')}")
    lines += [""] + [_part_line(data) for data in parts]
    lines += ["", "| summary | conditions | trials run | the published run's count for them | "
              "machine minutes |", "|---|---|---|---|---|"]
    for r in (r for data in parts for r in data["runs"]):
        lines.append(f"| {r['summary']} | {', '.join(r['conditions'])} | {r['trials']} | "
                     f"{r['fixed_trials']} | {r['seconds'] / 60:.1f} |")
    return "\n".join(lines + (["", *notes] if notes else [])) + "\n"


def _part_line(data: dict) -> str:
    env = data["environment"]
    runs = sum(r["seconds"] for r in data["runs"])
    return (f"- {', '.join(r['summary'] for r in data['runs'])}: {data['agree']} of "
            f"{len(data['figures'])} figures agree, {data['disagree']} disagree, "
            f"{data['undecided']} undecided; {runs / 60:.0f} machine minutes, commit "
            f"{str(env.get('commit'))[:10]}, {data['date']}, kernel {env.get('kernel')}, "
            f"{env.get('cpus')} cores; the machine's 1-minute load while each run ran, median "
            f"(max): {_loads(data['runs'])}.")


def paired_cell(s: Summary, label: str, col: dict) -> str:
    """One figure over pairs: the condition's value, its difference from the baseline with the
    bootstrap interval, or its ratio to the baseline's value (blank for the baseline itself)."""
    show, d, k = col.get("show", "value"), int(col.get("digits", 2)), float(col.get("scale", 1))
    if label in col.get("skip", ()):
        return "–"
    f = s.paired(label, col["metric"], col["statistic"], col.get("baseline"))
    if show == "value":
        return _fmt(None if f["value"] is None else f["value"] * k, d)
    if f.get("baseline") is None:
        return "–"
    if show == "ratio":
        beside = f"@{col['baseline']}" if col.get("baseline") else ""
        return _fmt(s.paired_value(label, col["metric"], f"paired-ratio:{col['statistic']}"
                                   f"{beside}"), d)
    if show == "difference":
        diff, lo, hi = (None if v is None else v * k
                        for v in (f["difference"], *(f.get("ci95") or [None, None])))
        return f"{_fmt(diff, d)} [{_fmt(lo, d)}, {_fmt(hi, d)}]"
    raise FigureError(f"column {col.get('head')!r}: unknown show {show!r} over pairs "
                      "(value, difference, ratio)")


def render_paired(s: Summary, spec: dict) -> str:
    """Figures over trace pairs: a row a condition, a column a figure of `[[paired]]`."""
    names, cols = spec.get("names", {}), spec["paired"]
    rows = spec.get("rows") or [c["group"] for c in s.data["conditions"]]
    lines = ["| " + " | ".join([spec.get("first", "condition")] + [c["head"] for c in cols])
             + " |", "|" + "---|" * (len(cols) + 1)]
    for label in rows:
        lines.append("| " + " | ".join([names.get(label, label)]
                                       + [paired_cell(s, label, c) for c in cols]) + " |")
    return "\n".join(lines) + "\n"


def render_grid(s: Summary, spec: dict, page: Path) -> str:
    """One metric of a sweep's conditions laid out by its two factors: a row per value of one,
    a column per value of the other, each cell the condition `label` names ("{row}-{column}":
    375k-cubic). A column may come from a run of its own (`[grid.data]`, column = summary): a
    sweep too long for one sitting is run a column at a time, each run whole."""
    g, names = spec["grid"], spec.get("names", {})
    col_data = {col: load_summary((page.parent / path).resolve())
                for col, path in g.get("data", {}).items()}
    unknown = set(col_data) - set(g["columns"])
    if unknown:
        raise FigureError(f"[grid.data] names {sorted(unknown)}, which are not among the "
                          f"grid's columns {g['columns']}")
    lines = ["| " + " | ".join([spec.get("first", "condition")]
                               + [names.get(c, c) for c in g["columns"]]) + " |",
             "|" + "---|" * (len(g["columns"]) + 1)]
    for row in g["rows"]:
        cells = [names.get(row, row)]
        for col in g["columns"]:
            label = g.get("label", "{row}-{column}").format(row=row, column=col)
            summary = col_data.get(col, s)
            summary.condition(label)  # a cell the summary lacks is an error, not an empty cell
            cells.append(cell(summary, label, g, spec.get("baseline")))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@dataclass
class PageResult:
    text: str
    errors: list[str] = field(default_factory=list)
    tables: int = 0
    inline: int = 0
    unchecked: int = 0


def measured_shapes(text: str) -> list[re.Match]:
    """The places in `text` shaped like a measurement, each once: a decimal that is part of an
    interval, a ratio or a spread is that, not a plain figure as well."""
    found: list[re.Match] = []
    for pattern in MEASURED:
        found += [m for m in pattern.finditer(text)
                  if not any(m.start() < f.end() and f.start() < m.end() for f in found)]
    return found


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def check_page(page: Path, write: bool = False, data_dir: Path = DATA_DIR) -> PageResult:
    text = page.read_text()
    rel = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    res = PageResult(text)

    def regen(m: re.Match) -> str:
        try:
            body = render(m["spec"], page, data_dir)
        except (FigureError, KeyError) as e:
            res.errors.append(f"{rel}:{_line(text, m.start())}: {e}")
            return m[0]
        res.tables += 1
        if body != m["body"] and not write:
            res.errors.append(f"{rel}:{_line(text, m.start())}: the table is not what its data "
                              "gives (edited by hand, or the summary changed): run "
                              "`make docs-figures`")
        return f"<!-- figures\n{m['spec']}-->\n{body}<!-- /figures -->"

    res.text = BLOCK.sub(regen, text)

    summaries: dict[str, Summary] = {}
    for m in INLINE.finditer(text):
        res.inline += 1
        where = f"{rel}:{_line(text, m.start())}"
        try:
            if m["run"] not in summaries:
                summaries[m["run"]] = load_summary(data_dir / f"{m['run']}.json")
            value = summaries[m["run"]].value(m["cond"], m["metric"], m["what"])
        except FigureError as e:
            res.errors.append(f"{where}: {e}")
            continue
        written = m["num"]
        digits = len(written.split(".")[1]) if "." in written else 0
        if value is None or _fmt(value, digits) != written:
            res.errors.append(f"{where}: {written} is not {m['run']}'s {m['cond']} "
                              f"{m['metric']} {m['what']} ({_fmt(value, digits)})")

    # What is left once the generated tables, the sourced numbers, code and the regions marked
    # unchecked are taken out must hold nothing shaped like a measurement.
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m[0])

    rest = FENCE.sub(blank, BLOCK.sub(blank, SETTINGS.sub(blank, text)))
    for m in UNCHECKED.finditer(rest):
        res.unchecked += len(measured_shapes(m["body"]))
    rest = CODE.sub(blank, UNCHECKED.sub(blank, INLINE.sub(blank, rest)))
    for m in measured_shapes(rest):
        res.errors.append(f"{rel}:{_line(rest, m.start())}: '{m[0].strip()}' reads as a "
                          "measurement with no source: generate it from docs/data/, tie it to "
                          "a summary with <!--fig ...-->, mark it <!--setting--> when it is a "
                          "setting or a definition, or mark the region unchecked with the reason")
    return res


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Quote:
    """A figure a page quotes from a summary: its condition, metric and what of it (mean,
    ratio:BASE, ...; a table's mean_ci is its mean), for `mpstream reproduce`."""

    page: str
    run: str
    condition: str
    metric: str
    what: str


def quotes(run: str, page_list: list[Path] | None = None) -> list[Quote]:
    """Every figure of summary `run` (its file's stem) that a page quotes, each once per page:
    the numbers tied to it inline and the cells of the tables generated from it."""
    found: dict[Quote, None] = {}
    for page in page_list or pages():
        text = page.read_text()
        rel = str(page.relative_to(ROOT) if page.is_relative_to(ROOT) else page)
        for m in INLINE.finditer(text):
            if m["run"] == run and m["cond"] != RUN:
                found[Quote(rel, run, m["cond"], m["metric"], m["what"])] = None
        for m in BLOCK.finditer(text):
            try:
                spec = tomllib.loads(m["spec"])
            except tomllib.TOMLDecodeError:
                continue  # the check names it
            for f in PROSE_FIGURE.finditer(spec.get("text", "")):
                if f["run"] == run and f["cond"] != RUN:
                    found[Quote(rel, run, f["cond"], f["metric"], f["what"])] = None
            if "text" in spec or "reproduction" in spec:  # no figure of one summary
                continue
            for label, col, base in _cells(spec, page, run):
                what = "ratio:" + base if col.get("show") == "ratio" and base else "mean"
                found[Quote(rel, run, label, col["metric"], what)] = None
    return list(found)


def _cells(spec: dict, page: Path, run: str) -> list[tuple[str, dict, str | None]]:
    """(condition, column, baseline) of each cell of a figures table that reads summary `run`."""
    def reads(path: str | None) -> bool:
        return path is not None and Path(path).stem == run

    out = []
    if "paired" in spec:
        return []  # figures over trace pairs: reproduce sets means beside means, not these
    if "grid" in spec:
        g = spec["grid"]
        for row in g["rows"]:
            for column in g["columns"]:
                if reads(g.get("data", {}).get(column, spec["data"])):
                    label = g.get("label", "{row}-{column}").format(row=row, column=column)
                    out.append((label, g, spec.get("baseline")))
        return out
    rows = spec.get("rows")
    if rows is None:
        try:
            rows = [c["group"] for c in load_summary((page.parent / spec["data"]).resolve())
                    .data["conditions"]]
        except FigureError:
            return []
    for label in rows:
        base = spec.get("baselines", {}).get(label, spec.get("baseline"))
        for col in spec["columns"]:
            if reads(col.get("data", spec["data"])) and label not in col.get("skip", ()):
                out.append((label, col, col.get("baseline", base)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="regenerate the tables")
    ap.add_argument("files", nargs="*", type=Path, help="pages (default: README.md, docs/)")
    args = ap.parse_args(argv)
    errors: list[str] = []
    tables = inline = unchecked = 0
    for page in [p.resolve() for p in args.files] or pages():
        res = check_page(page, write=args.write)
        if args.write and res.text != page.read_text():
            page.write_text(res.text)
            print(f"wrote {page.relative_to(ROOT)}")
        errors += res.errors
        tables, inline, unchecked = (tables + res.tables, inline + res.inline,
                                     unchecked + res.unchecked)
    data = len(list(DATA_DIR.glob("*.json")))
    for e in errors:
        print(e, file=sys.stderr)
    print(f"{tables} generated tables and {inline} sourced figures checked against {data} run "
          f"summaries in docs/data/; {unchecked} figures in regions marked unchecked")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
