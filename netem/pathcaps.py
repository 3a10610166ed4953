"""Per-path caps on what the server sends (a deployment's `server.cwnd_clamp_bdp`,
`server.pacing_cap` and `server.sndbuf_bdp`): a sock_ops BPF program (netem/cc/path_caps.bpf.c)
that sets each new connection's and subflow's window clamp, maximum pacing rate and send buffer
from a map keyed by (network
namespace, remote /24). A topology adds its server namespace's entries, one a path, and removes
them on the way down; the program is loaded and attached to the cgroup v2 root (where every
process's sockets are, so every namespace's) when the first entry is added, and detached and
unpinned when the last is gone.

Why BPF: the route's locked `cwnd` metric (`ip route ... cwnd lock N`) is read through the
kernel's TCP metrics cache, which has no entry for a destination no connection has closed to,
so on a fresh topology it never applies (docs/deployments.md#the-servers-window-cap-per-path
says what was seen); and a pacing rate per path has no route metric at all.

What mpstream adds, and takes away again, under the state root's `path-caps/` (one lock):
- a bpffs at `bpffs/` (mounted there) holding the pinned program and map;
- a cgroup2 mount at `cgroup2/` when the machine has none (hybrid cgroups: v1 controllers
  only), unmounted after the program is detached;
- `TOPOLOGY.use`: the topology's namespace cookie and map keys, written before its entries,
  so that `mpstream clean` removes the entries of a killed topology.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from mpstream import state
from mpstream.errors import UserError
from mpstream.netem import teardown
from mpstream.netem.system import sh
from mpstream.network import in_netns
from mpstream.paths import BUILD_DIR

OBJECT = BUILD_DIR / "cc" / "path_caps.bpf.o"
BUILD_COMMAND = "make coupled-cc"
PROGRAM = "path_caps"
MAP_NAME = "caps"
MSS = 1448  # a 1500-byte MTU's payload with TCP timestamps
SO_NETNS_COOKIE = 71  # include/uapi/asm-generic/socket.h
# A window cap below this starves a path whose round trip is all delay (acks come in bursts).
MIN_PACKETS = 4
# The pacing cap is a 32-bit count of bytes a second (what bpf_setsockopt takes).
MAX_PACING = 2**32 - 1


@dataclass(frozen=True)
class PathCap:
    """What the server may send towards one path: a window in packets, a pacing rate in bytes
    a second and a send buffer in bytes (None: that one is not capped)."""

    cwnd_packets: int | None = None
    pacing_bytes_s: int | None = None
    sndbuf_bytes: int | None = None

    def packed(self) -> bytes:
        """struct path_cap { __u32 cwnd, pacing, sndbuf, pad; }, 0 for not capped."""
        return struct.pack("<IIII", self.cwnd_packets or 0, self.pacing_bytes_s or 0,
                           self.sndbuf_bytes or 0, 0)

    @classmethod
    def unpacked(cls, raw: bytes) -> PathCap:
        cwnd, pacing, sndbuf, _ = struct.unpack("<IIII", raw)
        return cls(cwnd or None, pacing or None, sndbuf or None)


def clamp_packets(rate_bps: float, rtt_ms: float, bdps: float) -> int:
    """A window of `bdps` bandwidth-delay products of a path, in full-sized packets, at least
    MIN_PACKETS."""
    return max(MIN_PACKETS, math.ceil(bdps * rate_bps * rtt_ms / 1000 / 8 / MSS))


def sndbuf_bytes(rate_bps: float, rtt_ms: float, bdps: float) -> int:
    """A send buffer of `bdps` bandwidth-delay products of a path, at least MIN_PACKETS
    full-sized packets."""
    return clamp_packets(rate_bps, rtt_ms, bdps) * MSS


def pacing_bytes(rate_bps: float, times: float) -> int:
    """`times` a path's rate, in bytes a second."""
    return min(MAX_PACING, max(1, round(times * rate_bps / 8)))


def records_dir() -> Path:
    return state.kind_dir(state.PATH_CAPS)


def _bpffs() -> Path:
    return records_dir() / "bpffs"


def _prog_pin() -> Path:
    return _bpffs() / PROGRAM


def _map_pin() -> Path:
    return _bpffs() / MAP_NAME


def machine_refusal() -> str | None:
    """Why the per-path caps cannot be used here, before trying (None: they can be tried)."""
    if not OBJECT.exists():
        return (f"the per-path caps need their BPF program ({OBJECT} is missing): run "
                f"`{BUILD_COMMAND}` (it needs clang, libbpf-dev, bpftool and a kernel with BTF)")
    if shutil.which("bpftool") is None:
        return "the per-path caps need bpftool: apt-get install bpftool (or `make setup`)"
    return None


def _locked() -> contextlib.AbstractContextManager[Path]:
    return state.locked(state.PATH_CAPS)


