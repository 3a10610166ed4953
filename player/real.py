"""What a playback session from any manifest's URL runs on (runner/sites/real.py), in the
network namespace this process runs in, over this host's own interfaces: no emulated topology.
The player page and (unless the events go to a collector elsewhere) the collector are served on
loopback; the interfaces are set up for MPTCP for the session and restored after
(mpstream.netem.hostnet)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from mpstream.errors import UserError
from mpstream.netem.hostnet import HostPaths, InterfaceSpec, parse_interfaces, route_interface
from mpstream.scratch import session_tempdir
from mpstream.server.stack import ServerStack
from mpstream.transports.base import Transport


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--url {url!r}: give an http(s) URL of an HLS playlist or a DASH MPD, "
                        "e.g. http://192.0.2.10:8080/media/dash/manifest.mpd")


def _free_local_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def interface_specs(url: str, interfaces: str | None) -> list[InterfaceSpec]:
    """The interfaces to use towards `url`'s server: those named ("IF1,IF2[:backup]"), else
    the one its route takes now."""
    _check_url(url)
    if interfaces:
        return parse_interfaces(interfaces)
    return [route_interface(urlsplit(url).hostname or "")]


@contextlib.contextmanager
def real_network(url: str, specs: list[InterfaceSpec],
                 transport: Transport) -> Iterator[HostPaths]:
    """This host's interfaces `specs` towards `url`'s server, set up for `transport` and
    restored on the way out (also on SIGTERM)."""
    from mpstream.proc import signals_interrupt

    host = urlsplit(url).hostname or ""
    with signals_interrupt(), HostPaths(specs, server=host, transport=transport) as paths:
        yield paths


@contextlib.contextmanager
def page_server() -> Iterator[ServerStack]:
    """The player page and a collector on loopback (plain TCP), with its files in a temporary
    folder (a unix socket's path must be short)."""
    with (
        session_tempdir("play-url") as page_media,
        ServerStack(Path(page_media), host="127.0.0.1", port=_free_local_port(),
                    mptcp=False) as stack,
    ):
        yield stack
