"""`mpstream list`: every kind listed one way, each listing holding every shipped file and every
registered name, `--json` one document; the spellings of before still list and name the new
one; `mpstream --help` groups the commands by job; `play --help` names the allowed values from
the registries."""

import contextlib
import json

import pytest
from click.testing import CliRunner

from mpstream import errors
from mpstream.cli import COMMAND_GROUPS, cli
from mpstream.deployment import load_deployment, preset_names
from mpstream.paths import REPO_ROOT
from mpstream.player.abr import catalog
from mpstream.runner.cost import TRIAL_OVERHEAD_S
from mpstream.runner.listing import KINDS, one_line
from mpstream.runner.metrics.metric import declared_names
from mpstream.runner.play import play
from mpstream.runner.scenario import expand_trials, load_scenario
from mpstream.transports import hop
from mpstream.transports.base import TRANSPORTS
from mpstream.transports.pathpolicy import POLICIES


@pytest.fixture(autouse=True)
def no_hop_build(monkeypatch):
    """The QUIC hop's schedulers come from its program, which would be built on first use: here
    it is not there, and the listing says so."""
    def not_built():
        raise errors.UserError("the QUIC hop is not built")

    monkeypatch.setattr(hop, "quic_schedulers", not_built)
    monkeypatch.setattr(errors, "_warned", set())  # each test sees its own warnings


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output + (result.stderr or "")
    return result


def listed(kind: str) -> list[dict]:
    rows = json.loads(invoke("list", kind, "--json").stdout)
    assert all(isinstance(r["name"], str) and isinstance(r["description"], str) for r in rows)
    return rows


def stems(folder: str) -> set[str]:
    return {p.stem for p in (REPO_ROOT / folder).glob("*.toml")}


def schedulers() -> set[str]:
    """Each transport's, where this machine can say (the fixture's hop cannot)."""
    found: set[str] = set()
    for transport in TRANSPORTS.values():
        with contextlib.suppress(errors.UserError):
            found |= set(transport.schedulers())
    return found


# Every kind against what ships (the files, read here from their folders) or what is registered.
SHIPPED = {
    "scenarios": lambda: stems("runner/scenarios"),
    "profiles": lambda: stems("netem/profiles"),
    "deployments": lambda: stems("mpstream/deployments"),
    "spaces": lambda: stems("runner/tune/spaces"),
    "summaries": lambda: {p.stem for p in (REPO_ROOT / "docs/data").glob("*.json")},
    "transports": lambda: set(TRANSPORTS.names()),
    "policies": lambda: set(POLICIES),
    "abr": lambda: {name for rules in catalog().values() for name in rules},
    "metrics": lambda: set(declared_names()),
    "schedulers": schedulers,
}


@pytest.mark.parametrize("kind", sorted(SHIPPED))
def test_a_listing_holds_everything_shipped_or_registered(kind):
    names = {row["name"] for row in listed(kind)}
    assert SHIPPED[kind]() - names == set()


def test_every_kind_lists_as_json_and_without_a_kind_the_kinds():
    kinds = json.loads(invoke("list", "--json").stdout)
    assert [row["name"] for row in kinds] == list(KINDS)
    for kind in KINDS:
        assert isinstance(listed(kind), list)
    table = invoke("list", "deployments").stdout
    assert all(name in table for name in preset_names())


def test_a_scenario_row_has_its_conditions_players_trials_and_machine_time():
    [demo] = [row for row in listed("scenarios") if row["name"] == "demo"]
    scenario = load_scenario("demo")
    assert demo["conditions"] == [c.label for c in scenario.all_conditions()]
    assert demo["players"] == scenario.players and demo["trials"] == scenario.trials
    trials = len(expand_trials(scenario))
    assert demo["machine_s"] == round(trials * (scenario.duration_s + TRIAL_OVERHEAD_S))
    assert "machine time" in invoke("list", "scenarios").stdout


