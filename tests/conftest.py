"""Tests are marked by the folder they live in: tests/unit, tests/integration, tests/e2e.

`make test-unit` runs the fast ones; `make test` runs all three. tests/compose (container images
and the compose stack) runs on its own: `make test-compose`; so does tests/cluster (trials on a
local Ray cluster): `make test-cluster`.
"""

import os
import signal
from pathlib import Path

import pytest

_KINDS = ("unit", "integration", "e2e", "compose", "cluster")


def pytest_configure(config):
    # Tests interrupt the programs they start as a terminal's Ctrl-C does. A test run started
    # in the background by a non-interactive shell (`make test &` in a script) inherits SIGINT
    # ignored, and every program it starts would inherit that too (an ignored signal stays
    # ignored across exec; Python then installs no KeyboardInterrupt, bash cannot trap it):
    # the programs start as from a terminal instead.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.fspath)).parts
        kind = next((k for k in _KINDS if k in parts), None)
        if kind is None:
            raise pytest.UsageError(
                f"{item.nodeid}: tests live under tests/unit, tests/integration, tests/e2e, "
                "tests/compose or tests/cluster"
            )
        item.add_marker(getattr(pytest.mark, kind))


@pytest.fixture
def trace_store(tmp_path, monkeypatch):
    """MPSTREAM_TRACES pointed at a fresh directory holding made-up traces under the names the
    presets use (TMobile-LTE-short, Verizon-LTE-short): lookup by name works as after
    `mpstream traces fetch`, without the published files (which this project does not ship)."""
    from mpstream.netem import traces

    store = tmp_path / "traces"
    store.mkdir()
    # The published traces' mean rates (down, up), in Mbit/s, so that checks of the presets
    # that use them judge the same capacities.
    means = {"TMobile-LTE-short": (16.7, 13.3), "Verizon-LTE-short": (5.0, 5.9)}
    for seed, (name, (down, up)) in enumerate(means.items()):
        for direction, mbit in (("down", down), ("up", up)):
            traces.write(store / f"{name}.{direction}", traces.synthetic(mbit * 1e6, 20, seed=seed))
    monkeypatch.setenv("MPSTREAM_TRACES", str(store))
    return store


TINY_MEDIA_SECONDS = 30.0


@pytest.fixture(scope="session")
def tiny_media(tmp_path_factory) -> Path:
    """The `tiny` ladder from the synthetic source, once per test session: a copy of the
    encode the cache outside the clone holds for this code and this ffmpeg (tests/mediacache.py),
    or a tree made earlier, named by $MPSTREAM_TEST_MEDIA."""
    prepared = os.environ.get("MPSTREAM_TEST_MEDIA")
    if prepared:
        return Path(prepared)
    from mpstream.encoder.pipeline import encode_media
    from tests.mediacache import cached_media

    out = tmp_path_factory.getbasetemp() / "player-tiny-media"
    if not (out / "media.json").is_file():
        cached_media(out, lambda folder: encode_media("synthetic", "tiny", 2.0,
                                                      TINY_MEDIA_SECONDS, folder, progress=False),
                     "synthetic", "tiny", 2.0, TINY_MEDIA_SECONDS)
    return out
