"""Reading a played session back from the collector, for tests that play against real servers
(tests/e2e/test_player_*.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def collector_get(stack: Any, path: str) -> Any:
    """GET an API path over the collector's socket (None when it answers anything but 200)."""
    from mpstream.qoe.collector import CollectorClient, CollectorRefused

    try:
        return CollectorClient.over_socket(stack.collector_socket).get(path)
    except CollectorRefused:
        return None


def session_events(stack: Any, session_id: str) -> list[dict[str, Any]]:
    found = collector_get(stack, f"/sessions/{session_id}")
    assert found is not None, f"the collector has no session {session_id}"
    return found["events"]


def play(network: Any, server: Any, *, transport: str = "mptcp", page: Any = None,
         **request: Any) -> dict[str, Any]:
    """One session through the product's `play_session`, as the flat object `play --json`
    prints (`transport` by name; `page`: a browser page the caller opened already)."""
    from mpstream.player.session import PlayRequest, play_session
    from mpstream.transports.base import get_transport

    req = PlayRequest(transport=get_transport(transport), **request)
    return play_session(network, server, req, page=page).as_json()


def playing(stack: Any, session_id: str) -> bool:
    """The collector has the session's startup event: the page rendered a frame, it plays."""
    if stack is None:
        return False
    try:
        found = collector_get(stack, f"/sessions/{session_id}")
    except OSError:  # the collector is not up (yet)
        return False
    return found is not None and any(e["type"] == "startup" for e in found["events"])


def stack_of(pid: int, media: Path) -> Any:
    """A handle on the ServerStack that `mpstream play` (process `pid`) started, to read its
    collector; None until its work directory is there (in the play's trial folder)."""
    from mpstream.scratch import session_folders
    from mpstream.server.stack import ServerStack

    workdirs = [workdir for folder in session_folders("play", pid)
                for workdir in folder.glob("trials/*/server")]
    return ServerStack(media, workdir=workdirs[0]) if workdirs else None


def replay_abr(events: list[dict[str, Any]], folder: Path) -> tuple[int, dict[str, Any]]:
    """The exit status and the answer of player/replay-abr.mjs, which recomputes every recorded
    decision of a rule of ours from its inputs (docs/abr.md), on `events` (written to `folder`)."""
    import json
    import subprocess

    from mpstream.paths import program

    path = folder / "events.json"
    path.write_text(json.dumps(events))
    replay = Path(__file__).resolve().parents[1] / "player" / "replay-abr.mjs"
    done = subprocess.run([program("node") or "node", str(replay), str(path)],
                          capture_output=True, text=True, check=False)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)
