"""What a host's real paths to a server are, measured just before (and after) a session: each
interface's round-trip time and throughput on its own, then the MPTCP aggregate over all of
them, so that every result on a real network says what the network was.

Each interface is measured with a timed HTTP download bound to it (`curl --interface`): the
round trip is the TCP handshake's, the throughput the body's bytes over the transfer time. The
download is a large file on the server: `mpstream serve` offers one at /probe/blob; for another
server, name a large file with `probe_url`. The aggregate is the same download over MPTCP with
the interfaces set up as for a session (mpstream.netem.hostnet), with each interface's share
from its counters.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import click

from mpstream.errors import UserError
from mpstream.netem.hostnet import HostPaths, InterfaceSpec, interface_bytes, parse_interfaces
from mpstream.progress import working
from mpstream.transports.base import TRANSPORTS, Transport, get_transport

PROBE_PATH = "/probe/blob"  # served by `mpstream serve` (server/nginx.conf.j2)


def probe_url_for(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(f"--url {url!r}: give the http(s) URL of the server's manifest")
    return f"{parts.scheme}://{parts.netloc}{PROBE_PATH}"


def timed_download(url: str, seconds: float, interface: str | None = None,
                   transport: Transport | None = None) -> dict[str, Any]:
    """curl fetches `url` for at most `seconds` (over `transport`, plain TCP when None); round
    trip (ms) and throughput (bit/s)."""
    argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{json}", "--max-time", f"{seconds:g}",
            "--connect-timeout", "5"]
    if interface:
        argv += ["--interface", interface]
    argv.append(url)
    if transport is not None:
        if transport.runs_on_server:
            raise UserError(f"transport {transport.name} runs a gateway on the server host, and "
                            "mpstream runs nothing on a real network's server: check the paths "
                            "with mptcp or tcp")
        missing = transport.machine_refusals()
        if missing:
            raise UserError("; ".join(missing))
        argv = transport.wrap(argv)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 15)
    try:
        info = json.loads(done.stdout)
    except ValueError:
        return {"error": f"curl failed (exit {done.returncode}): {done.stderr.strip()[:200]}"}
    if info.get("local_port") and info.get("remote_port"):
        wait_connection_gone(int(info["local_port"]), int(info["remote_port"]))
    # Exit 28 is the time limit, which is how a long download is meant to end.
    if done.returncode not in (0, 28) or info.get("http_code") not in (200, 206):
        reason = info.get("errormsg") or f"HTTP {info.get('http_code')}"
        return {"error": f"{url}: {reason}"}
    rtt_s = info["time_connect"] - info["time_namelookup"]
    body_s = info["time_total"] - info["time_starttransfer"]
    size = int(info["size_download"])
    return {
        "rtt_ms": round(rtt_s * 1000, 2),
        "throughput_bps": round(size * 8 / body_s) if body_s > 0 else None,
        "bytes": size,
        "seconds": round(info["time_total"], 3),
    }


def wait_connection_gone(local_port: int, remote_port: int, timeout_s: float = 5.0) -> None:
    """Wait, at most `timeout_s`, until the connection curl made between these ports is gone (or
    only in TIME-WAIT). curl stopped at its time limit closes an MPTCP connection gracefully, and
    the server goes on sending into it for a few hundred milliseconds: the next download (the next
    interface's, or the session after a check) must not share the link with that tail."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listing = subprocess.run(["ss", "-HntM", "state", "all", "exclude", "time-wait",
                                  f"sport = :{local_port} and dport = :{remote_port}"],
                                 capture_output=True, text=True, check=False).stdout
        if not listing.strip():
            return
        time.sleep(0.05)


def check_paths(url: str, specs: list[InterfaceSpec], *, probe_url: str | None = None,
                seconds: float = 3.0, transport: Transport | None = None,
                step: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Each interface alone, then all of them together over `transport`; `step(text)` is told
    as each of the len(specs) + 1 downloads begins."""
    transport = transport or get_transport("mptcp")
    probe = probe_url or probe_url_for(url)
    out: dict[str, Any] = {"url": url, "probe_url": probe, "seconds": seconds,
                           "interfaces": [], "aggregate": None}
    server = urlsplit(url).hostname or ""
    with HostPaths(specs, server=server, transport=get_transport("tcp")) as plain:
        for path in plain.paths:
            step(f"{path.client_ifname} alone")
            out["interfaces"].append({"interface": path.client_ifname,
                                      "address": path.client_addr,
                                      **timed_download(probe, seconds, path.client_ifname)})
    with HostPaths(specs, server=server, transport=transport,
                   purpose="mpstream paths check") as paths:
        names = [p.client_ifname for p in paths.paths]
        step(f"{transport.name} over {', '.join(names)}")
        before = interface_bytes(names)
        agg = timed_download(probe, seconds, transport=transport)
        after = interface_bytes(names)
    agg["transport"] = transport.name
    agg["interface_rx_bytes"] = {n: a["rx_bytes"] - b["rx_bytes"]
                                 for n, a, b in zip(names, after, before, strict=True)}
    out["aggregate"] = agg
    errors = [f"{i['interface']}: {i['error']}" for i in out["interfaces"] if "error" in i]
    if "error" in agg:
        errors.append(f"aggregate: {agg['error']}")
    out["errors"] = errors
    return out


def _fmt(entry: dict[str, Any]) -> str:
    if "error" in entry:
        return f"error: {entry['error']}"
    rate = entry.get("throughput_bps")
    return (f"rtt {entry['rtt_ms']:.1f} ms, "
            f"{'–' if rate is None else f'{rate / 1e6:.2f} Mbit/s'}")


@click.group()
def paths() -> None:
    """What this host's real paths to a server are."""


@paths.command("check")
@click.option("--url", required=True, help="The manifest's URL (its server is measured).")
@click.option("--interfaces", required=True, help="IF1,IF2[:backup],... as for `play`.")
@click.option("--probe-url", help=f"A large file on the server to download [default: "
                                  f"{PROBE_PATH}, which `mpstream serve` offers].")
@click.option("--seconds", type=click.FloatRange(0.5, 60), default=3.0, show_default=True,
              help="Length of each timed download.")
@click.option("--transport", type=click.Choice(TRANSPORTS.names()), default="mptcp",
              show_default=True, help="Transport of the aggregate measurement.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def check(url: str, interfaces: str, probe_url: str | None, seconds: float, transport: str,
          as_json: bool) -> None:
    """Round trip and throughput of each interface to the server, then the aggregate."""
    specs = parse_interfaces(interfaces)
    with working("paths check", steps=len(specs) + 1) as progress:
        result = check_paths(url, specs, probe_url=probe_url, seconds=seconds,
                             transport=get_transport(transport), step=progress.step)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        for entry in result["interfaces"]:
            click.echo(f"{entry['interface']:<10} {entry['address']:<20} {_fmt(entry)}")
        agg = result["aggregate"]
        shares = ", ".join(f"{n} {b:,} B" for n, b in agg["interface_rx_bytes"].items())
        click.echo(f"{transport} aggregate: {_fmt(agg)} ({shares})")
    if result["errors"]:
        raise UserError("; ".join(result["errors"]), exit_code=1)