def test_a_scenario_or_profile_this_machine_cannot_run_is_listed_with_what_it_lacks(
        tmp_path, monkeypatch):
    monkeypatch.setenv("MPSTREAM_TRACES", str(tmp_path))  # no trace fetched
    [profile] = [r for r in listed("profiles") if r["name"] == "wifi-cellular"]
    assert "mpstream traces fetch TMobile-LTE-short" in profile["unavailable"]
    assert profile["description"].startswith("WiFi plus cellular")
    [scenario] = [r for r in listed("scenarios") if r["name"] == "wifi-cellular"]
    assert "TMobile-LTE-short" in scenario["unavailable"] and scenario["conditions"]


def test_a_transport_whose_schedulers_cannot_be_read_says_why():
    rows = listed("schedulers")
    [mpquic] = [r for r in rows if r["transport"] == "mpquic"]
    assert mpquic["unavailable"] == "the QUIC hop is not built"
    assert [r["name"] for r in rows if r["transport"] == "mptcp" and r["default"]] == ["default"]


@pytest.mark.parametrize(("old", "new", "shown"), [
    (["deployments"], "mpstream list deployments", "mptcp-tuned"),
    (["netem", "list"], "mpstream list profiles", "thesis-bandwidth-balanced"),
    (["traces", "list"], "mpstream list traces", "TMobile-LTE-short"),
    (["play", "--list-abr"], "mpstream list abr", "robustmpc"),
    (["play", "--list-schedulers"], "mpstream list schedulers", "finish-together"),
    (["tune", "--list-spaces"], "mpstream list spaces", "server.cc"),
])
def test_an_old_spelling_still_lists_and_names_the_new_one(old, new, shown):
    result = invoke(*old)
    assert shown in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"`{new}`" in warnings[0]


def test_the_old_spellings_are_not_shown_in_help():
    assert "list" not in invoke("netem", "--help").stdout.split("Commands:")[1]
    assert "--list-abr" not in invoke("play", "--help").stdout
    assert "--list-spaces" not in invoke("tune", "--help").stdout


def test_help_groups_the_commands_by_job_with_whole_one_liners():
    text = invoke("--help").stdout
    headings = [line.removesuffix(":") for line in text.splitlines()
                if line.endswith(":") and not line.startswith(" ") and line != "Options:"]
    assert [h.split()[0].rstrip(":").lower() for h in headings] == [
        "compare", "tune", "live", "reproduce", "inspect", "cluster", "plumbing"]
    assert headings == list(COMMAND_GROUPS)
    for group in COMMAND_GROUPS.values():
        for name in group:
            assert f"\n  {name} " in text
    assert "..." not in text.split("Compare")[1]  # click's cut one-liners end so


def test_play_help_names_the_allowed_values_from_the_registries():
    options = {p.opts[0]: p for p in play.params}
    assert list(options["--transport"].type.choices) == TRANSPORTS.names()
    assert list(options["--path-policy"].type.choices) == list(POLICIES)
    for transport in TRANSPORTS.values():
        assert f"{transport.name}: {transport.summary}" in options["--transport"].help
    for name in POLICIES:
        assert f"{name}: " in options["--path-policy"].help
    for name in {n for rules in catalog().values() for n in rules}:
        assert name in options["--abr"].help
    for name in preset_names():
        assert name in options["--deployment"].help
    # A default a deployment changes is said, with the deployment that changes it.
    brought = [d for d in map(load_deployment, preset_names()) if d.path_policy]
    assert brought, "a preset brings a path policy (mptcp-tuned: fast-start)"
    for dep in brought:
        assert f"{dep.name} brings {dep.path_policy}" in options["--path-policy"].help
    assert "--scheduler" in options and "mpstream list schedulers" in options["--scheduler"].help


def test_one_line_is_the_first_sentence_or_its_first_clause():
    assert one_line("Two paths.\n20 s in, one fails. More.") == "Two paths"
    assert one_line("Which rules gain? dash.js with its own") == "Which rules gain?"
    assert one_line("Thesis runs, e.g. balanced paths") == "Thesis runs, e.g. balanced paths"
    long = "Kernel MPTCP tuned for unbalanced paths: " + "the server caps its window " * 5 + "."
    assert one_line(long) == "Kernel MPTCP tuned for unbalanced paths"
