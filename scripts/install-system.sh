#!/usr/bin/env bash
# Installs the Debian packages listed in system-packages.txt that are missing.
# Quick when everything is there: it asks dpkg first and only runs apt-get when it must.
#
# The host is left as it was: packages such as nginx, postgresql and mptcpd start a system
# service when they are installed, and mpstream runs its own instances instead. Rather than
# stopping those services afterwards (which could stop one the host was already running), the
# install runs under a policy-rc.d that tells Debian's maintainer scripts not to start any
# service, the mechanism Debian provides for this (invoke-rc.d(8)). It is removed at the end,
# and only if this script created it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t wanted < <(grep -v '^\s*#' "$here/system-packages.txt" | awk 'NF {print $1}')
# A name also counts as there when an installed package provides it (Node.js from NodeSource
# provides npm, and Debian's npm package would conflict with it).
provided=" $(dpkg-query -W -f='${db:Status-Abbrev}|${Provides}\n' 2>/dev/null \
  | awk -F'|' '$1 ~ /^ii/ {print $2}' | tr ',' '\n' | sed 's/([^)]*)//; s/ //g' | sort -u | tr '\n' ' ') "
missing=()
for pkg in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" || "$provided" == *" $pkg "* ]] || missing+=("$pkg")
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
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\n# mpstream setup: no service starts while packages install\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get -o DPkg::Lock::Timeout=600 update -qq
# With recommends, as on the machines the suite was run on (Chromium pulls its fonts and GL
# libraries that way).
apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
