"""docs/commands.md lists every command and every option the CLI has, and nothing it lacks:
the synopsis under each `## mpstream ...` heading is compared with the click command."""

import re
from pathlib import Path

import click
import pytest

from mpstream.cli import cli
from mpstream.paths import REPO_ROOT

DOC = REPO_ROOT / "docs" / "commands.md"


def leaf_commands():
    ctx = click.Context(cli)

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), [*path, name])
        else:
            yield " ".join(path), cmd

    return dict(walk(cli, ["mpstream"]))


def documented() -> dict[str, set[str]]:
    """heading -> the long options named in the code block(s) of its section."""
    sections: dict[str, set[str]] = {}
    current = None
    in_code = False
    for line in DOC.read_text().splitlines():
        heading = re.match(r"^## (mpstream( [a-z-]+)*)\s*$", line)
        if heading:
            current = heading.group(1)
            sections[current] = set()
            continue
        if line.startswith("```"):
            in_code = not in_code
            continue
        if current and in_code:
            sections[current] |= set(re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", line))
    return sections


def options(cmd: click.Command) -> set[str]:
    names = set()
    for param in cmd.params:
        if isinstance(param, click.Option):
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
