"""`mpstream list [KIND] [--json]`: every kind of thing mpstream has, listed one way.

Each kind's rows are read from where the kind is defined (a registry, a folder of shipped files,
a table in the code), so a new scenario, profile or transport is listed without a change here.
A row is a JSON object with at least `name` and `description` (one line); `--json` prints the
list of them as one document, and a person gets a table. The runner lists, since it may import
every part whose kinds it names (the core may not: docs/architecture.md)."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from mpstream.errors import UserError
from mpstream.output import json_option, print_json

Row = dict[str, Any]
# A table column: its heading, and what of a row it shows.
Column = tuple[str, Callable[[Row], Any]]

# A first sentence longer than this is cut at its first clause (its first ":" or ";").
LONG_SENTENCE = 100


def one_line(text: str) -> str:
    """A description's first sentence (or, when that runs long, its first clause), on one
    line: the files' descriptions are paragraphs."""
    words = " ".join(text.split())
    # A sentence ends at a "?", or at a "." before a capital or a digit ("e.g. a" goes on).
    sentence = re.split(r"(?<=\?)\s+|(?<=\.)\s+(?=[A-Z0-9])", words, maxsplit=1)[0]
    if len(sentence) > LONG_SENTENCE:
        sentence = re.split(r"[:;]\s", sentence, maxsplit=1)[0]
    return sentence.removesuffix(".")


# --- the kinds, each from its own registry ---------------------------------------------------


def scenarios() -> list[Row]:
    from mpstream.runner.cost import Cost, machine_time
    from mpstream.runner.scenario import expand_trials, load_scenario, scenario_names
    from mpstream.runner.trial import pair_refusals
    from mpstream.runner.workloads import workload_for

    rows: list[Row] = []
    for name in scenario_names():
        try:
            scenario = load_scenario(name)
            unavailable = "; ".join(pair_refusals(scenario)) or None  # its pairs' traces
        except UserError as exc:  # listed all the same, with what it lacks here (a trace)
            scenario, unavailable = load_scenario(name, check=False), str(exc)
        # A scenario that stops when sure may take up to max_trials rounds: say the most.
        rounds = scenario.max_trials if scenario.until else scenario.trials
        # Every trial the run would plan (players, browsers, codecs and rules crossed), each
        # the scenario's duration plus the measured overhead a trial (runner/cost.py).
        cost = Cost.of_trials(len(expand_trials(scenario, rounds)), scenario.duration_s)
        plays = workload_for(scenario.kind).plays_video
        rows.append({
            "name": name, "description": one_line(scenario.description),
            "workload": scenario.kind,
            "conditions": [c.label for c in scenario.all_conditions()],
            "players": list(scenario.players) if plays else [],
            "trials": rounds, "until": scenario.until, "duration_s": scenario.duration_s,
            "machine_s": round(cost.seconds), "machine_time": machine_time(cost.seconds),
            "unavailable": unavailable})
    return rows


def profiles() -> list[Row]:
    from mpstream.netem.profile import PRESETS_DIR, load_profile, preset_names

    rows: list[Row] = []
    for name in preset_names():
        try:
            profile = load_profile(name)
        except UserError as exc:
            # A preset whose trace is not on this machine cannot be built: its file still says
            # what it is.
            about = tomllib.loads((PRESETS_DIR / f"{name}.toml").read_text())
            rows.append({"name": name, "description": one_line(about.get("description", "")),
                         "mode": about.get("mode", "mptcp"), "paths": [],
                         "unavailable": str(exc)})
            continue
        rows.append({"name": name, "description": one_line(profile.description),
                     "mode": profile.mode,
                     "paths": [profile.link(i, "downlink").describe()
                               for i in range(len(profile.paths))],
                     "unavailable": None})
    return rows


def traces() -> list[Row]:
    from mpstream.netem.traces import PUBLISHED

    rows: list[Row] = []
    for name, trace in PUBLISHED.items():
        folder = trace.folder()
        rows.append({"name": name, "description": trace.description,
                     "folder": None if folder is None else str(folder),
                     "unavailable": None if folder else f"`mpstream traces fetch {name}`"})
    return rows


def pairs() -> list[Row]:
    from mpstream.netem.tracepairs import load_pair_set, pair_set_names

    rows: list[Row] = []
    for name in pair_set_names():
        found = load_pair_set(name)
        rows.append({"name": name, "description": one_line(found.description),
                     "pairs": len(found.pairs), "window_s": found.window_s,
                     "cellular": sorted({p.cellular.trace for p in found.pairs})})
    return rows


