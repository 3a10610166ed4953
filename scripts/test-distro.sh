#!/usr/bin/env bash
# The project on another Debian release, from a fresh clone: `make test-trixie`.
#
#   scripts/test-distro.sh [SUITE]        (default: trixie; run as root)
#
# A minimal root file system of SUITE is built once with debootstrap and cached under
# $MPSTREAM_CACHE (default /var/cache/mpstream). Each run lays a throw-away overlay on it and,
# chrooted into that overlay inside private mount and PID namespaces:
#   1. clones the current commit (HEAD: uncommitted changes are not part of the run) and runs
#      `make setup` there: the project's installer, uv and npm on that release. This step
#      alone uses the host's network, to reach the package registries;
#   2. in a network namespace of its own: the unit tests and a short encode;
#   3. in that kind of network namespace too, under the heavy lock ($MPSTREAM_HEAVY_LOCK,
#      default /tmp/mps-heavy.lock) because it measures: one `mpstream netem check` of a preset
#      and one `mpstream play` session (Chromium, dash.js) whose JSON result is checked.
# Downloaded .deb files, pip's, uv's and npm's caches are kept beside the root file system, so a
# second run installs everything again without downloading it again.
#
# Cleanup is the kernel's: when the last process of a step's namespaces ends, its mounts, the
# network namespaces made inside it (their /run/netns lives on the run's own /run) and its
# processes go with it. On Ctrl-C or SIGTERM the running step is asked to stop, given a few
# seconds, then its namespaces' first process is killed, which ends every process in them; the
# overlay's directory is removed on every exit. Nothing is mounted, started or left on the host.
set -euo pipefail

