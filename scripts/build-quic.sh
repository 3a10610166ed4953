#!/usr/bin/env bash
# Builds the QUIC hop (quic/: the proxy and gateway of the quic and mpquic transports) into
# build/mpstream-quic (`make quic`).
#
# The binary is built once per source, patch, lockfile and compiler, in a cache outside the
# clone ($MPSTREAM_CACHE, default /var/cache/mpstream): a second clone copies it from there, and
# cargo's own target folder is kept there too, so a change to our sources rebuilds only them.
#
# noq-proto (the QUIC state machine under noq) is built with our packet-scheduler hook, kept as a
# patch over the pinned release in quic/patches/ (its upstream name, version and checksum in its
# header): cargo fetches the release as it fetches any crate, the patch is applied to a copy in
# the cache, and cargo builds against that copy (`--config patch.crates-io...`), so the
# repository holds no upstream code. quic/Cargo.lock records noq-proto as that patched copy.
#
# `build-quic.sh --test` runs the hop's Rust unit tests instead (`make test-quic`), in the same
# target folder and release profile, so that they reuse the binary's compiled dependencies.
#
# A machine without cargo (Rust 1.88 or newer) gets a warning and no binary; mpstream refuses the
# quic and mpquic transports there with the same words, and `mpstream doctor` reports it.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) stops the script too
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/build/mpstream-quic}
src=$here/quic
patch_file=$src/patches/noq-proto-1.4.0-scheduler.patch
cargo=${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}
if [[ ! -x $cargo && ${1:-} == --test ]]; then
  echo "error: cannot run the QUIC hop's unit tests; missing: cargo (Rust 1.88 or newer, https://rustup.rs)" >&2
  exit 1
elif [[ ! -x $cargo ]]; then
  echo "warning: the QUIC hop (transports quic, mpquic) not built; missing: cargo (Rust 1.88 or newer, https://rustup.rs)" >&2
  exit 0
fi
for tool in patch python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "error: cannot build the QUIC hop; missing: $tool (make setup installs it)" >&2
    exit 1
  fi
done
rustc=$(dirname "$cargo")/rustc
[[ -x $rustc ]] || rustc=rustc
root=${MPSTREAM_CACHE:-/var/cache/mpstream}/quic

# A line `Field: value` of the patch's header.
patch_field() {
  local value
  value=$(sed -n "s/^$1: //p" "$patch_file" | head -n 1)
  if [[ -z $value ]]; then
    echo "error: $patch_file has no '$1:' line in its header" >&2
    return 1
  fi
  echo "$value"
}

# The folder of the pristine release, unpacked by cargo. It is fetched with our own manifest and
# lockfile, in which noq-proto gets back the registry source and the checksum the patch names, so
# cargo downloads exactly that release (and checks it) along with the versions we lock.
pristine_crate() {
  local name=$1 version=$2 checksum=$3 scratch=$root/fetch
  rm -rf "$scratch"
  mkdir -p "$scratch/src"
  cp "$src/Cargo.toml" "$scratch/"
  touch "$scratch/src/main.rs"
  python3 - "$src/Cargo.lock" "$scratch/Cargo.lock" "$name" "$version" "$checksum" <<'EOF'
import sys
lock, out, name, version, checksum = sys.argv[1:]
entries = open(lock).read().split("\n\n")
want = f'[[package]]\nname = "{name}"\nversion = "{version}"\n'
hits = [i for i, e in enumerate(entries) if e.startswith(want)]
if len(hits) != 1:
    sys.exit(f"error: {lock} has {len(hits)} entries for {name} {version}, not one")
lines = [l for l in entries[hits[0]].split("\n") if not l.startswith(("source = ", "checksum = "))]
lines[3:3] = ['source = "registry+https://github.com/rust-lang/crates.io-index"',
              f'checksum = "{checksum}"']
entries[hits[0]] = "\n".join(lines)
open(out, "w").write("\n\n".join(entries))
EOF
  "$cargo" fetch --locked --quiet --manifest-path "$scratch/Cargo.toml" >&2
  "$cargo" metadata --locked --offline --format-version 1 \
    --manifest-path "$scratch/Cargo.toml" | python3 -c '
import json, os, sys
name, version = sys.argv[1:]
found = [p["manifest_path"] for p in json.load(sys.stdin)["packages"]
         if p["name"] == name and p["version"] == version and (p["source"] or "").startswith("registry+")]
if not found:
    sys.exit(f"error: cargo did not unpack {name} {version}")
print(os.path.dirname(found[0]))' "$name" "$version"
  rm -rf "$scratch"
}

# The patched copy's folder, made once per patch (call it with the build lock held).
patched_crate() {
  local name version checksum dest pristine
  name=$(patch_field Upstream-Crate)
  version=$(patch_field Upstream-Version)
  checksum=$(patch_field Upstream-Checksum)
  dest=$root/$name-$version-patched-$(sha256sum <"$patch_file" | cut -c1-16)
  if [[ ! -e $dest/.complete ]]; then
    pristine=$(pristine_crate "$name" "$version" "$checksum")
    rm -rf "$dest.tmp"
    cp -r "$pristine" "$dest.tmp"
    chmod -R u+w "$dest.tmp"
    if ! patch -p1 -d "$dest.tmp" --forward --batch --quiet <"$patch_file" >&2; then
      echo "error: $patch_file does not apply to $name $version (unpacked at $pristine)" >&2
      return 1
    fi
    touch "$dest.tmp/.complete"
    rm -rf "$dest"
    mv -T "$dest.tmp" "$dest"
    # Copies patched by earlier versions of the patch: no build needs them once the binary
    # they made is cached, and builds take the lock this runs under.
    find "$root" -maxdepth 1 -name "$name-$version-patched-*" ! -name "${dest##*/}" \
      -exec rm -rf {} +
  fi
  echo "$dest"
}

# cargo with the patched noq-proto in place of the registry's.
patched_cargo() {
  local patched
  patched=$(patched_crate)
  CARGO_TARGET_DIR=$root/target "$cargo" "$@" \
    --config "patch.crates-io.$(patch_field Upstream-Crate).path=\"$patched\""
}

if [[ ${1:-} == --test ]]; then
  mkdir -p "$root"
  exec 9>"$root/.lock"
  flock 9
  patched_cargo test --release --locked --quiet --manifest-path "$src/Cargo.toml"
  exit
fi

key=$( { cat "$src/Cargo.toml" "$src/Cargo.lock" "$src"/src/*.rs "$patch_file" "$0"; "$rustc" --version; } | sha256sum | cut -c1-16)
cache=$root/$key
if [[ ! -e $cache/.complete ]]; then
  mkdir -p "$root"
  # One build at a time shares the target folder; the lock is released when the build ends.
  exec 9>"$root/.lock"
  flock 9
  if [[ ! -e $cache/.complete ]]; then
    echo "building the QUIC hop (Rust, a few minutes the first time) ..." >&2
    patched_cargo build --release --locked --quiet --manifest-path "$src/Cargo.toml"
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
