#!/usr/bin/env bash
# Type-checks the mpstream packages with mypy (configured in pyproject.toml's [tool.mypy]);
# `make lint` runs it after ruff, naming the checker in $MYPY (default: the venv's mypy). Extra
# arguments go to mypy.
#
# The parts live in top-level folders and install as mpstream.<part> through setuptools'
# package-dir, which mypy cannot follow. So a tree of symlinks under build/typecheck/ lays them
# out as the installed package (mpstream/'s own files, and one link per part folder), mypy
# checks that tree, and its messages name the repository's files again
# (mpstream/runner/run.py -> runner/run.py).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py="$here/.venv/bin/python"

# "part folder" pairs, from pyproject.toml's package-dir: "runner runner", ...
mapfile -t parts < <("$py" - "$here/pyproject.toml" <<'EOF'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    package_dir = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
for package, folder in package_dir.items():
    if package.startswith("mpstream."):
        print(package.removeprefix("mpstream."), folder)
EOF
)

# Laid anew each run, so that a file added or removed shows up; mypy's cache beside it is kept.
tree="$here/build/typecheck"
rm -rf "$tree/mpstream"
mkdir -p "$tree/mpstream"
for entry in "$here"/mpstream/*; do
  [[ $(basename "$entry") == __pycache__ ]] || ln -s "$entry" "$tree/mpstream/"
done
sed_expr=()
for pair in "${parts[@]}"; do
  read -r part folder <<<"$pair"
  ln -s "$here/$folder" "$tree/mpstream/$part"
  sed_expr+=(-e "s#^mpstream/$part/#$folder/#")
done

# mypy's cache outside the clone, as the other builds' ($MPSTREAM_CACHE): a fresh clone then
# checks in about 5 s instead of 35. mypy checks each cached module against its source's
# hash, so clones of other commits share it safely; where it cannot be made, build/typecheck's.
cache=${MPSTREAM_CACHE:-/var/cache/mpstream}/mypy
mkdir -p "$cache" 2>/dev/null && [[ -w $cache ]] || cache="$tree/.mypy_cache"

cd "$tree"
set +e
${MYPY:-"$py" -m mypy} --config-file "$here/pyproject.toml" --python-executable "$py" \
  --cache-dir "$cache" -p mpstream "$@" \
  | sed "${sed_expr[@]}"
exit "${PIPESTATUS[0]}"
