"""`mpstream clean`: remove everything mpstream can leave behind when it is killed with -9
(or the machine loses power mid-run), and nothing else.

- Emulated topologies whose owner died: their `mps-*` namespaces with the interfaces and
  processes in them, their emulators and records (netem/teardown.py; `netem clean` is this part
  alone). Topologies whose owner runs, and those `netem up` left up, stay.
- Host network changes of killed `play --interfaces` / `serve --announce` sessions in this
  network namespace (MPTCP endpoints and limits, policy rules and tables), undone from the
  record written before each change (mpstream/hostnet.py). Other namespaces' records and live
  sessions' stay.
- Coupled congestion controls (lia, olia, balia, wvegas) mpstream registered with the kernel that no
  topology uses any more (netem/coupled.py); their maps that sockets still hold after that are
  reported, as the kernel frees them on its own.
- Temporary folders of killed sessions: the QUIC hop's, `play --url`'s page, Firefox profiles
  and the server stack's (mpstream/scratch.py).
- Local clusters (`run --cluster local:N`) whose run died: their hosts' sandboxes with every
  Ray process and trial in them, their namespaces and records (runner/localcluster.py).

Both read the records of older versions too (mpstream/state.py names where they were)."""

from __future__ import annotations

import click
from rich.console import Console

from mpstream.errors import UserError


@click.command()
def clean() -> None:
    """Remove what killed mpstream programs left behind: local clusters and topologies of dead
    owners (namespaces, processes, emulators, records) and host network changes of killed
    sessions in this network namespace. What a running program or `netem up` owns is left
    alone."""
    from mpstream.hostnet import clean as undo_host_changes
    from mpstream.hostnet import record_dirs
    from mpstream.netem import coupled
    from mpstream.netem.system import require_root
    from mpstream.netem.teardown import clean_stale
    from mpstream.runner.localcluster import clean_stale as clean_clusters
    from mpstream.scratch import clean_stale_tempdirs

    require_root()
    console = Console()

    def say(line: str) -> None:
        console.print(line, highlight=False, soft_wrap=True)

    clusters = clean_clusters()
    for line in clusters:
        say(line)
    sweep = clean_stale()
    for line in sweep.lines():
        say(line)
    unloaded = coupled.clean_stale()
    for line in unloaded:
        say(line)
    waiting = coupled.awaiting_kernel()
    for line in waiting:
        say(line)
    tempdirs = clean_stale_tempdirs()
    for line in tempdirs:
        say(line)
    out = undo_host_changes()
    for item in out["undone"]:
        say(f"undone: {item['changes']} change(s) of {item['purpose']} ({item['file']})")
    for path in out["partial"]:
        say(f"removed: {path} (half-written by a killed session)")
    if out["live"]:
        say(f"left alone: {out['live']} session(s) still running")
    if out["other_netns"]:
        say(f"left alone: {out['other_netns']} record(s) of host changes in other network "
            "namespaces (run `mpstream clean` inside them; records in "
            f"{' and '.join(map(str, record_dirs()))})")
    if not (clusters or sweep.removed or unloaded or waiting or tempdirs or out["undone"]
            or out["partial"]):
        say("nothing left behind")
    if out["problems"]:
        raise UserError("some changes could not be undone: " + "; ".join(out["problems"]),
                        exit_code=1)
