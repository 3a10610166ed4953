#!/usr/bin/env bash
# Builds the coupled congestion controls (netem/cc/*.bpf.c) into build/cc/ (`make coupled-cc`).
#
# The objects are compiled once per source, compiler and kernel BTF, into a cache outside the
# clone ($MPSTREAM_CACHE, default /var/cache/mpstream): a second clone copies them from there.
# vmlinux.h, the kernel's types the programs are written against, is dumped from the running
# kernel's BTF; CO-RE relocations let the objects load on other kernels whose fields moved.
#
# A machine that cannot build them (no clang, libbpf headers, bpftool or kernel BTF) gets a
# warning naming what is missing and no objects; mpstream refuses a coupled cc there with the
# same words, and `mpstream doctor` reports it. Everything else works without them.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/build/cc}
src=$here/netem/cc
btf=/sys/kernel/btf/vmlinux
# The coupled CCs, and the sock_ops program that caps a server's window and pacing per path.
ccs=(lia olia balia wvegas path_caps)

lacking=()
command -v clang >/dev/null || lacking+=("clang (apt-get install clang)")
command -v bpftool >/dev/null || lacking+=("bpftool (apt-get install bpftool)")
[[ -e /usr/include/bpf/bpf_helpers.h ]] || lacking+=("libbpf headers (apt-get install libbpf-dev)")
[[ -r $btf ]] || lacking+=("kernel BTF ($btf: a kernel built with CONFIG_DEBUG_INFO_BTF=y)")
if ((${#lacking[@]})); then
  echo "warning: coupled congestion controls (lia, olia, balia, wvegas) and the per-path caps (path_caps) not built; missing: ${lacking[*]}" >&2
  exit 0
fi

key=$( { cat "$src"/*.h "$src"/*.bpf.c "$0"; clang --version; sha256sum "$btf"; } | sha256sum | cut -c1-16)
cache=${MPSTREAM_CACHE:-/var/cache/mpstream}/bpf/$key
if [[ ! -e $cache/.complete ]]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/mpstream-bpf.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  bpftool btf dump file "$btf" format c >"$work/vmlinux.h"
  for cc in "${ccs[@]}"; do
    clang -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_x86 -I"$work" -I"$src" \
      -c "$src/$cc.bpf.c" -o "$work/$cc.bpf.o"
  done
  mkdir -p "$(dirname "$cache")"
  rm -rf "$cache.tmp.$$"
  mkdir "$cache.tmp.$$"
  cp "$work"/*.bpf.o "$cache.tmp.$$/"
  touch "$cache.tmp.$$/.complete"
  # Another build may have finished first: keep whichever landed.
  mv -T "$cache.tmp.$$" "$cache" 2>/dev/null || rm -rf "$cache.tmp.$$"
  echo "built the coupled congestion controls into $cache"
fi
mkdir -p "$out"
for cc in "${ccs[@]}"; do
  cp "$cache/$cc.bpf.o" "$out/$cc.bpf.o"
done
