"""The `mphttp` transport: client-only multipath HTTP. The browser speaks plain HTTP to a proxy
on its own host (proxy.py beside this module), which fetches each object as byte ranges over one TCP
connection per client path. Nothing runs at the server: nginx serves the ranges as it is, so
the transport also runs on a real network (`play --url --interfaces`), where the hop's
transports cannot.

On an emulated network the page, the media and the collector come from the one server, so the
browser asks the proxy for everything. With `--url` the page and the collector are on this
host's loopback and the media on the real server: the proxy carries the media (the manifest's
address is given through it, `media_url`) and the browser reaches the page directly.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

from mpstream.jsonlines import read_json_lines
from mpstream.network import Network
from mpstream.proc import Started, await_ready, stop
from mpstream.proof import Proof
from mpstream.transports.base import PATHS_TARGET, Carrier, Transport, register
from mpstream.transports.mphttp.program import IMPLEMENTATION
from mpstream.transports.mphttp.schedulers import DEFAULT_SCHEDULER, summaries

STATS_FILE = "mphttp.jsonl"
STDERR_FILE = "mphttp-stderr.log"  # a file, not a pipe: a pipe nobody reads could fill and stall it
READY_TIMEOUT_S = 15.0
# docs/mphttp.md, "Low-latency live".
LOW_LATENCY_REFUSAL = (
    "transport mphttp cannot carry a low-latency live stream: it splits each object into byte "
    "ranges planned from the object's size, and the segment being written has no size yet (it "
    "is sent as it grows, without Content-Length); a range split of an object of unknown "
    "length cannot be planned, and mphttp does not guess one. Use mptcp or mpquic (multipath), "
    "or tcp or quic (one path)")


class MPHTTP(Transport):
    name = "mphttp"
    label = "Multipath HTTP"
    summary = ("multipath HTTP: a proxy beside the client fetches each object as byte ranges, "
               "one TCP connection a path; nothing runs at the server")
    kernel_mptcp = False
    # Every emulated path up (each pinned by its client address, as for mpquic); the kernel's
    # MPTCP endpoints there go unused, as the proxy's sockets are plain TCP.
    network_mode: ClassVar[Literal["mptcp", "tcp"]] = "mptcp"
    carries_http_only = True
    runs_on_server = False

    def schedulers(self) -> dict[str, str]:
        return summaries()

    def low_latency_refusal(self) -> str | None:
        return LOW_LATENCY_REFUSAL

    @contextlib.contextmanager
    def carrier(self, network: Network, base_url: str, workdir: Path,
                cc: str | None = None) -> Iterator[Carrier]:
        with MultipathHTTPProxy(network, base_url, workdir,
                                self.scheduler_name or DEFAULT_SCHEDULER) as proxy:
            yield proxy


@dataclass
class MultipathHTTPProxy(Started):
    """The proxy on the network's client host for one session. `base_url` is what the browser
    asks for the page; `media_url(url)` is a manifest's address through the proxy."""

    network: Network
    server_url: str
    workdir: Path
    scheduler: str = DEFAULT_SCHEDULER
    base_url: str = field(init=False, default="")
    implementation: str | None = field(init=False, default=IMPLEMENTATION)
    origin: str | None = field(init=False, default=None)
    listen: str | None = field(init=False, default=None)
    _proc: subprocess.Popen[str] | None = field(init=False, default=None)
    _closed: bool = field(init=False, default=False)

    @property
    def stats(self) -> Path:
        return self.workdir / STATS_FILE

    @property
    def stderr(self) -> Path:
        return self.workdir / STDERR_FILE

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.base_url = self.server_url
        if self._through_paths(self.server_url):
            self._start(_origin(self.server_url))

    def _through_paths(self, url: str) -> bool:
        """Whether `url` is on the network's server (reached over the client paths), not on
        this host's loopback (the page server of `play --url`). A real server is often named
        by its host name, which the network knows by its address."""
        host = urlsplit(url).hostname
        if not host:
            return False
        if host == self.network.server_addr:
            return True
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (socket.gaierror, UnicodeError):
            return False
        return any(info[4][0] == self.network.server_addr for info in infos)

    def media_url(self, url: str) -> str:
        """`url` as the browser asks it: through the proxy when it names the network's server
        (the proxy is started for that origin on the first such address), as it is when it is
        a path on the page's own server, or on another host."""
        parts = urlsplit(url)
        if not parts.scheme or not self._through_paths(url):
            return url
        if self._proc is None:
            self._start(_origin(url))
        elif self.origin != _origin(url):
            return url  # one origin per proxy: another one is asked directly
        return urlunsplit(("http", self.listen or "", parts.path, parts.query, parts.fragment))

    def _start(self, origin: str) -> None:
        """The proxy process, for `origin`, on the network's client host."""
        net = self.network
        argv = [sys.executable, "-m", "mpstream.transports.mphttp", "--upstream", origin,
                "--stats", str(self.stats), "--scheduler", self.scheduler,
                "--exit-with-parent"]
        for p in net.paths:
            argv += ["--path", ",".join([str(p.index), p.client_addr, p.client_ifname,
                                         *(["backup"] if p.backup else [])])]
        with self.stderr.open("a") as err:
            self._proc = net.popen("client", argv, stdout=subprocess.PIPE, stderr=err,
                                   text=True, start_new_session=True)
        ready = _ready(self._proc, self.stderr)
        self.origin, self.listen = origin, str(ready["listen"])
        if self._through_paths(self.server_url):
            self.base_url = f"http://{self.listen}"

    @property
    def paths_url(self) -> str | None:
        """The proxy's own per-path figures (serve.py), once it runs."""
        return f"http://{self.listen}{PATHS_TARGET}" if self.listen else None

    def problem(self) -> str | None:
        """Why the proxy no longer carries anything (it exited), or None."""
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            return f"the mphttp proxy exited ({proc.returncode}): {_last_words(self.stderr)}"
        return None

    def path_bytes(self) -> dict[int, int]:
        """Body bytes each path has received so far, from the proxy's latest statistics."""
        found: dict[int, int] = {}
        for line in read_json_lines(self.stats):
            if "event" not in line and "path" in line:
                found[int(line["path"])] = int(line.get("rx_bytes", 0))
        return found

    def proof(self) -> Proof | None:
        """What the proxy counted: the byte ranges it asked for, the bytes each path carried
        and the bytes it received twice on purpose; a multipath network on which fewer than
        two paths carried bytes (or none, on one path) is no proof of the transport."""
        lines = read_json_lines(self.stats)
        requests = [x for x in lines if x.get("event") == "request"]
        ranges = sum(len(x.get("parts", [])) for x in requests if x.get("mode") == "split")
        carried = {p: b for p, b in self.path_bytes().items() if b > 0}
        counters = {"mphttp_requests": len(requests), "mphttp_range_requests": ranges,
                    "mphttp_paths": len(carried),
                    "redundant_bytes": sum(int(x.get("redundant_bytes", 0)) for x in requests)}
        if self._proc is None:
            return Proof(counters, "the mphttp proxy never started: no address the browser "
                                   "asked for was on the network's server")
        want = min(2, len(self.network.paths))
        if not requests:
            return Proof(counters, "no request reached the mphttp proxy: the browser did not "
                                   "ask through it")
        if len(carried) < want:
            return Proof(counters, f"transport mphttp, but only {len(carried)} of the "
                                   f"{len(self.network.paths)} paths carried bytes (per path: "
                                   f"{self.path_bytes()})")
        return Proof(counters)

    def redundant_bytes(self) -> int:
        """Bytes received more than once on purpose (a lagging range asked again)."""
        return sum(int(x.get("redundant_bytes", 0)) for x in read_json_lines(self.stats)
                   if x.get("event") == "request")

    def close(self) -> None:
        """Stops the proxy (SIGTERM: it writes its last statistics); safe to call twice."""
        proc = self._proc
        if proc is None or self._closed:
            return
        self._closed = True
        stop(proc, timeout=5.0)
        if proc.stdout is not None:
            proc.stdout.close()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _ready(proc: subprocess.Popen[str], stderr: Path) -> dict:
    return await_ready(proc, "the mphttp proxy", READY_TIMEOUT_S, lambda: _last_words(stderr),
                       " (it connects once on each path first: is the server up?)")


def _last_words(stderr: Path) -> str:
    try:
        text = stderr.read_text(errors="replace").strip()
    except OSError:
        text = ""
    return text[-400:] or "(it said nothing)"


register(MPHTTP())
