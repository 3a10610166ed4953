"""How a command prints for a script: with `--json`, one JSON document on standard output and
everything a person reads on standard error, so that standard output parses whole."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])


def json_option(command: F) -> F:
    """The `--json` flag, passed to the command as `as_json`."""
    return click.option("--json", "as_json", is_flag=True,
                        help="Print one JSON document on standard output (what a person "
                             "reads goes to standard error).")(command)


def console_for(as_json: bool, **options: Any) -> Console:
    """Where a person's text goes: standard error when standard output is the document's."""
    return Console(stderr=as_json, **options)


def print_json(document: Any) -> None:
    """The document (paths and other values JSON lacks as their text)."""
    click.echo(json.dumps(document, indent=2, default=str))
