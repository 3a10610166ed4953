"""One playback session from any manifest's URL, in the network namespace this process runs in,
over this host's own interfaces: no emulated topology. The player page and (unless the events go
to a collector elsewhere) the collector are served on loopback; the interfaces are set up for
MPTCP for the session and restored after (mpstream.hostnet)."""

from __future__ import annotations

import contextlib
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from mpstream.errors import UserError
from mpstream.hostnet import HostPaths, parse_interfaces, route_interface
from mpstream.player.session import PageServer, PlayRequest, PlayResult, play_session
from mpstream.server.stack import ServerStack
from mpstream.transport import Transport


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--url {url!r}: give an http(s) URL of an HLS playlist or a DASH MPD, "
                        "e.g. http://192.0.2.10:8080/media/dash/manifest.mpd")


def _free_local_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def play_url(url: str, interfaces: str | None, request: PlayRequest,
             on_done: Callable[[PageServer], None] | None = None) -> PlayResult:
    """Plays `request` (its manifest: `url`) over this host's `interfaces` ("IF1,IF2[:backup]",
    default the route to the server's). `on_done(server)` runs once the session has ended,
    while the local collector still answers."""
    with real_network(url, interfaces, request.transport) as paths, page_server() as stack:
        result = play_session(paths, stack, request)
        if on_done is not None:
            on_done(stack)
    return result


@contextlib.contextmanager
def real_network(url: str, interfaces: str | None, transport: Transport) -> Iterator[HostPaths]:
    """This host's interfaces towards `url`'s server, set up for `transport` and restored on
    the way out (also on SIGTERM)."""
    from mpstream.proc import signals_interrupt

    _check_url(url)
    host = urlsplit(url).hostname or ""
    specs = parse_interfaces(interfaces) if interfaces else [route_interface(host)]
    with signals_interrupt(), HostPaths(specs, server=host, transport=transport) as paths:
        yield paths


@contextlib.contextmanager
def page_server() -> Iterator[ServerStack]:
    """The player page and a collector on loopback (plain TCP), with its files in a temporary
    folder (a unix socket's path must be short)."""
    with (
        tempfile.TemporaryDirectory(prefix="mps-play-url-") as page_media,
        ServerStack(Path(page_media), host="127.0.0.1", port=_free_local_port(),
                    mptcp=False) as stack,
    ):
        yield stack
