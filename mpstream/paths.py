"""Where the project's own files are, found from the installed package (editable install)."""

from pathlib import Path

# mpstream/ sits at the repository root next to encoder/, netem/, player/, ...
REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
# Media trees: `mpstream encode` writes media/default (from the directory it runs in) unless
# told otherwise; the runner and `mpstream demo` cache their encodes under media/cache/<key>/.
MEDIA_DIR = REPO_ROOT / "media"
DEFAULT_MEDIA = Path("media") / "default"
MEDIA_CACHE = MEDIA_DIR / "cache"
