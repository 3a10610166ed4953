"""The `mpstream` command. Each part owns its subcommand; they are imported only when used,
so `mpstream encode` does not pay for the server's or the emulator's imports."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click
from rich.console import Console

from mpstream import __version__, hooks
from mpstream.errors import UserError

# The commands by the job a person comes for, in the order `mpstream --help` shows them: a
# job's heading -> command name -> "module:attribute" of a click command or group.
COMMAND_GROUPS: dict[str, dict[str, str]] = {
    "Compare transports on a network": {
        "run": "mpstream.runner.cli:run",
        "play": "mpstream.runner.play:play",
        "report": "mpstream.runner.cli:report",
        "demo": "mpstream.runner.cli:demo",
    },
    "Tune the settings for a network": {
        "tune": "mpstream.runner.tune.search:tune",
    },
    "Live video over multipath": {
        "live": "mpstream.encoder.live_cli:live",
        "serve": "mpstream.server.cli:serve",
    },
    "Reproduce a published figure": {
        "reproduce": "mpstream.runner.cli:reproduce",
    },
    "Inspect what there is and what this machine lacks": {
        "list": "mpstream.runner.listing:list_kinds",
        "deployments": "mpstream.deploymentcli:deployments",
        "doctor": "mpstream.doctor:doctor",
        "paths": "mpstream.netem.pathcheck:paths",
    },
    "Cluster: trials on many machines": {
        "cluster": "mpstream.runner.cluster.cli:cluster",
        "trial": "mpstream.runner.trial:trial",
    },
    "Plumbing: one part at a time": {
        "encode": "mpstream.encoder.cli:encode",
        "netem": "mpstream.netem.cli:netem",
        "traces": "mpstream.netem.cli:traces",
        "trace": "mpstream.netem.record:trace",
        "clean": "mpstream.clean:clean",
    },
}
SUBCOMMANDS = {name: target for group in COMMAND_GROUPS.values() for name, target in group.items()}

# What each part adds to the core's `doctor` and `clean` (mpstream/hooks.py), in the order they
# run: the core calls these and imports no part itself.
PART_HOOKS = {
    hooks.DOCTOR: ["mpstream.server.doctor:check_nginx_multipath",
                   "mpstream.netem.doctor:check_coupled_cc"],
    # Local clusters first: their hosts hold topologies of their own.
    hooks.CLEAN: ["mpstream.runner.cluster.local:clean_step", "mpstream.netem.clean:topologies",
                  "mpstream.netem.clean:coupled_ccs", "mpstream.netem.clean:path_caps",
                  "mpstream.netem.clean:host_changes"],
}

# The collector `serve` runs, composed here: the collector with the run pages of a results
# folder (runner/report/runpages.py), which the server cannot import itself (the runner imports the
# server). `serve` finds it in the command's context under this key.
COLLECTOR_APP_KEY = "mpstream.collector_app"
COLLECTOR_APP = "mpstream.runner.report.runpages:create_app()"


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        # Only the parts that are present in this tree are listed.
        return sorted(
            name
            for name, target in SUBCOMMANDS.items()
            if importlib.util.find_spec(target.split(":")[0]) is not None
        )

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands under their jobs' headings, each with the whole first sentence of its
        help (click's default cuts it to fit one line)."""
        present = set(self.list_commands(ctx))
        for heading, group in COMMAND_GROUPS.items():
            rows = []
            for name in (n for n in group if n in present):
                command = self.get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(limit=sys.maxsize)))
            if rows:
                with formatter.section(heading):
                    formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mpstream")
def cli() -> None:
    """HLS/DASH over Multipath TCP: encode a ladder, emulate paths, serve, play, compare."""
    hooks.install(PART_HOOKS)
    click.get_current_context().meta[COLLECTOR_APP_KEY] = COLLECTOR_APP


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="mpstream", standalone_mode=False)
    except UserError as exc:
        # The message may quote ffmpeg or a file name: print it literally, no markup or emoji.
        err = Console(stderr=True)
        err.print("error:", style="bold red", end=" ")
        err.print(str(exc), markup=False, emoji=False, highlight=False)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        Console(stderr=True).print("interrupted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
