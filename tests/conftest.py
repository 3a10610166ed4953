"""Tests are marked by the folder they live in: tests/unit, tests/integration, tests/e2e.

`make test-unit` runs the fast ones; `make test` runs all three.
"""

from pathlib import Path

import pytest

_KINDS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.fspath)).parts
        kind = next((k for k in _KINDS if k in parts), None)
        if kind is None:
            raise pytest.UsageError(
                f"{item.nodeid}: tests live under tests/unit, tests/integration or tests/e2e"
            )
        item.add_marker(getattr(pytest.mark, kind))
