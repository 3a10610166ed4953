"""Per-trial wire evidence: packet headers on every path interface, and the kernel's MPTCP
counters before and after.

`PacketCapture` runs one tcpdump per interface (each client path interface, and the server's),
keeping only the first SNAPLEN bytes of a packet: Ethernet, IP and TCP headers with all their
options (MPTCP's MP_CAPABLE, MP_JOIN, DSS, ADD_ADDR are TCP options), no payload. A capture
stops at MAX_PACKETS so a trial's raw data stays bounded (about 28 MB an interface before
compression); the start of a trial, where the startup penalty lives, is always kept. The files
are gzip-compressed pcap, which Wireshark and tshark open as they are.

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

# 14 (Ethernet) + 20 (IPv4) + 60 (TCP with the most options) = 94: 128 keeps every header.
SNAPLEN = 128
MAX_PACKETS = 200_000
READY_TIMEOUT_S = 5.0


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
    """Returns once tcpdump says it listens (its first line on stderr); raises if it ended."""
    stderr = proc.stderr
    assert stderr is not None
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(stderr.readline()), daemon=True)
    reader.start()
    reader.join(READY_TIMEOUT_S)
    line = box[0] if box else ""
    if "listening on" not in line:
        rest = ""
        if proc.poll() is not None:
            rest = stderr.read()
        raise UserError(f"tcpdump on {ifname} did not start: {(line + rest).strip()[:300]}")
    # Drain the rest of stderr so tcpdump never blocks on a full pipe.
    threading.Thread(target=stderr.read, daemon=True).start()


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