def single_paths() -> list[Row]:
    from mpstream.netem.singlepath import SINGLE_PATHS

    return [{"name": name, "description": summary} for name, summary in SINGLE_PATHS.items()]


def topologies() -> list[Row]:
    from mpstream.netem.topology import live_topologies

    return [{"name": topo["name"],
             "description": f"{topo.get('profile')}: " + (
                 "up" if topo["healthy"]
                 else f"broken: remove it with `mpstream netem down {topo['name']}`"),
             "profile": topo.get("profile"), "namespaces": topo["namespaces"],
             "healthy": topo["healthy"]} for topo in live_topologies()]


def deployments() -> list[Row]:
    from mpstream.deployment import load_deployment, preset_names

    return [{"name": dep.name, "description": one_line(dep.description),
             "path_policy": dep.path_policy}
            for dep in map(load_deployment, preset_names())]


def transports() -> list[Row]:
    from mpstream.transports.base import TRANSPORTS

    return [{"name": t.name, "description": t.summary, "label": t.label,
             "network_mode": t.network_mode, "path_policies": list(t.path_policies)}
            for t in TRANSPORTS.values()]


def schedulers() -> list[Row]:
    from mpstream.transports.base import TRANSPORTS

    rows: list[Row] = []
    for transport in TRANSPORTS.values():
        try:
            found = transport.schedulers()
        except UserError as exc:  # e.g. the QUIC hop not built: say so, list the others
            rows.append({"name": "?", "description": "", "transport": transport.name,
                         "default": False, "unavailable": str(exc)})
            continue
        # A transport lists its default first.
        rows += [{"name": name, "description": what, "transport": transport.name,
                  "default": i == 0, "unavailable": None}
                 for i, (name, what) in enumerate(found.items())]
    return rows


def policies() -> list[Row]:
    from mpstream.transports.base import TRANSPORTS
    from mpstream.transports.pathpolicy import DEFAULT_POLICY, POLICIES

    return [{"name": name, "description": summary, "default": name == DEFAULT_POLICY,
             "transports": [t.name for t in TRANSPORTS.values() if name in t.path_policies]}
            for name, summary in POLICIES.items()]


def abr_rules() -> list[Row]:
    from mpstream.player.abr import catalog, default_abr

    return [{"name": rule.name, "description": rule.about, "player": player,
             "default": rule.name == default_abr(player),
             "whose": "the player's own" if rule.kind == "player" else "mpstream",
             "params": list(rule.params)}
            for player, rules in catalog().items() for rule in rules.values()]


def metrics() -> list[Row]:
    from mpstream.runner.metrics.metric import declared_metrics

    return [{"name": f"path<i>_{m.name}" if m.per_path else m.name, "description": m.label,
             "unit": m.unit, "per_path": m.per_path} for m in declared_metrics()]


def spaces() -> list[Row]:
    from mpstream.runner.tune.space import load_space, space_names

    rows: list[Row] = []
    for name in space_names():
        try:  # checked against this machine's kernel settings, as `tune` checks it
            space = load_space(name)
        except UserError as exc:
            rows.append({"name": name, "description": "", "settings": {},
                         "unavailable": str(exc)})
            continue
        rows.append({"name": name, "description": one_line(space.description),
                     "settings": {c.name: {"low": c.low, "high": c.high, "log": c.log}
                                  if c.is_range else list(c.values) for c in space.choices},
                     "unavailable": None})
    return rows


def summaries() -> list[Row]:
    from mpstream.runner.cost import machine_time
    from mpstream.runner.reproduce import reproduction_cost, summary_files

    rows: list[Row] = []
    for path in summary_files([], every=True):
        run = json.loads(path.read_text())["run"]
        cost = reproduction_cost(path, None, None)
        rows.append({"name": path.stem, "description": run.get("command") or "",
                     "scenario": run.get("scenario"), "trials": run.get("trials"),
                     # None: made by a benchmark or a script, run by hand
                     "machine_s": None if cost is None else round(cost.seconds),
                     "machine_time": None if cost is None else machine_time(cost.seconds)})
    return rows


def _settings(settings: dict[str, Any]) -> str:
    """A space's settings, each with its values or its range."""
    return "; ".join(
        f"{name}: {v['low']}..{v['high']}" + (" (log)" if v["log"] else "")
        if isinstance(v, dict) else f"{name}: {', '.join(json.dumps(x) for x in v)}"
        for name, v in settings.items())


@dataclass(frozen=True)
class Kind:
    """A kind of thing mpstream has: what it is (one line), its rows, and the table's columns
    between a row's name and its description."""

    about: str
    rows: Callable[[], list[Row]]
    columns: tuple[Column, ...] = ()


