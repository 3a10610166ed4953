"""The README's "What do you want to do?" table runs as shown: every command in it is one the CLI
has, each option it gives is one that command takes (its --help runs and names it), and each
shipped thing it names (a scenario, a network profile, a tune space, a published summary)
exists."""

import re
import shlex

import click
import pytest
from click.testing import CliRunner

from mpstream.cli import cli
from mpstream.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
# The option whose value names a shipped file, and where those files are.
SHIPPED = {"--profile": "netem/profiles", "--space": "runner/tune/spaces"}
# Commands whose first argument is a shipped scenario (a name in runner/scenarios/).
TAKES_SCENARIO = {("run",), ("tune",)}


def job_commands() -> list[str]:
    text = README.read_text()
    table = text.split("## What do you want to do?", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "`mpstream" in line]
    return [code for row in rows for code in re.findall(r"`(mpstream [^`]+)`", row)]


def resolve(argv: list[str]) -> tuple[tuple[str, ...], click.Command, list[str]]:
    """(the command's path, the click command, the arguments after it)."""
    command: click.Command = cli
    path: list[str] = []
    while isinstance(command, click.Group) and argv and not argv[0].startswith("-"):
        found = command.get_command(click.Context(command), argv[0])
        assert found is not None, f"mpstream {' '.join(path)} has no command {argv[0]}"
        path.append(argv.pop(0))
        command = found
    return tuple(path), command, argv


def test_the_table_lists_the_jobs_a_newcomer_looks_for():
    commands = " ".join(job_commands())
    for job in ("mpstream run", "mpstream tune", "--low-latency", "mpstream reproduce",
                "--until", "--cluster", "mpstream trace record", "--interfaces"):
        assert job in commands, f"the README's jobs table has no `{job}`"


@pytest.mark.parametrize("shown", job_commands())
def test_each_command_of_the_table_runs_as_shown(shown):
    path, command, rest = resolve(shlex.split(shown)[1:])
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    takes = {opt for param in command.params for opt in param.opts}
    for i, word in enumerate(rest):
        if word.startswith("--"):
            assert word in takes, f"`mpstream {' '.join(path)}` takes no {word}"
            assert word in result.output, f"`mpstream {' '.join(path)} --help` hides {word}"
            if word in SHIPPED:
                assert list((REPO_ROOT / SHIPPED[word]).glob(f"{rest[i + 1]}.*")), \
                    f"{word} {rest[i + 1]}: no such file in {SHIPPED[word]}/"
    if path in TAKES_SCENARIO:
        assert (REPO_ROOT / "runner" / "scenarios" / f"{rest[0]}.toml").is_file(), rest[0]
    if path == ("reproduce",) and not rest[0].startswith("--"):
        assert (REPO_ROOT / rest[0]).is_file(), rest[0]
