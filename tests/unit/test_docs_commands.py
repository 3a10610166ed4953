"""docs/commands.md lists every command and every option the CLI has, and nothing it lacks:
the synopsis under each `## mpstream ...` heading is compared with the click command. The
values a page lists for an option (`--path-policy always|backup|...`) are those the program
takes: the option's choices, else the registry they come from. Spellings kept for old scripts
(hidden from --help) are left out."""

import re
from collections.abc import Callable, Iterable
from pathlib import Path

import click
import pytest

from mpstream.cli import cli
from mpstream.paths import REPO_ROOT
from mpstream.player.abr import catalog
from mpstream.transports.base import TRANSPORTS
from mpstream.transports.pathpolicy import POLICIES

DOC = REPO_ROOT / "docs" / "commands.md"
DEPLOYMENTS_DOC = REPO_ROOT / "docs" / "deployments.md"


def leaf_commands():
    ctx = click.Context(cli)

    def walk(cmd, path):
        if cmd.hidden:
            return
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), [*path, name])
        else:
            yield " ".join(path), cmd

    return dict(walk(cli, ["mpstream"]))


def sections() -> dict[str, str]:
    """heading (`mpstream netem up`) -> the text of its section."""
    found: dict[str, list[str]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        heading = re.match(r"^## (mpstream( [a-z-]+)*)\s*$", line)
        if heading:
            current = heading.group(1)
            found[current] = []
        elif line.startswith("## "):
            current = None
        elif current:
            found[current].append(line)
    return {heading: "\n".join(lines) for heading, lines in found.items()}


def documented() -> dict[str, set[str]]:
    """heading -> the long options named in the code block(s) of its section."""
    out: dict[str, set[str]] = {}
    for heading, text in sections().items():
        blocks = re.findall(r"^```.*?^```", text, flags=re.S | re.M)
        out[heading] = set(re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", "\n".join(blocks)))
    return out


def options(cmd: click.Command) -> set[str]:
    names = set()
    for param in cmd.params:
        if isinstance(param, click.Option) and not param.hidden:
            names |= {o for o in [*param.opts, *param.secondary_opts] if o.startswith("--")}
    return names - {"--help"}


COMMANDS = leaf_commands()


def test_every_command_has_a_section_and_every_section_a_command():
    docs = documented()
    assert sorted(set(COMMANDS) - set(docs)) == [], (
        f"commands without a `## <command>` section in {DOC}")
    assert sorted(set(docs) - set(COMMANDS)) == [], f"sections in {DOC} for no command"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_synopsis_names_exactly_the_options(name):
    docs = documented().get(name, set())
    have = options(COMMANDS[name])
    assert sorted(have - docs) == [], f"{DOC}: add these options of `{name}` to its synopsis"
    assert sorted(docs - have) == [], f"{DOC}: `{name}` has no such options: remove them"


def test_the_readme_links_the_reference():
    readme = (REPO_ROOT / "README.md").read_text()
    assert "docs/commands.md" in readme
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (REPO_ROOT / link).exists(), f"README links {link}, which does not exist"


def test_help_of_every_command_works():
    for name, cmd in COMMANDS.items():
        assert cmd.help, f"`{name}` has no help text"
    assert Path(DOC).read_text().count("```") % 2 == 0


# --- the values the docs list --------------------------------------------------------------

VALUE = r"[a-z0-9][a-z0-9.-]*"
ALTERNATION = re.compile(rf"{VALUE}(?:[ \t]*\|[ \t]*{VALUE})+")


def _every_scheduler() -> list[str]:
    # Only asked when a page lists schedulers: the QUIC hop's come from its built program.
    return [name for t in TRANSPORTS.values() for name in t.schedulers()]


# Where an option's (or a deployment field's) values come from when it is no click.Choice.
REGISTRIES: dict[str, Callable[[], Iterable[str]]] = {
    "--transport": TRANSPORTS.names,
    "--path-policy": lambda: POLICIES,
    "path_policy": lambda: POLICIES,
    "--scheduler": _every_scheduler,
    "--abr": lambda: [name for rules in catalog().values() for name in rules],
}


def listed_values(text: str, key: str) -> list[set[str]]:
    """Each set of values `text` lists for `key` (an option or a field): the first a|b|c after
    it on its line, when no other option, code span or bracket comes between them."""
    found = []
    for line in text.splitlines():
        for m in re.finditer(rf"(?<![\w-]){re.escape(key)}(?![\w-])", line):
            rest = line[m.end():]
            run = ALTERNATION.search(rest)
            if run and not re.search(r"--|`|\[", rest[:run.start()]):
                found.append(set(re.split(r"[ \t]*\|[ \t]*", run.group())))
    return found


def drift(text: str, key: str, allowed: Iterable[str]) -> list[str]:
    """What `text` lists for `key` against the values the program takes."""
    allowed = set(allowed)
    out = []
    for listed in listed_values(text, key):
        if listed - allowed:
            out.append(f"{key}: no such value {', '.join(sorted(listed - allowed))}")
        if allowed - listed:
            out.append(f"{key}: lists {'|'.join(sorted(listed))} without "
                       f"{', '.join(sorted(allowed - listed))}")
    return out


def allowed_values(cmd: click.Command, option: str) -> Iterable[str] | None:
    """The values `option` of `cmd` takes: its choices, else its registry's names (None: it
    takes any value)."""
    param = next(p for p in cmd.params if option in getattr(p, "opts", ()))
    if isinstance(param.type, click.Choice):
        return [str(c) for c in param.type.choices]
    return REGISTRIES[option]() if option in REGISTRIES else None


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_values_listed_for_an_option_are_those_it_takes(name):
    text = sections().get(name, "")
    problems = []
    for option in sorted(options(COMMANDS[name])):
        if listed_values(text, option):
            allowed = allowed_values(COMMANDS[name], option)
            assert allowed is not None, f"{DOC}: `{name}` lists values for {option}, which " \
                                        "takes any value"
            problems += drift(text, option, allowed)
    assert problems == [], f"{DOC}, `{name}`: {problems}"


def test_the_deployments_page_lists_what_the_registries_have():
    text = DEPLOYMENTS_DOC.read_text()
    problems = [p for key in ("path_policy", "--path-policy", "--transport")
                for p in drift(text, key, REGISTRIES[key]())]
    assert problems == [], f"{DEPLOYMENTS_DOC}: {problems}"


def test_a_value_missing_from_a_listing_is_named():
    text = ('    path_policy = "always"   # optional: always | backup\n'
            "mpstream play [--path-policy always|backup|deadline [--deadline-marks LOW,HIGH]]\n"
            "`--path-policy` says when the paths carry data: always|backup (prose)\n")
    assert listed_values(text, "path_policy") == [{"always", "backup"}]
    assert listed_values(text, "--path-policy") == [{"always", "backup", "deadline"}]
    assert drift(text, "--path-policy", ["always", "backup", "deadline"]) == []
    assert drift(text, "--path-policy", ["always", "backup", "deadline", "handover"]) == [
        "--path-policy: lists always|backup|deadline without handover"]
    assert drift(text, "path_policy", ["always"]) == ["path_policy: no such value backup"]
