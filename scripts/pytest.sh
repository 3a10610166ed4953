#!/usr/bin/env bash
# Runs pytest from the project's virtual environment. Every make target that calls this selects
# tests, so a selection that matches none (pytest's exit code 5) is a broken target, a marker or
# a file list gone stale, and fails like any other test failure.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/.venv/bin/python" -m pytest "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "pytest: no test matched this selection ($*): fix the make target's markers or paths" >&2
fi
exit $rc
