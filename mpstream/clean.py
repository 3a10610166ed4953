"""`mpstream clean`: undo what a killed `mpstream play --interfaces` or `serve --announce` left
in this host's network configuration (MPTCP endpoints and limits, policy rules and tables)."""

from __future__ import annotations

import click
from rich.console import Console

from mpstream.errors import UserError
from mpstream.hostnet import STATE_DIR
from mpstream.hostnet import clean as clean_state


@click.command()
def clean() -> None:
    """Undo the network changes of sessions that were killed before they could restore them,
    in the network namespace this runs in (their state files are in /run/mpstream-hostnet)."""
    console = Console()
    out = clean_state()
    for item in out["undone"]:
        console.print(f"undone: {item['changes']} change(s) of {item['purpose']} "
                      f"({item['file']})", highlight=False)
    if not out["undone"]:
        console.print("nothing to undo in this network namespace", highlight=False)
    if out["live"]:
        console.print(f"left alone: {out['live']} session(s) still running", highlight=False)
    if out["other_netns"]:
        console.print(f"left alone: {out['other_netns']} state file(s) of other network "
                      f"namespaces (run `mpstream clean` inside them; files in {STATE_DIR})",
                      highlight=False)
    if out["problems"]:
        raise UserError("some changes could not be undone: " + "; ".join(out["problems"]),
                        exit_code=1)
