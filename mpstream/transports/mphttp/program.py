"""The proxy as a program: its command line, its priority, its life."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys

from mpstream.transports.mphttp.clock import now, unix
from mpstream.transports.mphttp.connection import PathState
from mpstream.transports.mphttp.messages import HEAD_LIMIT, parse_origin
from mpstream.transports.mphttp.proxy import Proxy
from mpstream.transports.mphttp.schedulers import DEFAULT_SCHEDULER, SCHEDULERS
from mpstream.transports.mphttp.serve import Server

IMPLEMENTATION = "mphttp (HTTP/1.1 byte ranges, one TCP connection per path)"
# The proxy is in the data path of every download, as the kernel's TCP is, whose work runs ahead
# of any process. At the browser's priority (and at nice -10: Chromium raises its own busy
# threads to -8) it waited on the run queue 50-90 ms of every 100 ms while the player started on
# a two-core client, and every byte waited with it. A low real-time priority (below the link
# emulator's 10) puts it first at little cost to the rest: it sleeps whenever nothing arrives
# and takes about 4% of one CPU while a video plays; the kernel's RT throttling keeps a share of
# each CPU for everything else.
DEFAULT_RT_PRIORITY = 5


def parse_path(text: str) -> PathState:
    """`INDEX,ADDRESS[,IFNAME][,backup]` (a comma: IPv6 addresses have colons)."""
    fields = [f.strip() for f in text.split(",")]
    backup = fields[-1] == "backup"
    if backup:
        fields = fields[:-1]
    if len(fields) not in (2, 3) or not fields[0].isdigit():
        raise argparse.ArgumentTypeError(
            f"--path {text!r}: give INDEX,ADDRESS[,IFNAME][,backup], e.g. 0,10.1.0.2,p0")
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in fields[1] else socket.AF_INET, fields[1])
    except OSError:
        raise argparse.ArgumentTypeError(f"--path {text!r}: {fields[1]!r} is not an IP "
                                         "address of this host") from None
    return PathState(int(fields[0]), fields[1], fields[2] if len(fields) == 3 else None, backup)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m mpstream.transports.mphttp", description=(
        "Client-only multipath HTTP: a proxy that fetches each whole object as byte ranges "
        "over one TCP connection per client path."))
    ap.add_argument("--listen", default="127.0.0.1:0",
                    help="where the browser connects (port 0: any free one; the ready line "
                         "says which) [%(default)s]")
    ap.add_argument("--upstream", type=parse_origin, default=None,
                    help="the origin a request without one goes to, e.g. http://10.2.0.2:8080")
    ap.add_argument("--path", dest="paths", type=parse_path, action="append", required=True,
                    help="a client path: INDEX,ADDRESS[,IFNAME][,backup] (repeat per path)")
    ap.add_argument("--scheduler", choices=SCHEDULERS.names(), default=DEFAULT_SCHEDULER)
    ap.add_argument("--stats", default=None, help="append JSON-lines statistics to this file")
    ap.add_argument("--stats-interval-ms", type=int, default=100)
    ap.add_argument("--stall-timeout", type=float, default=2.0,
                    help="seconds without a byte before a path is taken for dead [%(default)s]")
    ap.add_argument("--no-path-timeout", type=float, default=20.0,
                    help="seconds a request waits for a path when all are down [%(default)s]")
    ap.add_argument("--rt-priority", type=int, default=DEFAULT_RT_PRIORITY,
                    help="SCHED_FIFO priority (0: an ordinary process; without the privilege it "
                         "stays one) [%(default)s]")
    ap.add_argument("--exit-with-parent", action="store_true",
                    help="stop when the process that started this one ends")
    args = ap.parse_args(argv)
    indexes = [p.index for p in args.paths]
    if len(set(indexes)) != len(indexes):
        ap.error(f"--path: an index is given twice ({indexes})")
    return args


def raise_priority(rt_priority: int) -> str:
    """Runs the process at real-time priority `rt_priority` (its children, if any, start as
    ordinary processes) where allowed; what it runs as."""
    if rt_priority > 0:
        with contextlib.suppress(PermissionError, OSError):
            os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK,
                                  os.sched_param(rt_priority))
    policy = os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK
    return f"fifo:{os.sched_getparam(0).sched_priority}" if policy == os.SCHED_FIFO \
        else f"nice:{os.getpriority(os.PRIO_PROCESS, 0)}"


async def main_async(args: argparse.Namespace) -> int:
    host, _, port = args.listen.rpartition(":")
    priority = raise_priority(args.rt_priority)
    stats = open(args.stats, "a", buffering=1) if args.stats else None  # noqa: SIM115
    proxy = Proxy(args.paths, args.upstream, stats, args.stall_timeout, args.no_path_timeout,
                  args.stats_interval_ms / 1000)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, proxy.stopping.set)
    parent = os.getppid()
    serving = Server(proxy, SCHEDULERS.get(args.scheduler))
    server = await asyncio.start_server(serving.serve_client, host.strip("[]") or "127.0.0.1",
                                        int(port or 0), limit=HEAD_LIMIT)
    try:
        await proxy.warm_up()
        listen = server.sockets[0].getsockname()
        proxy.log({"event": "ready", "t": unix(now()), "listen": f"{listen[0]}:{listen[1]}",
                   "upstream": str(args.upstream) if args.upstream else None,
                   "scheduler": args.scheduler, "priority": priority,
                   "paths": [p.describe() for p in args.paths]})
        print(json.dumps({"ready": {
            "listen": f"{listen[0]}:{listen[1]}", "paths": [p.index for p in args.paths if p.up],
            "implementation": IMPLEMENTATION, "scheduler": args.scheduler}}), flush=True)
        stats_task = asyncio.create_task(proxy.stats_loop())
        lag_task = asyncio.create_task(proxy.lag_loop())
        watchdog = asyncio.create_task(proxy.watchdog())
        while not proxy.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proxy.stopping.wait(), 0.5)
            if args.exit_with_parent and os.getppid() != parent:
                proxy.stopping.set()  # orphaned: whoever started it is gone
        await stats_task
        lag_task.cancel()
        watchdog.cancel()
    finally:
        server.close()
        await proxy.stop()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()
        if stats is not None:
            stats.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return asyncio.run(main_async(args))
    except OSError as exc:
        print(f"mphttp: {exc} (is --listen {args.listen} free, and is each --path address one "
              f"of this host's?)", file=sys.stderr)
        return 1
