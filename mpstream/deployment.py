"""Deployments: what the two ends of a delivery choose, apart from the network between them.

A network profile (netem/profiles/) says what the paths are; a deployment says what the
server and the client run over them: congestion control, kernel settings, how nginx hands
responses to the kernel, the MPTCP path manager and scheduler, which paths the client flags
backup, and optionally a path policy. Each setting sits under the end that applies it:

    name = "mptcp-tuned"
    description = "..."
    path_policy = "always"              # optional; a condition's own path_policy wins
    [server]
    cc = "cubic"
    cwnd_clamp_bdp = 2.0                # each path's window capped at 2 of its BDPs
    sysctls = { "net.ipv4.tcp_rto_max_ms" = 1000 }
    nginx = { tcp_nopush = false }
    mptcp = { scheduler = "default" }
    [client]
    sysctls = { ... }
    backup = ["path1"]                  # paths (index or name) whose endpoint is flagged backup
    mptcp = { path_manager = "kernel", subflows = 2 }

Shipped presets are the TOML files in mpstream/deployments/; `load_deployment` takes a preset
name or a file. On a real host mpstream changes nothing of either end: a deployment applies to
emulated networks and to the origin mpstream serves.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mpstream.errors import UserError
from mpstream.sending import SendOptions
from mpstream.transports.pathpolicy import known_policy

PRESETS_DIR = Path(__file__).parent / "deployments"
DEFAULT_DEPLOYMENT = "kernel-default"
CC_PATTERN = r"^[a-z0-9_]+$"
# The names a deployment may set in `sysctls`: what a network namespace holds per namespace.
SYSCTL_PATTERN = r"net\.(ipv4\.tcp_[a-z0-9_]+|mptcp\.[a-z0-9_]+)"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _End(_Strict):
    cc: str = Field(default="cubic", pattern=CC_PATTERN)
    # Kernel settings of this end's namespace, e.g. {"net.ipv4.tcp_slow_start_after_idle" = 0}.
    sysctls: dict[str, int | str] = {}

    @field_validator("sysctls")
    @classmethod
    def _sysctl_names(cls, value: dict[str, int | str]) -> dict[str, int | str]:
        for key in value:
            if not re.fullmatch(SYSCTL_PATTERN, key):
                raise ValueError(
                    f"{key!r} is not a per-namespace TCP setting: give net.ipv4.tcp_* or "
                    "net.mptcp.* names (e.g. net.ipv4.tcp_slow_start_after_idle)")
        return value


class ServerMptcp(_Strict):
    # The sender's packet scheduler decides which subflow carries the next data.
    scheduler: str = "default"
    checksum: bool = False


class ClientMptcp(_Strict):
    # kernel: the in-kernel path manager creates the subflows from the client's endpoints and
    # never re-creates one that closed; userspace: mpstream's path manager (mpstream/pathmanager.py)
    # adds a subflow again once its path carries packets.
    path_manager: Literal["kernel", "userspace"] = "kernel"
    subflows: int | None = Field(default=None, ge=0, le=8)  # limit; default: one per extra path
    add_addr_accepted: int | None = Field(default=None, ge=0, le=8)
    fullmesh: bool = False
    checksum: bool = False


class ServerSettings(_End):
    # How the origin's nginx sends (tcp_nopush, tcp_nodelay, sndbuf).
    nginx: SendOptions = SendOptions()
    mptcp: ServerMptcp = ServerMptcp()
    # Caps the congestion window of every connection and subflow the server sends on over a
    # user's slower paths (all but its fastest) at this many of the path's bandwidth-delay
    # products (netem/pathcaps.py), so that a slow path holds about what it delivers in that
    # many round trips instead of a full queue, and what the scheduler put on it last arrives
    # about when the fast path's does. Emulated paths only: it needs each path's rate and delay.
    cwnd_clamp_bdp: float | None = Field(default=None, gt=0, le=64)
    # Caps the pacing rate of the same connections and subflows at this many times the path's
    # rate (netem/pathcaps.py). MPTCP's scheduler weighs busy subflows by their pacing rates;
    # at 1.0 it did not change the first segment's split, which goes to idle subflows whatever
    # their rate (docs/deployments.md#the-servers-send-buffer-per-path), so no preset sets it.
    # Emulated paths only, as above.
    pacing_cap: float | None = Field(default=None, gt=0, le=64)
    # Fixes the send buffer of the same connections and subflows at this many of the path's
    # bandwidth-delay products: MPTCP's scheduler queues a burst of up to 64 KB on an idle
    # subflow whatever its rate (a third of a small first segment behind 5 Mbit/s), and passes
    # over a subflow whose buffer is full (netem/pathcaps.py). Emulated paths only, as above.
    sndbuf_bdp: float | None = Field(default=None, gt=0, le=64)
    # Applies the caps above to every path, a user's fastest and a single-path user's one too,
    # not only its slower paths. For low-latency live: a path's queue then stays a few of its
    # round trips long, so a part is not held behind a full queue, which at a few hundred
    # kbit/s holds seconds (docs/live.md#a-deployment-for-low-latency-live). It cost a
    # video-on-demand download its per-segment rate on the fast path
    # (docs/deployments.md#the-servers-window-cap-per-path).
    cap_every_path: bool = False

    @property
    def caps_paths(self) -> bool:
        """Whether the server caps what it sends on some of a user's paths."""
        return any(v is not None for v in (self.cwnd_clamp_bdp, self.pacing_cap, self.sndbuf_bdp))


