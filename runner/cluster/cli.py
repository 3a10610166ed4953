"""`mpstream cluster head|join|status|down`: the commands that make this machine a Ray node
of a cluster (its head, or a host that joins one), list the cluster's hosts and stop the node.
What they run, and what a host says of itself, is in hosts.py; the status of a running cluster
comes from raytrials.py, the only module that imports Ray."""

from __future__ import annotations

import socket
import subprocess

import click
from rich.console import Console

from mpstream.errors import UserError
from mpstream.runner.cluster.hosts import (
    DEFAULT_PORT,
    NODE_FILE,
    config_dir,
    ensure_token,
    existing_token,
    ray_environment,
    ray_program,
    save_node,
    saved_node,
    start_argv,
)


def _start(argv: list[str], host: str) -> None:
    from mpstream.netem.system import require_root

    require_root()
    done = subprocess.run(argv, env=ray_environment(host), stdin=subprocess.DEVNULL,
                            capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise UserError("ray start failed: " + " / ".join(said[-4:]))


node_address_option = click.option(
    "--node-address", required=True, metavar="IP",
    help="This machine's address on the control network: Ray binds to it and the other hosts "
         "reach it there. Never an interface the experiments use.")
name_option = click.option(
    "--name", default=None, help="The host's name in trial records and reports (default: "
                                 "the hostname).")


@click.group()
def cluster() -> None:
    """Hosts for `mpstream run --cluster` (Ray nodes with token authentication)."""


@cluster.command()
@node_address_option
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True,
              help="The head's port on the node address.")
@click.option("--trials/--no-trials", default=True,
              help="Whether the head also runs trials (one at a time) or only coordinates.")
@name_option
def head(node_address: str, port: int, trials: bool, name: str | None) -> None:
    """Start the cluster's head on this machine (`ray start --head`), generating the token on
    first use (~/.config/mpstream/cluster-token, mode 0600): copy it to every host."""
    host = name or socket.gethostname()
    token = ensure_token()
    _start(start_argv(node_address, head=True, port=port, trials=trials), host)
    address = f"{node_address}:{port}"
    save_node(address, node_address, host)
    Console(highlight=False).print(
        f"head {host} at {address}; token {token}\non each host: copy the token there, then "
        f"`mpstream cluster join {address} --node-address IP`", soft_wrap=True)


@cluster.command()
@click.argument("address")
@node_address_option
@name_option
def join(address: str, node_address: str, name: str | None) -> None:
    """Join this machine to the cluster whose head is at ADDRESS (IP:PORT) as one host: one
    trial at a time. Needs the head's token in ~/.config/mpstream/cluster-token."""
    host = name or socket.gethostname()
    existing_token()
    _start(start_argv(node_address, head=False, join=address), host)
    save_node(address, node_address, host)
    Console(highlight=False).print(f"host {host} ({node_address}) joined {address}")


@cluster.command()
@click.argument("address", required=False)
def status(address: str | None) -> None:
    """List the cluster's hosts: kernel, MPTCP, mpstream version and `doctor` verdict, and
    whether each may run this head's trials (ADDRESS: default, the cluster this machine
    joined or heads)."""
    from mpstream.runner.cluster.raytrials import cluster_status

    node = saved_node()
    address = address or node.get("address")
    if not address:
        raise UserError("which cluster? give its ADDRESS (IP:PORT), or run this on a machine "
                        "that ran `mpstream cluster head` or `join`")
    console = Console(highlight=False)
    head_facts, rows = cluster_status(address, node.get("node_address"))
    console.print(f"cluster {address}: {len(rows)} host(s); this machine: mpstream "
                  f"{head_facts.version}, doctor {head_facts.doctor}")
    for facts, refusal in rows:
        verdict = "ok" if refusal is None else f"REFUSED: {refusal}"
        console.print(f"  {facts.host:<16} {facts.address or '':<16} kernel {facts.kernel:<14} "
                      f"MPTCP {facts.mptcp:<8} mpstream {facts.version:<8} doctor "
                      f"{facts.doctor}  -> {verdict}", markup=False)


@cluster.command()
def down() -> None:
    """Stop the Ray node on this machine (`ray stop`): the head, or this host."""
    from mpstream.netem.system import require_root

    require_root()
    done = subprocess.run([ray_program(), "stop"], env=ray_environment(),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"ray stop failed: {done.stderr.strip()[-300:]}")
    (config_dir() / NODE_FILE).unlink(missing_ok=True)
    Console(highlight=False).print("Ray stopped on this machine")
