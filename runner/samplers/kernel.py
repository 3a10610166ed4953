"""Per-subflow kernel samples: every TCP socket (MPTCP subflows are TCP sockets) of a network
namespace, read with `ss -tinmHe` every 100 ms and written as CSV rows; and, when asked, the
MPTCP connections' own sockets from the same poll (`ss -tMinmHe`), in a file of their own.

Polling alone loses the bytes a socket carries between its last sample and its end (all of them
for a socket that lives less than one interval). So beside the poll, `ss -E` follows the
namespace's socket-destroy events: the kernel reports each TCP socket once more as it is freed,
with its final counters, and that report is written as a row in state DESTROYED. One exception
is the kernel's: an MPTCP connection's first subflow that reaches CLOSE before its connection is
closed is reset with tcp_disconnect(), which zeroes its counters and its peer port before it is
freed; its report then carries nothing (and another address pair), and the poll's last sample
stands for it. A socket still open when the sampler stops has had no end to report: stop() polls
once more, so the samples hold every open socket's bytes up to the moment it was stopped.

The runner samples both ends: the client namespace (bytes received per path: who carried the
video) and the server namespace (the sender's retransmissions, RTT and congestion window: the
download direction's congestion control lives at the server). The path of a socket is found from
its client-side address: the local address in the client namespace, the peer in the server's.
"""

from __future__ import annotations

import csv
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from mpstream.netem.sockets import MPTCP_LEVEL, parse_ss, split_host_port
from mpstream.network import in_netns
from mpstream.proc import stop as stop_process

FIELDS = (
    "t_s",
    "host",
    "path",
    "local",
    "peer",
    "state",
    "mptcp",
    "token",
    "bytes_sent",
    "bytes_acked",
    "bytes_received",
    "bytes_retrans",
    "retrans_total",
    "rtt_ms",
    "cwnd",
    "cc",
    # Socket memory (`ss -m` skmem): rmem, data received and not yet read by the application
    # (for an MPTCP connection's own socket, also the data waiting behind a hole in its
    # sequence); rcvbuf and sndbuf, the buffer sizes; wmem, data queued to send.
    "rmem",
    "rcvbuf",
    "wmem",
    "sndbuf",
    # Bytes the application wrote that the socket has not sent yet (tcp_info's notsent):
    # what a corked subflow is holding; and the packets sent and not yet acknowledged.
    "notsent",
    "unacked",
)

# The `mptcp` column: 0 a plain TCP socket, 1 an MPTCP subflow, MPTCP_LEVEL an MPTCP connection's
# own socket (`ss -M`: one a connection, beside its subflows), written to a file of its own with
# the same columns (no byte counters: the kernel reports none there).

# A row written from a socket-destroy event (final counters), not from the periodic poll.
DESTROYED = "DESTROYED"

def socket_rows(
    sockets: list[dict], *, t_s: float, host: str, path_of: Callable[[str], int | None]
) -> list[dict]:
    rows = []
    for s in sockets:
        local_ip, _ = split_host_port(s["local"])
        peer_ip, _ = split_host_port(s["peer"])
        client_ip = local_ip if host == "client" else peer_ip
        row = {k: s.get(k, "") for k in FIELDS}
        row.update(
            t_s=f"{t_s:.3f}",
            host=host,
            path=_blank_none(path_of(client_ip)),
            mptcp=s.get("mptcp", 0),
            retrans_total=s.get("retrans_total", 0),
            bytes_retrans=s.get("bytes_retrans", 0),
            notsent=s.get("notsent", 0),
            unacked=s.get("unacked", 0),
        )
        rows.append(row)
    return rows


def _blank_none(v: int | None) -> int | str:
    return "" if v is None else v


