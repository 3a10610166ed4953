"""Where the project's own files are, found from the installed package (editable install)."""

from pathlib import Path

# mpstream/ sits at the repository root next to encoder/, netem/, player/, ...
REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
