#!/usr/bin/env bash
# Runs pytest from the project's virtual environment. A marker selection that matches no test
# (pytest's exit code 5) is reported, not failed: `make test-e2e` on a tree without e2e tests
# should say so rather than break. `make test` always selects tests, so it never hides behind this.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/.venv/bin/python" -m pytest "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "pytest: no tests matched this selection ($*)"
  exit 0
fi
exit $rc
