"""The page's QoE logic (probe, sender, parameters), run by node's own test runner.

The JavaScript tests live beside the code in player/tests/; the same modules run in Chromium
in tests/e2e/test_player_*.py against the real servers.
"""

import re
import subprocess
from pathlib import Path

import pytest

from mpstream.paths import REPO_ROOT, program

PLAYER = REPO_ROOT / "player"
JS_TESTS = sorted((PLAYER / "tests").glob("*.test.mjs"))


def test_there_are_js_tests():
    assert {p.name for p in JS_TESTS} >= {"probe.test.mjs", "sender.test.mjs", "params.test.mjs"}


@pytest.mark.parametrize("js_test", JS_TESTS, ids=lambda p: p.name)
def test_js(js_test: Path):
    node = program("node")
    assert node, "node is needed: the system's, or `make node` (Node.js from PyPI into .venv)"
    # The reporter is named: node 23 and later print "spec" by default even into a pipe,
    # node 18-22 print TAP there; the count lines below are TAP's.
    done = subprocess.run([node, "--test", "--test-reporter=tap", str(js_test)], cwd=PLAYER,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
    passed = re.search(r"^# pass (\d+)$", done.stdout, re.MULTILINE)
    assert passed and int(passed.group(1)) > 0, f"{js_test.name} ran no test: {done.stdout[-2000:]}"
