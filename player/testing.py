"""Helpers for tests that play sessions against real servers (tests/e2e/test_player_*.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

MEDIA_SECONDS = 30.0


@pytest.fixture(scope="session")
def tiny_media(tmp_path_factory) -> Path:
    """The `tiny` ladder from the synthetic source, made once per test session (or a tree made
    earlier, named by $MPSTREAM_TEST_MEDIA, to save the encode when iterating)."""
    prepared = os.environ.get("MPSTREAM_TEST_MEDIA")
    if prepared:
        return Path(prepared)
    from mpstream.encoder.pipeline import encode_media

    # Each test module imports this fixture (so pytest sees one per module): the tree is kept
    # under the session's base temporary directory and made only by the first.
    out = tmp_path_factory.getbasetemp() / "player-tiny-media"
    if not (out / "media.json").is_file():
        encode_media("synthetic", "tiny", 2.0, MEDIA_SECONDS, out, progress=False)
    return out


def collector_get(stack: Any, path: str) -> Any:
    """GET an API path over the collector's socket (None when it answers anything but 200)."""
    from mpstream.server.stack import unix_get

    status, body = unix_get(stack.collector_socket, "/api/v1" + path)
    return json.loads(body) if status == 200 else None


def session_events(stack: Any, session_id: str) -> list[dict[str, Any]]:
    found = collector_get(stack, f"/sessions/{session_id}")
    assert found is not None, f"the collector has no session {session_id}"
    return found["events"]