class SubflowSampler:
    """Samples one namespace's TCP sockets every `interval_s` into a CSV file, in a thread.

    `path_of(client_ip)` names the path index of a client address (None: not on a test path,
    e.g. loopback). Time `t_s` counts from `t0` (time.monotonic()), shared by both samplers of a
    trial so their rows line up.
    """

    def __init__(
        self,
        netns: str | None,
        host: str,
        out: Path,
        path_of: Callable[[str], int | None],
        *,
        t0: float | None = None,
        interval_s: float = 0.1,
        mptcp_out: Path | None = None,
    ):
        self.netns, self.host, self.out, self.path_of = netns, host, Path(out), path_of
        # Where the MPTCP connections' own sockets go (None: not sampled). The same poll lists
        # them (`ss -tM`), so both files see one instant and a trial of either transport runs
        # the same processes; the file is written once the first connection is seen. They are
        # polled only: the kernel sends no destroy events for them, and they carry no byte
        # counters to lose.
        self.mptcp_out = Path(mptcp_out) if mptcp_out else None
        self._mptcp_fh: TextIO | None = None
        self._mptcp_writer: csv.DictWriter[str] | None = None
        self.t0 = time.monotonic() if t0 is None else t0
        self.interval_s = interval_s
        self.samples = 0
        self.destroyed = 0  # sockets reported by a destroy event
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._events: subprocess.Popen | None = None
        self._events_thread: threading.Thread | None = None
        self._fh: TextIO | None = None
        self._writer: csv.DictWriter[str] | None = None
        self._lock = threading.Lock()

    def _argv(self) -> list[str]:
        return in_netns(self.netns, ["ss", "-tMinmHe" if self.mptcp_out else "-tinmHe"])

    def _events_argv(self) -> list[str]:
        # ss writes through stdio: line-buffered, each report reaches us as it happens and
        # nothing is lost in a buffer when ss is stopped.
        return in_netns(self.netns, ["stdbuf", "-oL", "ss", "-E", "-tinmHe"])

    def _write(self, rows: list[dict]) -> None:
        subflows = [r for r in rows if r["mptcp"] != MPTCP_LEVEL]
        connections = [r for r in rows if r["mptcp"] == MPTCP_LEVEL]
        with self._lock:
            if self._writer is not None and subflows:
                self._writer.writerows(subflows)
            if self._writer is not None and connections and self.mptcp_out is not None:
                if self._mptcp_writer is None:
                    self._mptcp_fh = self.mptcp_out.open("w", newline="")
                    self._mptcp_writer = csv.DictWriter(self._mptcp_fh, fieldnames=FIELDS)
                    self._mptcp_writer.writeheader()
                self._mptcp_writer.writerows(connections)

    def _follow_destroys(self) -> None:
        """Reads `ss -E` until it ends: each report is a header line and one info line."""
        assert self._events is not None and self._events.stdout is not None
        pending: list[str] = []

        def flush() -> None:
            if not pending:
                return
            t = time.monotonic() - self.t0
            socks = parse_ss("\n".join(pending))
            pending.clear()
            for sock in socks:
                sock["state"] = DESTROYED
            rows = socket_rows(socks, t_s=t, host=self.host, path_of=self.path_of)
            self.destroyed += len(rows)
            self._write(rows)

        for line in self._events.stdout:
            if not line.strip():
                continue
            if not line[0].isspace():
                flush()
                pending.append(line.rstrip("\n"))
            else:
                pending.append(line.rstrip("\n"))
                flush()
        flush()

    def sample_once(self) -> list[dict]:
        t = time.monotonic() - self.t0
        proc = subprocess.run(self._argv(), capture_output=True, text=True, timeout=5)
        if proc.returncode != 0:
            self.errors.append(proc.stderr.strip()[:200])
            return []
        return socket_rows(parse_ss(proc.stdout), t_s=t, host=self.host, path_of=self.path_of)

    def _poll(self) -> None:
        try:
            self._write(self.sample_once())
            self.samples += 1
        except (subprocess.TimeoutExpired, OSError) as exc:
            self.errors.append(str(exc)[:200])

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._poll()
            # A fixed grid, not interval after each sample: ss's own run time is not drift.
            next_at += self.interval_s
            delay = next_at - time.monotonic()
            if delay < 0:
                next_at = time.monotonic()
                delay = 0
            self._stop.wait(delay)

    def start(self) -> SubflowSampler:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.out.open("w", newline="")
        self._writer = csv.DictWriter(self._fh, fieldnames=FIELDS)
        self._writer.writeheader()
        # Destroy events first: a socket that ends before the first poll is still reported.
        try:
            self._events = subprocess.Popen(self._events_argv(), stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, text=True)
        except OSError as exc:
            self.stop()
            raise OSError(f"cannot follow socket-destroy events with ss -E: {exc}") from exc
        self._events_thread = threading.Thread(target=self._follow_destroys,
                                               name=f"sampler-{self.host}-destroys", daemon=True)
        self._events_thread.start()
        self._thread = threading.Thread(target=self._loop, name=f"sampler-{self.host}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None  # a second stop() polls no more
        if thread is not None:
            thread.join(timeout=10)
            # A closing poll: the sockets still open carried bytes since the last poll, up to
            # an interval's worth, that no destroy event will report. A caller that compares
            # the samples with other counters (the interfaces') reads those first, then stops.
            self._poll()
        if self._events is not None:
            # Everything ss reported is already in the pipe (line-buffered): stop it, then read
            # the pipe to its end.
            stop_process(self._events, timeout=3)
            if self._events_thread is not None:
                self._events_thread.join(timeout=10)
            if self._events.stdout is not None:
                self._events.stdout.close()
        with self._lock:
            for fh in (self._fh, self._mptcp_fh):
                if fh is not None:
                    fh.close()
            self._fh, self._writer = None, None
            self._mptcp_fh, self._mptcp_writer = None, None

    def __enter__(self) -> SubflowSampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# One row of a samples CSV (FIELDS), numbers as numbers.
SampleRow = dict[str, Any]


def read_samples(path: Path) -> list[SampleRow]:
    """Rows of a samples CSV with numbers as numbers (empty path -> None)."""
    out = []
    with Path(path).open(newline="") as fh:
        for row in csv.DictReader(fh):
            rec: SampleRow = dict(row)
            rec["t_s"] = float(row["t_s"])
            rec["path"] = int(row["path"]) if row["path"] not in ("", None) else None
            for k in ("bytes_sent", "bytes_acked", "bytes_received", "bytes_retrans",
                      "retrans_total", "cwnd", "mptcp", "rmem", "rcvbuf", "wmem", "sndbuf",
                      "notsent", "unacked"):
                rec[k] = int(row[k]) if row.get(k) not in ("", None) else 0
            rec["rtt_ms"] = float(row["rtt_ms"]) if row.get("rtt_ms") not in ("", None) else None
            out.append(rec)
    return out
