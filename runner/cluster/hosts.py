"""The hosts a run's trials can spread over, as Ray nodes: what `mpstream cluster head|join|
status|down` (runner/cluster/cli.py) start and stop. `head` and `join` are thin wrappers around
`ray start` that always set what a testbed must not forget: token authentication (the token
generated once and kept 0600), usage statistics off, no dashboard, the node address given (Ray
binds to it; choose the control network, never an experiment interface) and one `mpstream_host`
unit per host, which each trial asks for, so that a host never runs two trials at once. `down`
is `ray stop`.

This module does not import Ray (raytrials.py does): it runs the `ray` program. What a
host reports about itself (`python -m mpstream.runner.cluster.hosts facts`: kernel, MPTCP, mpstream
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

from pydantic import BaseModel

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
    from mpstream import hooks
    from mpstream.cli import PART_HOOKS
    from mpstream.doctor import diagnose

    hooks.install(PART_HOOKS)  # the parts' checks too, as `mpstream doctor` runs them

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
    done = subprocess.run([sys.executable, "-m", "mpstream.runner.cluster.hosts", "facts"],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise UserError(f"could not describe this host: {done.stderr.strip()[-300:]}")
    return HostFacts.model_validate_json(done.stdout)


def main(argv: list[str]) -> int:
    if argv == ["facts"]:
        print(host_facts().model_dump_json())
        return 0
    print("usage: python -m mpstream.runner.cluster.hosts facts", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
