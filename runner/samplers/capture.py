"""Per-trial wire evidence: packet headers on every path, and the kernel's MPTCP counters before
and after.

`PacketCapture` runs one tcpdump per target. A trial captures once per namespace: the client's
every interface at once (`-i any`, loopback left out), and the server's one interface. So a
multipath condition runs as many captures as a single-path one, each woken for the same packets
(a segment's bytes cross one client interface or another, never both): the capture's cost does
not depend on the number of paths. A capture keeps only the first SNAPLEN bytes of a packet:
the link, IP and TCP headers with all their options (MPTCP's MP_CAPABLE, MP_JOIN, DSS,
ADD_ADDR are TCP options), no payload. It stops at MAX_PACKETS so a trial's raw data stays
bounded (about 28 MB a capture before compression); the start of a trial, where the startup
penalty lives, is always kept. The files are gzip-compressed pcap, which Wireshark and tshark
open as they are. The client's (link type LINUX_SLL2) gives each packet its interface's index
in the namespace; the path a packet took is told by the client's address on it.

`mptcp_counters` reads `nstat`'s MPTcpExt* counters of a namespace (absolute values, without
touching nstat's history file, which namespaces would otherwise share).
"""

from __future__ import annotations

import gzip
import json
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from mpstream.errors import UserError
from mpstream.network import in_netns
from mpstream.proc import stop

# 20 (a LINUX_SLL2 header; Ethernet's is 14) + 20 (IPv4) + 60 (TCP with the most options) = 100:
# 128 keeps every header.
SNAPLEN = 128
# Every interface of a namespace, and the filter that leaves its loopback out.
ALL_INTERFACES = "any"
NOT_LOOPBACK = "not (net 127.0.0.0/8 or host ::1)"
MAX_PACKETS = 200_000
READY_TIMEOUT_S = 5.0


def namespace_targets(client_ns: str | None,
                      server_ns: str | None) -> list[tuple[str | None, str, str]]:
    """What a trial captures: the client's namespace whole (every path), the server's interface."""
    return [(client_ns, ALL_INTERFACES, "client"), (server_ns, "eth0", "server-eth0")]


class PacketCapture:
    """tcpdump on each (netns, interface, file stem) of `targets`, written under `out_dir`."""

    def __init__(self, targets: list[tuple[str | None, str, str]], out_dir: Path, *,
                 snaplen: int = SNAPLEN, max_packets: int = MAX_PACKETS):
        if not 64 <= snaplen <= 65535:
            raise UserError(f"capture snaplen {snaplen} is out of range: give 64..65535 bytes")
        if max_packets < 1:
            raise UserError(f"capture max_packets {max_packets} must be at least 1")
        self.targets, self.out_dir = targets, Path(out_dir)
        self.snaplen, self.max_packets = snaplen, max_packets
        self._procs: list[tuple[subprocess.Popen, Path]] = []
        self.files: list[Path] = []

    def start(self) -> PacketCapture:
        if shutil.which("tcpdump") is None:
            raise UserError("--pcap needs tcpdump: run `make setup` (or apt-get install tcpdump)")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            for netns, ifname, stem in self.targets:
                pcap = self.out_dir / f"{stem}.pcap"
                # -Z root: tcpdump would otherwise drop to its own user and fail to write here.
                # --immediate-mode: packets reach tcpdump as they arrive; buffered, those of the
                # last second or so were still in the kernel's ring when stop() interrupted it,
                # and were lost (a transfer's whole capture, if it was that short).
                argv = in_netns(netns, ["tcpdump", "--immediate-mode",
                                         "-i", ifname, "-s", str(self.snaplen),
                                         "-c", str(self.max_packets), "-n", "-Z", "root",
                                         "-w", str(pcap)])
                if ifname == ALL_INTERFACES:
                    argv.append(NOT_LOOPBACK)
                proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
                self._procs.append((proc, pcap))
                _wait_listening(proc, ifname)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> list[Path]:
        """Stops every tcpdump (SIGINT: it writes out what it holds) and compresses the files."""
        for proc, _ in self._procs:
            stop(proc, graceful=signal.SIGINT, timeout=5)
            if proc.stderr is not None:
                proc.stderr.close()
        for _, pcap in self._procs:
            if pcap.is_file():
                self.files.append(_gzip(pcap))
        self._procs = []
        return self.files

    def __enter__(self) -> PacketCapture:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _wait_listening(proc: subprocess.Popen, ifname: str) -> None:
    """Returns once tcpdump says it listens on stderr, whatever it said before (`-i any` names
    its link type first; some libpcaps warn); raises as soon as tcpdump ends without saying it,
    and after READY_TIMEOUT_S if it went on without saying it."""
    stderr = proc.stderr
    assert stderr is not None
    said: list[str] = []
    decided = threading.Event()

    def read() -> None:
        for line in stderr:
            said.append(line)
            if "listening on" in line:
                decided.set()
                for _ in stderr:  # drained, so that tcpdump never blocks on a full pipe
                    pass
        decided.set()  # stderr closed: tcpdump ended

    threading.Thread(target=read, daemon=True).start()
    decided.wait(READY_TIMEOUT_S)
    if not any("listening on" in line for line in said):
        raise UserError(f"tcpdump on {ifname} did not start: {''.join(said).strip()[:300]}")


def _gzip(pcap: Path) -> Path:
    out = pcap.with_suffix(".pcap.gz")
    with pcap.open("rb") as src, gzip.open(out, "wb", compresslevel=3) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    pcap.unlink()
    return out


def mptcp_counters(netns: str | None) -> dict[str, int]:
    """The namespace's MPTcpExt* counters now (absolute, zeros included)."""
    proc = subprocess.run(in_netns(netns, ["nstat", "-a", "-s", "-z", "-j", "MPTcpExt*"]),
                          capture_output=True, text=True, timeout=10)
    if proc.returncode != 0:
        raise UserError(f"nstat failed in {netns or 'the root namespace'}: "
                        f"{proc.stderr.strip()[:200]}")
    data = json.loads(proc.stdout or "{}")
    counters = data.get("kernel", data)
    return {k: int(v) for k, v in counters.items() if k.startswith("MPTcpExt")}


class CounterSnapshots:
    """MPTcpExt* counters of each namespace before and after a trial, and their difference."""

    def __init__(self, namespaces: dict[str, str | None]):
        self.namespaces = namespaces
        self.before: dict[str, dict[str, int]] = {}
        self.after: dict[str, dict[str, int]] = {}
        self.t_before = self.t_after = 0.0

    def take_before(self) -> None:
        self.t_before = time.time()
        self.before = {host: mptcp_counters(ns) for host, ns in self.namespaces.items()}

    def take_after(self) -> None:
        self.t_after = time.time()
        self.after = {host: mptcp_counters(ns) for host, ns in self.namespaces.items()}

    def as_json(self) -> dict:
        out: dict = {}
        for host in self.namespaces:
            b, a = self.before.get(host, {}), self.after.get(host, {})
            out[host] = {
                "before": b,
                "after": a,
                "delta": {k: a[k] - b.get(k, 0) for k in a if a[k] != b.get(k, 0)},
            }
        return {"t_before": self.t_before, "t_after": self.t_after, "hosts": out}