suite=${1:-trixie}
here=$(cd "$(dirname "$0")" && pwd)
self=$here/$(basename "$0")
repo=$(cd "$here/.." && pwd)
cache=${MPSTREAM_CACHE:-/var/cache/mpstream}/$suite
mirror=${MPSTREAM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${MPSTREAM_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
heavy_lock=${MPSTREAM_HEAVY_LOCK:-/tmp/mps-heavy.lock}
# The preset checked and played over: two 10 Mbit/s paths, MPTCP.
profile=np03-2x10
play_s=10
# What a user of the release needs before `make setup`: make itself. (git runs on this side.)
include=make,ca-certificates
# For this script's own tests: a prepared root file system instead of the debootstrap one,
# and which steps run.
given_rootfs=${MPSTREAM_DISTRO_ROOTFS:-}
steps=${MPSTREAM_DISTRO_STEPS:-setup unit heavy}
# Where the clone and the media live inside the root file system.
src=/root/mpstream
media=/root/media

say() { printf '== [%s %4ss] %s\n' "$suite" "$SECONDS" "$*"; }
die() {
  echo "test-distro: $*" >&2
  exit 1
}

# --- inside the namespaces (the script calls itself through unshare) -----------------------
# Runs as the first process of a fresh PID namespace, in a private mount namespace, before the
# chroot: mounts the overlay and what a system needs, then runs one step in the chroot.
if [[ ${1:-} == --inside ]]; then
  step=$2 run=$3 suite=$4
  cache=$(dirname "$(dirname "$run")")
  root=$run/root
  mount -t overlay overlay \
    -o "lowerdir=$(<"$run/rootfs"),upperdir=$run/upper,workdir=$run/work" "$root"
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  # A /dev of its own with just the devices a system uses, TUN for the link emulator, and
  # private pts and shm instances.
  mount -t tmpfs -o mode=755,nosuid tmpfs "$root/dev"
  for node in null zero full random urandom tty net/tun; do
    mkdir -p "$(dirname "$root/dev/$node")"
    touch "$root/dev/$node"
    mount --bind "/dev/$node" "$root/dev/$node"
  done
  mkdir "$root/dev/pts" "$root/dev/shm"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$root/dev/pts"
  ln -s pts/ptmx "$root/dev/ptmx"
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
  ln -s /proc/self/fd "$root/dev/fd"
  ln -s /proc/self/fd/0 "$root/dev/stdin"
  ln -s /proc/self/fd/1 "$root/dev/stdout"
  ln -s /proc/self/fd/2 "$root/dev/stderr"
  # `ip netns add` keeps its namespaces under /run/netns: this /run, not the host's.
  mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/run"
  mkdir -p "$root/root/.cache/pip" "$root/root/.cache/uv" "$root/root/.npm"
  mount --bind "$cache/downloads/apt" "$root/var/cache/apt/archives"
  mount --bind "$cache/downloads/pip" "$root/root/.cache/pip"
  mount --bind "$cache/downloads/uv" "$root/root/.cache/uv"
  mount --bind "$cache/downloads/npm" "$root/root/.npm"
  case $step in
    setup)
      # The host's way to the registries: its resolver, the certificate authorities it added
      # (a proxy that inspects TLS has one) and pip's configuration.
      cp -L /etc/resolv.conf "$root/etc/resolv.conf"
      if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
        chroot "$root" update-ca-certificates >/dev/null
      fi
      [[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$root/etc/pip.conf"
      git clone -q --no-hardlinks "$(<"$run/repo")" "$root$src"
      git -C "$root$src" checkout -q --detach "$(<"$run/commit")"
      command="cd $src && make setup"
      ;;
    unit)
      ip link set lo up
      command="cd $src && .venv/bin/mpstream doctor && make test-unit && .venv/bin/mpstream encode synthetic --ladder tiny \
        --duration 16 --segment-duration 2 --out $media --quiet"
      ;;
    heavy)
      ip link set lo up
      command="cd $src && .venv/bin/mpstream netem check $profile --name distrochk \
        && .venv/bin/mpstream play --media $media --profile $profile --player dashjs \
           --duration $play_s --name distroplay --json >/root/play.json \
        && .venv/bin/python scripts/check-play-json.py /root/play.json dashjs"
      ;;
    *) die "unknown step $step" ;;
  esac
  # A clean environment, but for how this host reaches the network (proxies, CA bundles).
  passed=()
  for var in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PIP_INDEX_URL \
    PIP_EXTRA_INDEX_URL PIP_CERT PIP_DEFAULT_TIMEOUT REQUESTS_CA_BUNDLE SSL_CERT_FILE \
    SSL_CERT_DIR CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS npm_config_registry npm_config_cafile; do
    [[ -n ${!var:-} ]] && passed+=("$var=${!var}")
  done
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" CI="${CI:-}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${passed[@]}" \
    /bin/bash -eo pipefail -c "$command" &
  child=$!
  # As PID 1 this shell gets only the signals it handles: pass a stop on to the step, give it
  # time to tear down its topology, then return (the kernel ends whatever is left).
  stop() {
    kill -TERM "$child" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 "$child" 2>/dev/null || break
      sleep 0.1
    done
    exit 143
  }
  trap stop TERM INT
  wait "$child"
  exit $?
fi

# --- on the host -------------------------------------------------------------------------------
[[ $(id -u) -eq 0 ]] || die "run as root (it mounts, chroots and makes namespaces): sudo make test-$suite"
command -v git >/dev/null || die "git is needed to clone the current commit: apt-get install git"
for tool in unshare flock chroot pgrep; do
  command -v "$tool" >/dev/null || die "$tool is missing (util-linux, coreutils, procps)"
done
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null \
  || die "this kernel has no overlayfs (modprobe overlay)"
commit=$(git -C "$repo" rev-parse HEAD)
if [[ -n $(git -C "$repo" status --porcelain --untracked-files=no) ]]; then
  echo "note: uncommitted changes are not tested; the run clones commit ${commit:0:12}" >&2
fi
mkdir -p "$cache/runs" "$cache/downloads/apt/partial" "$cache/downloads/pip" \
  "$cache/downloads/uv" "$cache/downloads/npm"

