"""What the networks add to `mpstream clean` (mpstream/hooks.py): the topologies, coupled
congestion controls, per-path caps and host network changes that killed programs left."""

from __future__ import annotations

from mpstream.clean import Cleaned
from mpstream.netem import coupled, hostnet, pathcaps, teardown


def topologies() -> Cleaned:
    sweep = teardown.clean_stale()
    return Cleaned(sweep.lines(), acted=bool(sweep.removed))


def coupled_ccs() -> Cleaned:
    lines = coupled.clean_stale() + coupled.awaiting_kernel()
    return Cleaned(lines, acted=bool(lines))


def path_caps() -> Cleaned:
    lines = pathcaps.clean_stale()
    return Cleaned(lines, acted=bool(lines))


def host_changes() -> Cleaned:
    out = hostnet.clean()
    lines = [f"undone: {item['changes']} change(s) of {item['purpose']} ({item['file']})"
             for item in out["undone"]]
    lines += [f"removed: {path} (half-written by a killed session)" for path in out["partial"]]
    if out["live"]:
        lines.append(f"left alone: {out['live']} session(s) still running")
    if out["other_netns"]:
        lines.append(f"left alone: {out['other_netns']} record(s) of host changes in other "
                     "network namespaces (run `mpstream clean` inside them; records in "
                     f"{' and '.join(map(str, hostnet.record_dirs()))})")
    return Cleaned(lines, acted=bool(out["undone"] or out["partial"]),
                   problems=out["problems"])