KINDS: dict[str, Kind] = {
    "scenarios": Kind(
        "comparisons `mpstream run` runs (runner/scenarios/), with their machine time",
        scenarios, (("conditions", lambda r: len(r["conditions"])),
                    ("players", itemgetter("players")), ("trials", itemgetter("trials")),
                    ("machine time", itemgetter("machine_time")))),
    "profiles": Kind(
        "emulated networks (netem/profiles/): a condition's or `--profile`", profiles,
        (("mode", itemgetter("mode")), ("paths (downlink)", lambda r: "; ".join(r["paths"])))),
    "traces": Kind("published link traces a profile's path may replay", traces,
                   (("here", itemgetter("folder")),)),
    "pairs": Kind("sets of WiFi x cellular trace pairs a scenario plays (netem/pairs/): "
                  "`pairs`", pairs, (("pairs", itemgetter("pairs")),
                                     ("window (s)", itemgetter("window_s")))),
    "single-paths": Kind("what a user without multipath has, a condition's `single_path`",
                         single_paths),
    "topologies": Kind("emulated networks up on this machine (`mpstream netem up`)",
                       topologies, (("namespaces", itemgetter("namespaces")),)),
    "deployments": Kind(
        "what the server and client run over a network (mpstream/deployments/): "
        "`--deployment`", deployments, (("path policy", itemgetter("path_policy")),)),
    "transports": Kind("how a client reaches the server: `--transport`", transports,
                       (("paths", itemgetter("network_mode")),)),
    "schedulers": Kind(
        "each transport's path schedulers on this machine: `--scheduler`", schedulers,
        (("transport", itemgetter("transport")), ("default", itemgetter("default")))),
    "policies": Kind(
        "when held-back paths carry data: `--path-policy`", policies,
        (("default", itemgetter("default")), ("transports", itemgetter("transports")))),
    "abr": Kind(
        "adaptation rules each player supports: `--abr`", abr_rules,
        (("player", itemgetter("player")), ("default", itemgetter("default")),
         ("whose", itemgetter("whose")), ("parameters", itemgetter("params")))),
    "metrics": Kind("a trial's figures: the report's, `--until METRIC:WIDTH`'s", metrics,
                    (("unit", itemgetter("unit")),)),
    "spaces": Kind("what `mpstream tune --space` may change (runner/tune/spaces/)", spaces,
                   (("settings", lambda r: _settings(r["settings"])),)),
    "summaries": Kind(
        "published run summaries (docs/data/): `mpstream reproduce`", summaries,
        (("trials", itemgetter("trials")),
         ("machine time", lambda r: r["machine_time"] or "its command, by hand"))),
}


def kinds() -> list[Row]:
    return [{"name": name, "description": kind.about} for name, kind in KINDS.items()]


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, bool):
        return "yes" if value else ""
    return "" if value is None else str(value)


def show(title: str, rows: list[Row], columns: tuple[Column, ...]) -> None:
    """The rows as a table, then what each row that cannot be used here lacks."""
    # Wide when piped, so a row stays greppable on its line.
    console = Console(width=None if sys.stdout.isatty() else 200)
    table = Table(title=title, title_justify="left")
    for heading in ("name", *(c[0] for c in columns), "description"):
        table.add_column(heading)
    for row in rows:
        # As text, not markup: a description may hold "[server]".
        table.add_row(*map(Text, [row["name"], *(_cell(get(row)) for _, get in columns),
                                  row["description"]]))
    console.print(table)
    for row in rows:
        if row.get("unavailable"):
            console.print(f"{row['name']}: not usable here: {row['unavailable']}",
                          markup=False, highlight=False, soft_wrap=True)


@click.command(name="list", help=(
    "List every thing of KIND, one a row with what it is (a scenario also with its conditions, "
    "players, trials and machine time); without KIND, the kinds. KIND is one of "
    + ", ".join(KINDS) + "."))
@click.argument("kind", required=False, type=click.Choice(list(KINDS)), metavar="[KIND]")
@json_option
def list_kinds(kind: str | None, as_json: bool) -> None:
    print_kind(kind, as_json)


def print_kind(kind: str | None, as_json: bool = False) -> None:
    """The listing of KIND (None: of the kinds), as a table or one JSON document."""
    rows = kinds() if kind is None else KINDS[kind].rows()
    if as_json:
        print_json(rows)
    elif kind is None:
        show("kinds (`mpstream list KIND`)", rows, ())
    else:
        show(f"{kind}: {KINDS[kind].about}", rows, KINDS[kind].columns)
