"""Print the pinned requirements of pyproject.toml, one a line: the project's dependencies plus
the optional groups named on the command line (`python3 docker/requirements.py sample`).

Images install these before copying the code, so that their dependency layer is rebuilt only
when pyproject.toml changes."""

import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
lines = list(project["dependencies"])
for group in sys.argv[1:]:
    lines += project["optional-dependencies"][group]
print("\n".join(lines))
