#!/usr/bin/env bash
# Installs the Debian packages that the given make targets need (system-packages.txt: each
# package with the targets that need it) and that are missing:
#
#   scripts/install-system.sh demo           # what `make demo` runs, nothing more
#   scripts/install-system.sh test           # what `make test` runs (the demo's and more)
#   scripts/install-system.sh quic compose   # what a slower target adds
#   scripts/install-system.sh --print demo   # the list only, one package a line
#
# Quick when everything is there: it asks dpkg first and only runs apt-get when it must. When it
# installs, it says for which target and why, so that a later command that needs more than the
# demo did (make test, make quic) explains the wait.
#
# The host is left as it was: packages such as nginx, postgresql and mptcpd start a system
# service when they are installed, and mpstream runs its own instances instead. Rather than
# stopping those services afterwards (which could stop one the host was already running), the
# install runs under a policy-rc.d that tells Debian's maintainer scripts not to start any
# service, the mechanism Debian provides for this (invoke-rc.d(8)). It is removed at the end,
# and only if this script created it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list=$here/system-packages.txt
# What each target's packages are for, said when they are installed.
declare -A why=(
  [demo]="the demo (make demo): encoder, nginx with MPTCP, the emulated paths, Chromium"
  [test]="the tests (make test): Firefox ESR for HEVC, clang, libbpf and bpftool for the coupled congestion controls, PostgreSQL, tcpdump"
  [quic]="the QUIC hop's build (make quic, for transports quic and mpquic): patch"
  [compose]="the container images (make test-compose): podman, runc, debootstrap"
  [trixie]="Debian 13's root file system (make test-trixie): debootstrap"
  [linkem]="the link emulator's build (make emulator): gcc, the jansson library"
  [coupled-cc]="the coupled congestion controls' BPF build (make coupled-cc): clang, libbpf, bpftool"
)
print_only=false
if [[ ${1:-} == --print ]]; then
  print_only=true
  shift
fi
if (($# == 0)); then
  echo "usage: $0 [--print] TARGET... (one or more of: ${!why[*]})" >&2
  exit 2
fi
for target in "$@"; do
  if [[ -z ${why[$target]:-} ]]; then
    echo "error: no make target '$target' in $list; known: ${!why[*]}" >&2
    exit 2
  fi
done
mapfile -t wanted < <(grep -v '^\s*#' "$list" | awk -v targets="$*" '
  BEGIN { n = split(targets, t, " "); for (i = 1; i <= n; i++) want[t[i]] = 1 }
  NF { for (i = 2; i <= NF; i++) if ($i in want) { print $1; break } }')
if $print_only; then
  printf '%s\n' "${wanted[@]}"
  exit 0
fi
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
  echo "mpstream needs these Debian packages for ${*}: ${missing[*]}" >&2
  echo "Run 'sudo apt-get install ${missing[*]}' (or run make as root), then try again." >&2
  exit 1
fi
for target in "$@"; do
  echo "Installing Debian packages for ${why[$target]}"
done
echo "  missing here: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\n# mpstream setup: no service starts while packages install\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get -o DPkg::Lock::Timeout=600 update -qq
# The demo's alone without recommends: they are Chromium's desktop parts (printing, GTK
# introspection, VA-API and Vulkan drivers, Perl), 165 of its 507 packages, and the headless
# demo runs without them (its whole run was timed so on a minimal Debian 13: apt 41 s against
# 82 s); mptcpize, which mptcpd only recommends, is listed itself. Every other target with
# recommends, as on the machines the suite was run on (Chromium's fonts and GL libraries).
recommends=()
[[ " $* " == " demo " ]] && recommends=(--no-install-recommends)
apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${recommends[@]}" "${missing[@]}" >/dev/null
