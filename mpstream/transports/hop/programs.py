"""The QUIC hop on a network: the gateway (build/mpstream-quic gateway) in the server's
namespace in front of the HTTP server, and the proxy (mpstream-quic proxy) in the client's,
which the browser or a download tool speaks plain HTTP/1.1 to on 127.0.0.1.

The proxy carries what it is given to the gateway over one (multipath) QUIC connection, or, in
the tcp and mptcp modes, over a TCP or MPTCP connection per client connection: the same hop
without QUIC, so that a comparison can tell QUIC's part from the hop's. Both programs append
their per-path statistics and path events to JSON-lines files; a dead proxy or gateway is a
failure with its own last words (`problem`).

The gateway, which sends the video, holds back the paths from a client address while another
path can carry the data (a profile's backup paths from the start; the path policies' metered
paths while they are not needed): `hold` changes that at run time, over the gateway's control
channel, its stdin (one command a line, one JSON answer a line on its stdout).
"""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mpstream.errors import UserError
from mpstream.jsonlines import read_json_lines
from mpstream.network import Network
from mpstream.paths import BUILD_DIR
from mpstream.proc import Started, await_ready, keyed_line, stop
from mpstream.proof import Proof
from mpstream.transports.base import PATHS_TARGET

HOP_BINARY = BUILD_DIR / "mpstream-quic"
BUILD_COMMAND = "make quic"
GATEWAY_QUIC_PORT = 4433
GATEWAY_TCP_PORT = 4434
READY_TIMEOUT_S = 15.0
# A control command unanswered after this long is a failure (the gateway answers at once).
CONTROL_TIMEOUT_S = 1.0

HopMode = Literal["mpquic", "quic", "tcp", "mptcp"]
# The congestion controls the QUIC library has, by the names profiles use.
QUIC_CCS = ("cubic", "reno", "newreno", "bbr")


def build_now(binary: Path = HOP_BINARY,
              why: str = "the quic and mpquic transports run through it") -> bool:
    """Builds the hop on first need (`make demo` does not: it needs no hop), when this is a
    clone and cargo is here (where scripts/build-quic.sh looks for it); a line says what and
    why first. Whether the binary is there after."""
    import shutil
    import sys

    from mpstream.paths import REPO_ROOT

    cargo = Path(shutil.which("cargo") or Path.home() / ".cargo" / "bin" / "cargo")
    if binary != HOP_BINARY or not cargo.is_file() or not (REPO_ROOT / "Makefile").is_file():
        return False
    print(f"building the QUIC hop ({BUILD_COMMAND}): {why}; its first build takes a few "
          "minutes, later ones come from /var/cache/mpstream", file=sys.stderr, flush=True)
    done = subprocess.run(["make", "-C", str(REPO_ROOT), "--no-print-directory", "quic"],
                          stdout=sys.stderr)
    return done.returncode == 0 and binary.is_file()


