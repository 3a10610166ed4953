#!/usr/bin/env bash
# Installs the Debian packages listed in system-packages.txt that are missing.
# Quick when everything is there: it asks dpkg first and only runs apt-get when it must.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t wanted < <(grep -v '^\s*#' "$here/system-packages.txt" | awk 'NF {print $1}')
missing=()
for pkg in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "mpstream needs these Debian packages: ${missing[*]}" >&2
  echo "Run 'sudo apt-get install ${missing[*]}' (or run make as root), then try again." >&2
  exit 1
fi
echo "Installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# With recommends, as on the machines the suite was run on (Chromium pulls its fonts and GL
# libraries that way).
apt-get install -y -qq "${missing[@]}" >/dev/null
# Debian starts services on install; mpstream starts its own nginx and PostgreSQL.
for svc in nginx postgresql mptcp; do
  if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
    systemctl disable "$svc" >/dev/null 2>&1 || true
  fi
done
pkill -x nginx 2>/dev/null || true