class ClientSettings(_End):
    mptcp: ClientMptcp = ClientMptcp()
    # Paths (index or name) whose MPTCP endpoint is flagged backup: used only when the others
    # fail, or when a path policy lifts the flag.
    backup: list[int | str] = []


class Deployment(_Strict):
    name: str = DEFAULT_DEPLOYMENT
    description: str = ""
    # A path policy (mpstream/transports/pathpolicy.py) this deployment runs; a condition's own
    # wins.
    path_policy: str | None = None
    server: ServerSettings = ServerSettings()
    client: ClientSettings = ClientSettings()
    source: Path | None = Field(default=None, exclude=True)  # the file it was read from

    _path_policy = field_validator("path_policy")(known_policy)

    def end(self, host: str) -> ServerSettings | ClientSettings:
        """The settings of `host`: "server", or a client (the client and competing users)."""
        return self.server if host == "server" else self.client

    def settings(self) -> dict[str, Any]:
        """Every setting, flat (`server.cc`, `client.sysctls.net.ipv4.tcp_rmem`, ...), for a
        trial's record and a report's table."""
        flat: dict[str, Any] = {}

        def walk(prefix: str, node: Any) -> None:
            if isinstance(node, dict) and node:
                for key, value in node.items():
                    walk(f"{prefix}.{key}" if prefix else key, value)
            else:
                flat[prefix] = node

        walk("", self.model_dump(mode="json", exclude={"name", "description"}))
        return flat

    def to_toml(self) -> str:
        """The deployment as a preset file that `load_deployment` reads back unchanged."""
        return tomli_w.dumps(self.model_dump(mode="json", exclude_none=True))


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))


def deployment_from_dict(data: dict[str, Any], *, name: str = "custom",
                         source: Path | None = None) -> Deployment:
    data = dict(data)
    data.setdefault("name", name)
    try:
        return Deployment.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise UserError(f"deployment {source or name} is invalid: "
                        + "; ".join(_message(e) for e in exc.errors())) from None


def _message(error: Any) -> str:
    loc = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"{loc}: unknown setting (see docs/deployments.md for what each end takes)"
    return f"{loc}: {error['msg'].removeprefix('Value error, ')}"


def deployment_file(ref: str | Path, base_dir: Path | None = None) -> Path:
    """The file of a preset name or a path (relative to `base_dir` first, e.g. a scenario's
    folder); a UserError naming the presets when it is neither."""
    path = Path(ref)
    if base_dir is not None and not path.is_absolute() and (base_dir / path).is_file():
        return (base_dir / path).resolve()
    if not path.suffix and (PRESETS_DIR / f"{ref}.toml").is_file():
        return PRESETS_DIR / f"{ref}.toml"
    if path.is_file():
        return path.resolve()
    raise UserError(f"deployment {str(ref)!r} is neither a preset nor a file; presets: "
                    + ", ".join(preset_names()) + " (see `mpstream list deployments`)")


def read_deployment_data(ref: str | Path, base_dir: Path | None = None) -> tuple[dict, Path]:
    """The raw table of a preset or file, and where it came from."""
    path = deployment_file(ref, base_dir)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"deployment {path} is not valid TOML: {exc}") from None
    data.setdefault("name", path.stem)
    return data, path


def load_deployment(ref: str | Path | Deployment | None,
                    base_dir: Path | None = None) -> Deployment:
    """A preset name, a TOML file or a Deployment; None is the kernel's defaults."""
    if isinstance(ref, Deployment):
        return ref
    data, path = read_deployment_data(ref or DEFAULT_DEPLOYMENT, base_dir)
    return deployment_from_dict(data, name=path.stem, source=path)
