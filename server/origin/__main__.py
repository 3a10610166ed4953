"""python -m mpstream.server.origin --tree DIR --socket PATH: the origin of one low-latency
tree on a unix socket, until SIGTERM (which server/process.py's parent-death signal also sends
when the stack that started it is killed)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from aiohttp import web

from mpstream.manifests.lltree import read_low_latency
from mpstream.server.origin.app import create_app


async def serve(root: Path, socket_path: Path) -> None:
    described = read_low_latency(root)
    if described is None:
        raise SystemExit(f"{root}: no low-latency live tree (live.json without low_latency)")
    runner = web.AppRunner(create_app(root, described[0]), access_log=None)
    await runner.setup()
    socket_path.unlink(missing_ok=True)
    await web.UnixSite(runner, str(socket_path)).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        socket_path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mpstream.server.origin")
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--socket", type=Path, required=True)
    args = parser.parse_args(argv)
    # To origin.log (the stack sends stderr there): what the origin decided, such as its clock.
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s: %(message)s")
    asyncio.run(serve(args.tree.resolve(), args.socket))
    sys.exit(0)


if __name__ == "__main__":
    main()
