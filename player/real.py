"""One playback session from any manifest's URL, in the network namespace this process runs in,
over this host's own interfaces: no emulated topology. The player page and (unless the events go
to a collector elsewhere) the collector are served on loopback; the interfaces are set up for
MPTCP for the session and restored after (mpstream.hostnet)."""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mpstream.errors import UserError


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--url {url!r}: give an http(s) URL of an HLS playlist or a DASH MPD, "
                        "e.g. http://192.0.2.10:8080/media/dash/manifest.mpd")


def _free_local_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def play_url(url: str, *, player: str, transport: str, interfaces: str | None,
             collector_url: str | None, on_done: Callable[[Any], None] | None = None,
             **session: Any) -> dict[str, Any]:
    """Plays `url` (`interfaces`: "IF1,IF2[:backup]", default the route to the server's).
    `on_done(stack)` runs once the session has ended, while the local collector still
    answers."""
    from mpstream.hostnet import HostPaths, parse_interfaces, route_interface
    from mpstream.player.session import play_session
    from mpstream.proc import signals_interrupt
    from mpstream.server.stack import ServerStack

    _check_url(url)
    host = urlsplit(url).hostname or ""
    specs = parse_interfaces(interfaces) if interfaces else [route_interface(host)]
    with (
        signals_interrupt(),
        tempfile.TemporaryDirectory(prefix="mps-play-url-") as page_media,
        HostPaths(specs, server=host, transport=transport) as paths,
        ServerStack(Path(page_media), host="127.0.0.1", port=_free_local_port(),
                    mptcp=False) as stack,
    ):
        result = play_session(paths, stack, player=player, manifest_path=url,
                              transport=transport, collector_url=collector_url, **session)
        if on_done is not None:
            on_done(stack)
    return result


