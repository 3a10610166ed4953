"""Where the project's own files are, found from the installed package (editable install)."""

import os
import shutil
import sys
from pathlib import Path

# mpstream/ sits at the repository root next to encoder/, netem/, player/, ...
REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
# Media trees: `mpstream encode` writes media/default (from the directory it runs in) unless
# told otherwise; the runner and `mpstream demo` cache their encodes under media/cache/<key>/.
MEDIA_DIR = REPO_ROOT / "media"
DEFAULT_MEDIA = Path("media") / "default"
MEDIA_CACHE = MEDIA_DIR / "cache"


def program(name: str) -> str | None:
    """`name` on PATH, else in this Python's environment (.venv/bin), where
    scripts/install-node.sh links node and npm from PyPI on a system that has none."""
    found = shutil.which(name)
    if found is not None:
        return found
    beside = Path(sys.prefix) / "bin" / name
    return str(beside) if os.access(beside, os.X_OK) else None


def program_env() -> dict[str, str]:
    """This process's environment with .venv/bin last on PATH: npm's `#!/usr/bin/env node`
    finds the environment's node there when the system has none."""
    return {**os.environ, "PATH": f"{os.environ.get('PATH', os.defpath)}{os.pathsep}"
                                  f"{Path(sys.prefix) / 'bin'}"}
