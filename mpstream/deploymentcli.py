"""`mpstream deployments NAME`: every setting of one deployment, with the end that applies it.
Without NAME it lists the presets, as it did before `mpstream list deployments`."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from mpstream.deployment import load_deployment, preset_names
from mpstream.errors import warn


@click.command()
@click.argument("name", required=False)
def deployments(name: str | None) -> None:
    """Show every setting of deployment NAME (a preset or a TOML file: what the server and
    client run over a network) with the end that applies it; `mpstream list deployments` lists
    the presets."""
    console = Console()
    if name is not None:
        found = load_deployment(name)
        table = Table(title=f"deployment {found.name}" + (f": {found.source}" if found.source
                                                         else ""))
        for column in ("end", "setting", "value"):
            table.add_column(column)
        for key, value in found.settings().items():
            end, _, setting = key.partition(".")
            if not setting:
                end, setting = "", key
            table.add_row(end, setting, "" if value is None else str(value))
        console.print(table)
        return
    warn("`mpstream deployments` without a NAME is now `mpstream list deployments`")
    table = Table(title="deployment presets (mpstream/deployments/)")
    table.add_column("name")
    table.add_column("description")
    for preset in preset_names():
        table.add_row(preset, " ".join(load_deployment(preset).description.split()))
    console.print(table)
