"""`mpstream cluster head|join|status|down`: the hosts a run's trials can spread over, as Ray
nodes. `head` and `join` are thin wrappers around `ray start` that always set what a testbed
must not forget: token authentication (the token generated once and kept 0600), usage
statistics off, no dashboard, the node address given (Ray binds to it; choose the control
network, never an experiment interface) and one `mpstream_host` unit per host, which each
trial asks for, so that a host never runs two trials at once. `down` is `ray stop`.

This module does not import Ray (runner/cluster.py does): it runs the `ray` program. What a
host reports about itself (`python -m mpstream.runner.hosts facts`: kernel, MPTCP, mpstream
version, `doctor` verdict) is here too, so that the head and every host compute it alike.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import click
from pydantic import BaseModel
from rich.console import Console

from mpstream import __version__, state
from mpstream.errors import UserError
from mpstream.runner.record import HOST_ENV

# The custom resource every host offers once and every trial asks for once.
HOST_RESOURCE = "mpstream_host"
DEFAULT_PORT = 6379
# Where the token and this machine's cluster settings live: ~/.config/mpstream unless moved
# (the hosts of a local cluster each have their own).
CONFIG_ENV = "MPSTREAM_CLUSTER_CONFIG"
TOKEN_FILE = "cluster-token"
NODE_FILE = "cluster-node.json"
# Where a host caches media trees (by content hash) and makes its trials' scratch folders.
CACHE_ENV = "MPSTREAM_HOST_CACHE"
INSTALL_RAY = "install the cluster extra: pip install 'mpstream[cluster]' (make setup does)"


def config_dir() -> Path:
    return Path(os.environ.get(CONFIG_ENV) or Path.home() / ".config" / "mpstream")


def token_path() -> Path:
    return config_dir() / TOKEN_FILE


def ensure_token() -> Path:
    """The cluster token, generated on first use and readable by its owner only."""
    path = token_path()
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32) + "\n")
    return path


def existing_token() -> Path:
    path = token_path()
    if not path.is_file():
        raise UserError(f"no cluster token at {path}: copy the head's (made by `mpstream "
                        f"cluster head`) to this path, mode 0600, or point ${CONFIG_ENV} at a "
                        "folder holding it")
    return path


def ray_environment(host: str | None = None) -> dict[str, str]:
    """The environment of every Ray process and driver of ours: token authentication on, usage
    statistics off, and the host's name for the trials it runs."""
    env = dict(os.environ)
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token_path()),
               RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_AUTH_TOKEN", None)  # the file is the one source
    if host:
        env[HOST_ENV] = host
    return env


def ray_program() -> str:
    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.is_file() else shutil.which("ray")
    if found is None:
        raise UserError(f"Ray is not installed: {INSTALL_RAY}")
    return found


def ray_temp_dir() -> Path:
    """Ray's sessions and sockets: with mpstream's other runtime state, not in /tmp/ray, which
    two nodes on one machine (the hosts of a local cluster) would share."""
    return state.root() / "ray"


def start_argv(node_address: str, *, head: bool, port: int = DEFAULT_PORT,
               join: str | None = None, trials: bool = True) -> list[str]:
    argv = [ray_program(), "start", f"--node-ip-address={node_address}",
            "--disable-usage-stats", f"--temp-dir={ray_temp_dir()}",
            f"--resources={json.dumps({HOST_RESOURCE: 1} if trials else {})}",
            # Trials ask for no CPU (a host is one unit): one worker kept warm is enough.
            f"--num-cpus={1 if trials else 0}"]
    if head:
        argv += ["--head", f"--port={port}", "--include-dashboard=false"]
    else:
        argv += [f"--address={join}"]
    return argv


def save_node(address: str, node_address: str, host: str) -> None:
    path = config_dir() / NODE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"address": address, "node_address": node_address,
                                "host": host}) + "\n")


def saved_node() -> dict[str, str]:
    """The cluster this machine joined or heads (address, node address, host name), {} if
    none."""
    try:
        return json.loads((config_dir() / NODE_FILE).read_text())
    except (OSError, ValueError):
        return {}


# --- what a host says about itself --------------------------------------------------------------


class HostFacts(BaseModel):
    """A host as `cluster status` lists it and as a run checks it before the first trial."""

    host: str
    address: str | None = None
    kernel: str
    mptcp: str
    version: str
    doctor: str  # "ok", or "missing: " and what is missing
    node_id: str | None = None  # its Ray node, once the driver has asked it

    def refusal(self, head: HostFacts) -> str | None:
        """Why this host may not run the head's trials, None when it may."""
        reasons = []
        if self.version != head.version:
            reasons.append(f"mpstream {self.version}, the head has {head.version}")
        if self.doctor != head.doctor:
            reasons.append(f"doctor says {self.doctor!r}, on the head {head.doctor!r}")
        return "; ".join(reasons) or None


def host_facts() -> HostFacts:
    from mpstream.doctor import diagnose

    try:
        mptcp = Path("/proc/sys/net/mptcp/enabled").read_text().strip()
        mptcp = "enabled" if mptcp == "1" else f"net.mptcp.enabled={mptcp}"
    except OSError:
        mptcp = "absent"
    missing = sorted(f.name for f in diagnose() if f.required and not f.ok)
    return HostFacts(host=os.environ.get(HOST_ENV) or socket.gethostname(),
                     kernel=platform.release(), mptcp=mptcp, version=__version__,
                     doctor="ok" if not missing else "missing: " + ", ".join(missing))


def facts_of_this_host() -> HostFacts:
    """The facts from a fresh process: the mpstream installed now, not one loaded earlier."""
    done = subprocess.run([sys.executable, "-m", "mpstream.runner.hosts", "facts"],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise UserError(f"could not describe this host: {done.stderr.strip()[-300:]}")
    return HostFacts.model_validate_json(done.stdout)


# --- the commands -------------------------------------------------------------------------------


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
    from mpstream.runner.cluster import cluster_status

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


def main(argv: list[str]) -> int:
    if argv == ["facts"]:
        print(host_facts().model_dump_json())
        return 0
    print("usage: python -m mpstream.runner.hosts facts", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