def hop_stale(root: Path) -> bool:
    """Whether clone `root`'s built hop is older than a source it is built from, as its
    Makefile's rule for it says (`make -q`: the one list of those sources). A pulled change to
    quic/ would otherwise run the old binary, which refuses options the Python side passes."""
    rel = Path("build") / HOP_BINARY.name  # the Makefile's target, from the clone's root
    if not (root / rel).is_file():
        return False
    done = subprocess.run(["make", "-q", "-C", str(root), str(rel)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    return done.returncode == 1


def hop_missing(binary: Path = HOP_BINARY) -> list[str]:
    """What this machine lacks to run the hop, each with its fix (it is built here first when
    it can be, and built again when its sources are newer)."""
    from mpstream.paths import REPO_ROOT

    if (binary == HOP_BINARY and hop_stale(REPO_ROOT)
            and not build_now(binary, why="its sources changed since it was built")):
        return [f"the QUIC hop ({binary}) is older than its sources in quic/ and could not be "
                f"built again: run `{BUILD_COMMAND}` (needs cargo, Rust 1.88 or newer)"]
    if binary.is_file() or build_now(binary):
        return []
    return [f"the QUIC hop is not built ({binary} is missing): run `{BUILD_COMMAND}` "
            f"(needs cargo, Rust 1.88 or newer)"]


def quic_cc(cc: str | None) -> str:
    """The hop's name for a profile's congestion control; an error naming those it has."""
    name = cc or "cubic"
    if name not in QUIC_CCS:
        raise UserError(f"congestion control {name!r} is not one the QUIC library (noq) has: "
                        f"choose one of cubic, reno, bbr (BBRv3)")
    return "newreno" if name == "reno" else name


@functools.cache
def quic_schedulers(binary: Path = HOP_BINARY) -> dict[str, str]:
    """The packet schedulers the hop's multipath QUIC sender has, by name, with what each
    does (as `mpstream-quic schedulers` lists them, the default first)."""
    missing = hop_missing(binary)
    if missing:
        raise UserError(missing[0])
    done = subprocess.run([str(binary), "schedulers"], capture_output=True, text=True,
                          timeout=10)
    if done.returncode != 0:
        raise UserError(f"the QUIC hop ({binary}) lists no schedulers: "
                        f"{(done.stderr.strip().splitlines() or [''])[0][-200:]} (run "
                        f"`{BUILD_COMMAND}` again)")
    found = {}
    for line in done.stdout.splitlines():
        if line.strip():
            entry = json.loads(line)
            found[str(entry["name"])] = str(entry.get("description", ""))
    return found


@dataclass
class HopOptions:
    mode: HopMode
    cc: str = "cubic"
    # Which path each packet of a multipath connection goes on (quic_schedulers names them).
    scheduler: str = "lowest-id"
    packet_size: int = 1472  # UDP payload: fills a 1500-byte link as TCP's 1448-byte segments
    # With multipath: room to reopen failed paths. Ids are not reused, and a path that never
    # validated (opened while its link was down) keeps its id (noq issue 804): the proxy tries
    # a failed path about every 4 s (a 1 s pause and a validation that times out in about 3 s),
    # so 64 ids last through minutes of outage.
    max_paths: int = 64
    path_idle_ms: int = 1000
    path_keepalive_ms: int = 250
    idle_timeout_ms: int = 30_000  # a single path's outage must not end the connection
    stats_interval_ms: int = 100
    qlog: bool = True


@dataclass
class QuicHop(Started):
    """Starts the gateway and the proxy on `network` for `upstream_port` (the HTTP server on the
    server host's address); `base_url` is what the client asks instead of the server."""

    network: Network
    upstream_port: int
    options: HopOptions
    workdir: Path
    binary: Path = HOP_BINARY
    base_url: str = field(init=False, default="")
    paths_opened: list[int] = field(init=False, default_factory=list)
    # The QUIC library and multipath draft the proxy runs (None in the TCP and MPTCP modes).
    implementation: str | None = field(init=False, default=None)
    # The proxy's own per-path figures (quic/src/figures.rs), in the QUIC modes.
    paths_url: str | None = field(init=False, default=None)
    _gateway: subprocess.Popen[str] | None = field(init=False, default=None)
    _proxy: subprocess.Popen[str] | None = field(init=False, default=None)
    _control: threading.Lock = field(init=False, default_factory=threading.Lock)

    @property
    def gateway_stats(self) -> Path:
        return self.workdir / "quic-gateway.jsonl"

    @property
    def proxy_stats(self) -> Path:
        return self.workdir / "quic-proxy.jsonl"

    @property
    def qlog_dir(self) -> Path:
        return self.workdir / "qlog"

    def _quic_args(self, stats: Path, multipath: bool, judges_paths: bool) -> list[str]:
        """`judges_paths`: this end abandons a path that hears nothing (the proxy, which receives
        the data; noq may acknowledge a path's data on another path, so the sender cannot)."""
        o = self.options
        args = ["--cc", o.cc, "--scheduler", o.scheduler, "--packet-size", str(o.packet_size),
                "--path-idle-ms", str(o.path_idle_ms if judges_paths else 0),
                "--path-keepalive-ms",
                str(o.path_keepalive_ms), "--idle-timeout-ms", str(o.idle_timeout_ms),
                "--stats", str(stats),
                "--stats-interval-ms", str(o.stats_interval_ms)]
        if multipath:
            args += ["--max-paths", str(o.max_paths)]
        if o.qlog:
            args += ["--qlog-dir", str(self.qlog_dir)]
        return args

    def start(self) -> None:
        missing = hop_missing(self.binary)
        if missing:
            raise UserError(missing[0])
        self.workdir.mkdir(parents=True, exist_ok=True)
        net, mode = self.network, self.options.mode
        cert = self.workdir / "gateway-cert.der"
        cert.unlink(missing_ok=True)
        paths = net.paths if mode in ("mpquic", "mptcp") else [net.paths[net.single_path]]
        backups = [p.client_addr for p in paths if p.backup]
        # The gateway always offers multipath; the proxy decides whether the connection uses it.
        # It sends the video, so it is the one that holds a backup path back.
        self._gateway = net.popen("server", [
            str(self.binary), "gateway", "--listen", f"0.0.0.0:{GATEWAY_QUIC_PORT}",
            "--tcp-listen", f"{net.server_addr}:{GATEWAY_TCP_PORT}",
            "--upstream", f"{net.server_addr}:{self.upstream_port}", "--cert-out", str(cert),
            *[arg for a in backups for arg in ("--hold", a)], "--control-stdin",
            *self._quic_args(self.gateway_stats, multipath=True, judges_paths=False),
        ], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        _ready(self._gateway, "gateway")
        locals_ = [arg for p in paths for arg in ("--local", p.client_addr)]
        backups = [arg for a in backups for arg in ("--backup", a)]
        port = GATEWAY_QUIC_PORT if mode in ("mpquic", "quic") else GATEWAY_TCP_PORT
        argv = [str(self.binary), "proxy", "--mode", mode, "--gateway",
                f"{net.server_addr}:{port}", *locals_, *backups]
        if mode in ("mpquic", "quic"):
            argv += ["--cert", str(cert), "--paths-listen", "127.0.0.1:0",
                     *self._quic_args(self.proxy_stats, mode == "mpquic", judges_paths=True)]
        self._proxy = net.popen("client", argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        ready = _ready(self._proxy, "proxy")
        self.base_url = f"http://{ready['listen']}"
        self.paths_opened = [int(p) for p in ready.get("paths", [])]
        self.implementation = ready.get("implementation")
        if ready.get("paths_listen"):
            self.paths_url = f"http://{ready['paths_listen']}{PATHS_TARGET}"

    def problem(self) -> str | None:
        """Why the hop no longer carries anything (a program of it exited), or None."""
        for name, proc in (("proxy", self._proxy), ("gateway", self._gateway)):
            if proc is not None and proc.poll() is not None:
                return f"the QUIC hop's {name} exited ({proc.returncode}): {_last_words(proc)}"
        return None

    def proof(self) -> Proof | None:
        """What the gateway counted: QUIC connections from proxies and the paths it sent on
        (video or its keep-alive pings: a path opened and validated from each client address;
        how the bytes split is the per-path figures' business). None in the TCP and MPTCP
        modes (the kernel's counters prove those)."""
        if self.options.mode not in ("mpquic", "quic"):
            return None
        connections, paths = set(), set()
        for line in read_json_lines(self.gateway_stats):
            if line.get("event") == "connected":
                connections.add(line.get("conn"))
            elif "event" not in line and int(line.get("sent_bytes", 0)) > 0:
                paths.add((line.get("conn"), line.get("path")))
        counters = {"quic_connections": len(connections), "quic_paths": len(paths)}
        if not connections:
            return Proof(counters, "no QUIC connection reached the gateway: the client's requests "
                                   "did not go through the hop")
        want = len(self.network.paths) if self.options.mode == "mpquic" else 1
        if len(paths) < want:
            return Proof(counters, f"transport {self.options.mode}, but the gateway sent on "
                                   f"{len(paths)} QUIC path(s) of the {want} it was given")
        return Proof(counters)

    def hold(self, address: str, held: bool) -> None:
        """Holds back (`held`) or releases the gateway's paths to client address `address`:
        no new data goes on them while another path can carry it. Answered within
        CONTROL_TIMEOUT_S, or an error saying why not."""
        gateway = self._gateway
        if gateway is None or gateway.stdin is None or gateway.stdout is None:
            raise UserError("the QUIC hop is not running: no gateway to hold a path back")
        command = f"{'hold' if held else 'release'} {address}"
        with self._control:
            try:
                gateway.stdin.write(command + "\n")
                gateway.stdin.flush()
            except (OSError, ValueError) as exc:
                raise UserError(f"the QUIC hop's gateway did not take `{command}`: {exc}; "
                                f"{self.problem() or 'it still runs'}") from exc
            answer = keyed_line(gateway, "control", CONTROL_TIMEOUT_S)
        if answer is None:
            raise UserError(f"the QUIC hop's gateway did not answer `{command}` within "
                            f"{CONTROL_TIMEOUT_S:g} s ({self.problem() or 'it still runs'})")
        if not answer.get("ok"):
            raise UserError(f"the QUIC hop's gateway refused `{command}`: "
                            f"{answer.get('error')}")

    def redundant_bytes(self) -> int | None:
        """What the gateway's scheduler re-injected: each path's last count (a path's lines
        carry `redundant_bytes` only under a scheduler that re-injects; None otherwise)."""
        last: dict[tuple[object, object], int] = {}
        for line in read_json_lines(self.gateway_stats):
            if "redundant_bytes" in line:
                last[(line.get("conn"), line.get("path"))] = int(line["redundant_bytes"])
        return sum(last.values()) if last else None

    def close(self) -> None:
        """Stops the proxy, then the gateway (SIGTERM: each closes its connection cleanly and
        finishes its qlog); safe to call twice."""
        for proc in (self._proxy, self._gateway):
            if proc is not None:
                if proc.stdin is not None:  # the gateway's control channel: ended first
                    with self._control, contextlib.suppress(OSError):
                        proc.stdin.close()
                stop(proc, timeout=5.0)
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()


def _ready(proc: subprocess.Popen[str], name: str) -> dict:
    return await_ready(proc, f"the QUIC hop's {name}", READY_TIMEOUT_S,
                       lambda: _last_words(proc))


def _last_words(proc: subprocess.Popen[str]) -> str:
    if proc.stderr is None or proc.poll() is None:
        return "(still running)"
    if proc.stderr.closed:
        return "(stopped by mpstream)"
    text = proc.stderr.read().strip()
    return text[-400:] or "(it said nothing)"
