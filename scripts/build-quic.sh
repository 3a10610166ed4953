#!/usr/bin/env bash
# Builds the QUIC hop (quic/: the proxy and gateway of the quic and mpquic transports) into
# build/mpstream-quic (`make quic`).
#
# The binary is built once per source, lockfile and compiler, in a cache outside the clone
# ($MPSTREAM_CACHE, default /var/cache/mpstream): a second clone copies it from there, and
# cargo's own target folder is kept there too, so a change to our sources rebuilds only them.
#
# `build-quic.sh --test` runs the hop's Rust unit tests instead (`make test-quic`), in the same
# target folder and release profile, so that they reuse the binary's compiled dependencies.
#
# A machine without cargo (Rust 1.88 or newer) gets a warning and no binary; mpstream refuses the
# quic and mpquic transports there with the same words, and `mpstream doctor` reports it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/build/mpstream-quic}
src=$here/quic
cargo=${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}
if [[ ! -x $cargo && ${1:-} == --test ]]; then
  echo "error: cannot run the QUIC hop's unit tests; missing: cargo (Rust 1.88 or newer, https://rustup.rs)" >&2
  exit 1
elif [[ ! -x $cargo ]]; then
  echo "warning: the QUIC hop (transports quic, mpquic) not built; missing: cargo (Rust 1.88 or newer, https://rustup.rs)" >&2
  exit 0
fi
rustc=$(dirname "$cargo")/rustc
[[ -x $rustc ]] || rustc=rustc

root=${MPSTREAM_CACHE:-/var/cache/mpstream}/quic
if [[ ${1:-} == --test ]]; then
  mkdir -p "$root"
  exec 9>"$root/.lock"
  flock 9
  CARGO_TARGET_DIR=$root/target exec "$cargo" test --release --locked --quiet \
    --manifest-path "$src/Cargo.toml"
fi

key=$( { cat "$src/Cargo.toml" "$src/Cargo.lock" "$src"/src/*.rs "$0"; "$rustc" --version; } | sha256sum | cut -c1-16)
cache=$root/$key
if [[ ! -e $cache/.complete ]]; then
  mkdir -p "$root"
  # One build at a time shares the target folder; the lock is released when the build ends.
  exec 9>"$root/.lock"
  flock 9
  if [[ ! -e $cache/.complete ]]; then
    echo "building the QUIC hop (Rust, a few minutes the first time) ..." >&2
    CARGO_TARGET_DIR=$root/target "$cargo" build --release --locked --quiet \
      --manifest-path "$src/Cargo.toml"
    rm -rf "$cache.tmp"
    mkdir "$cache.tmp"
    cp "$root/target/release/mpstream-quic" "$cache.tmp/"
    touch "$cache.tmp/.complete"
    mv -T "$cache.tmp" "$cache"
    echo "built the QUIC hop into $cache" >&2
  fi
  exec 9>&-
fi
mkdir -p "$(dirname "$out")"
cp "$cache/mpstream-quic" "$out.tmp.$$"
mv -f "$out.tmp.$$" "$out"