# The root file system, built once. The stamp says how it was made; a change rebuilds it.
rootfs=${given_rootfs:-$cache/rootfs}
stamp="2 $suite $include $mirror $security_mirror"
[[ -n $given_rootfs ]] || (

  flock 9
  if [[ ! -d $rootfs || ! -f $cache/rootfs.stamp || $(<"$cache/rootfs.stamp") != "$stamp" ]]; then
    say "building the $suite root file system in $rootfs (once; later runs reuse it)"
    if ! command -v debootstrap >/dev/null; then
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        debootstrap >/dev/null || die "could not install debootstrap: apt-get install debootstrap"
    fi
    rm -rf "$rootfs.new" "$rootfs" "$cache/rootfs.stamp"
    if ! debootstrap --variant=minbase --include="$include" --cache-dir="$cache/downloads/apt" \
      "$suite" "$rootfs.new" "$mirror" >"$cache/debootstrap.log" 2>&1; then
      tail -15 "$cache/debootstrap.log" >&2
      rm -rf "$rootfs.new"
      die "debootstrap $suite failed (log: $cache/debootstrap.log)"
    fi
    # The sources a system of that release has: its updates and security fixes too.
    rm -f "$rootfs.new/etc/apt/sources.list"
    cat >"$rootfs.new/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    # A throw-away root: dpkg need not sync every file it unpacks (as in container images).
    echo force-unsafe-io >"$rootfs.new/etc/dpkg/dpkg.cfg.d/unsafe-io"
    rm -rf "$rootfs.new/var/cache/apt/archives"/*.deb
    mv "$rootfs.new" "$rootfs"
    echo "$stamp" >"$cache/rootfs.stamp"
  fi
) 9>"$cache/rootfs.lock"

# This run's overlay. Runs whose script is gone (killed with SIGKILL) are swept first.
for old in "$cache"/runs/*/; do
  [[ -d $old ]] || continue
  owner=$(cat "$old/pid" 2>/dev/null || true)
  [[ -n $owner ]] && kill -0 "$owner" 2>/dev/null && continue
  [[ -z $owner && -n $(find "$old" -maxdepth 0 -mmin -1) ]] && continue  # being made now
  rm -rf "$old"
done
run=$(mktemp -d "$cache/runs/XXXXXX")
echo $$ >"$run/pid"
mkdir "$run/upper" "$run/work" "$run/root"
echo "$repo" >"$run/repo"
echo "$commit" >"$run/commit"
echo "$rootfs" >"$run/rootfs"
# The steps run this copy, so that editing or checking out the script meanwhile changes nothing.
cp "$self" "$run/test-distro.sh"
self=$run/test-distro.sh

ns_pid=
lock_pid=
finish() {
  local rc=$?
  trap - EXIT INT TERM
  set +e  # every line below runs, whatever the one before it returned
  [[ -n $lock_pid ]] && kill "$lock_pid" 2>/dev/null
  if [[ -n $ns_pid ]] && kill -0 "$ns_pid" 2>/dev/null; then
    local init
    init=$(pgrep -P "$ns_pid" || true)
    [[ -n $init ]] && kill -TERM "$init" 2>/dev/null
    for _ in $(seq 150); do
      kill -0 "$ns_pid" 2>/dev/null || break
      sleep 0.1
    done
    [[ -n $init ]] && kill -KILL "$init" 2>/dev/null
    wait "$ns_pid" 2>/dev/null || true
  fi
  rm -rf "$run"
  if ((rc == 0)); then
    say "passed ($steps) on $suite"
  else
    say "FAILED (exit $rc)"
  fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# in_namespaces STEP [unshare options]: one step, in its own mount and PID namespaces.
in_namespaces() {
  local step=$1
  shift
  unshare --mount --pid --fork --kill-child "$@" -- "$self" --inside "$step" "$run" "$suite" &
  ns_pid=$!
  local rc=0
  wait "$ns_pid" || rc=$?
  ns_pid=
  return "$rc"
}

for step in $steps; do
  case $step in
    setup)
      say "fresh clone of ${commit:0:12} and make setup, on $suite"
      in_namespaces setup
      ;;
    unit)
      say "doctor, unit tests and an encode (ffmpeg of $suite), in a network namespace of its own"
      in_namespaces unit --net
      ;;
    heavy)
      say "netem check $profile and a ${play_s} s dash.js session, under $heavy_lock"
      exec 8>"$heavy_lock"
      waited=$SECONDS
      # In the background, so that Ctrl-C or SIGTERM is handled while waiting for the lock.
      flock 8 &
      lock_pid=$!
      wait "$lock_pid"
      lock_pid=
      say "heavy lock taken after $((SECONDS - waited)) s"
      in_namespaces heavy --net
      flock -u 8
      exec 8>&-
      ;;
    *) die "MPSTREAM_DISTRO_STEPS: unknown step $step (setup, unit, heavy)" ;;
  esac
done