def _mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of every mount."""
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3:
            out.append((parts[1].replace("\\040", " "), parts[2]))
    return out


def _cgroup2(folder: Path) -> Path:
    """A cgroup2 mount's root: the machine's, else one mounted under `folder`."""
    for point, fstype in _mounts():
        if fstype == "cgroup2":
            return Path(point)
    own = folder / "cgroup2"
    own.mkdir(exist_ok=True)
    sh(["mount", "-t", "cgroup2", "none", str(own)])
    return own


def _own_cgroup2(folder: Path) -> Path | None:
    own = folder / "cgroup2"
    return own if any(p == str(own) for p, t in _mounts() if t == "cgroup2") else None


def _loaded() -> bool:
    return _prog_pin().exists()


def _load(folder: Path) -> None:
    """The program pinned, its map beside it, attached to the cgroup2 root beside any others."""
    fs = _bpffs()
    fs.mkdir(exist_ok=True)
    if not any(p == str(fs) for p, t in _mounts() if t == "bpf"):
        sh(["mount", "-t", "bpf", "bpf", str(fs)])
    done = sh(["bpftool", "prog", "load", str(OBJECT), str(_prog_pin()), "type", "sockops",
               "pinmaps", str(fs)], check=False, timeout=60)
    if not _prog_pin().exists():
        _unload(folder)
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise UserError("the kernel refused the per-path caps' sock_ops program: "
                        + " | ".join(detail[-4:]))
    sh(["bpftool", "cgroup", "attach", str(_cgroup2(folder)), "sock_ops", "pinned",
        str(_prog_pin()), "multi"])


def _unload(folder: Path) -> None:
    if _prog_pin().exists():
        for point, fstype in _mounts():
            if fstype == "cgroup2":
                sh(["bpftool", "cgroup", "detach", point, "sock_ops", "pinned",
                    str(_prog_pin())], check=False)
    own = _own_cgroup2(folder)
    if own is not None:
        sh(["umount", str(own)], check=False)
    fs = _bpffs()
    if any(p == str(fs) for p, t in _mounts() if t == "bpf"):
        sh(["umount", str(fs)], check=False)  # the pins go with it


def netns_cookie(netns: str) -> int:
    """The kernel's cookie of a network namespace (what bpf_get_netns_cookie returns)."""
    code = ("import socket, sys; s = socket.socket(); "
            f"sys.stdout.write(str(int.from_bytes(s.getsockopt(socket.SOL_SOCKET, "
            f"{SO_NETNS_COOKIE}, 8), 'little')))")
    out = sh(in_netns(netns, [sys.executable, "-c", code]))
    return int(out.stdout)


def _key_hex(cookie: int, subnet24: str) -> list[str]:
    a, b, c, _ = (int(x) for x in subnet24.split("."))
    packed = struct.pack("<QII", cookie, (a << 24) | (b << 16) | (c << 8), 0)
    return [f"{byte:02x}" for byte in packed]


def _value_hex(cap: PathCap) -> list[str]:
    return [f"{byte:02x}" for byte in cap.packed()]


def acquire(topology: str, server_ns: str, caps: dict[str, PathCap]) -> None:
    """Caps what the server in `server_ns` sends on every connection it opens or accepts to
    each subnet of `caps` (its /24's network address, e.g. 10.1.1.0)."""
    reason = machine_refusal()
    if reason:
        raise UserError(reason)
    cookie = netns_cookie(server_ns)
    with _locked() as folder:
        (folder / f"{topology}.use").write_text(json.dumps(
            {"topology": topology, "cookie": cookie, "subnets": sorted(caps)}))
        if not _loaded():
            _load(folder)
        for subnet, cap in caps.items():
            sh(["bpftool", "map", "update", "pinned", str(_map_pin()), "key", "hex",
                *_key_hex(cookie, subnet), "value", "hex", *_value_hex(cap)])


def release(topology: str) -> None:
    """Removes `topology`'s caps; unloads the program when no topology has any left."""
    with _locked() as folder:
        _remove_use(folder, folder / f"{topology}.use")
        _unload_unused(folder)


def _remove_use(folder: Path, use: Path) -> None:
    if not use.exists():
        return
    record = json.loads(use.read_text())
    if _loaded():
        for subnet in record["subnets"]:
            sh(["bpftool", "map", "delete", "pinned", str(_map_pin()), "key", "hex",
                *_key_hex(int(record["cookie"]), subnet)], check=False)
    use.unlink(missing_ok=True)


def _unload_unused(folder: Path) -> bool:
    if any(folder.glob("*.use")):
        return False
    if not _loaded() and _own_cgroup2(folder) is None:
        return False
    _unload(folder)
    return True


def clean_stale() -> list[str]:
    """Removes the caps of topologies that no longer exist (killed) and unloads the program
    when none is left; a line per thing undone."""
    if not records_dir().exists():
        return []
    lines = []
    with _locked() as folder:
        for use in sorted(folder.glob("*.use")):
            topology = use.name.removesuffix(".use")
            if teardown.record_path(topology) is None:
                _remove_use(folder, use)
                lines.append(f"removed the path caps of topology {topology} (it is gone)")
        if _unload_unused(folder):
            lines.append("unloaded the path-caps program (no topology uses it)")
    return lines


def attached() -> bool:
    """Whether the program is loaded now (for tests and `doctor`)."""
    return _loaded()


def caps_of(cookie: int) -> dict[str, PathCap]:
    """The caps the map holds for the namespace of `cookie`, by subnet."""
    if not _loaded():
        return {}
    dumped = json.loads(sh(["bpftool", "-j", "map", "dump", "pinned", str(_map_pin())]).stdout
                        or "[]")
    out = {}
    for entry in dumped:
        key = bytes(int(b, 16) for b in entry["key"])
        netns, remote24, _ = struct.unpack("<QII", key)
        if netns == cookie:
            subnet = ".".join(str((remote24 >> s) & 0xFF) for s in (24, 16, 8, 0))
            out[subnet] = PathCap.unpacked(bytes(int(b, 16) for b in entry["value"]))
    return out
