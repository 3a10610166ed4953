"""`mpstream clean`: remove everything mpstream can leave behind when it is killed with -9
(or the machine loses power mid-run), and nothing else.

Each part says what it leaves and removes it in a step of its own (mpstream/hooks.py, in the
order mpstream/cli.py lists them):
- Local clusters (`run --cluster local:N`) whose run died: their hosts' sandboxes with every
  Ray process and trial in them, their namespaces and records (runner/cluster/local.py).
- Emulated topologies whose owner died: their `mps-*` namespaces with the interfaces and
  processes in them, their emulators and records (netem/teardown.py; `netem clean` is this part
  alone). Topologies whose owner runs, and those `netem up` left up, stay.
- Coupled congestion controls (lia, olia, balia, wvegas) mpstream registered with the kernel that no
  topology uses any more (netem/coupled.py); their maps that sockets still hold after that are
  reported, as the kernel frees them on its own.
- Host network changes of killed `play --interfaces` / `serve --announce` sessions in this
  network namespace (MPTCP endpoints and limits, policy rules and tables), undone from the
  record written before each change (netem/hostnet.py). Other namespaces' records and live
  sessions' stay.
The core's own: temporary folders of killed sessions (the QUIC hop's, `play --url`'s page,
Firefox profiles and the server stack's: mpstream/scratch.py).

Each reads the records of older versions too (mpstream/state.py names where they were)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import click
from rich.console import Console

from mpstream import hooks
from mpstream.errors import UserError
from mpstream.scratch import clean_stale_tempdirs


@dataclass
class Cleaned:
    """What one step of `clean` did: a line each of what it removed or left alone, whether it
    removed or undid anything, and what it could not undo."""

    lines: list[str] = field(default_factory=list)
    acted: bool = False
    problems: list[str] = field(default_factory=list)


def tempdirs() -> Cleaned:
    lines = clean_stale_tempdirs()
    return Cleaned(lines, acted=bool(lines))


@click.command()
def clean() -> None:
    """Remove what killed mpstream programs left behind: local clusters and topologies of dead
    owners (namespaces, processes, emulators, records) and host network changes of killed
    sessions in this network namespace. What a running program or `netem up` owns is left
    alone."""
    if os.geteuid() != 0:
        raise UserError("clean removes namespaces, interfaces and MPTCP endpoints: run it as "
                        "root, e.g. with sudo")
    console = Console()
    acted, problems = False, []
    for step in [*hooks.functions(hooks.CLEAN), tempdirs]:
        done: Cleaned = step()
        for line in done.lines:
            console.print(line, highlight=False, soft_wrap=True)
        acted = acted or done.acted
        problems += done.problems
    if not acted:
        console.print("nothing left behind", highlight=False)
    if problems:
        raise UserError("some changes could not be undone: " + "; ".join(problems),
                        exit_code=1)
