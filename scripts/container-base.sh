#!/usr/bin/env bash
# Builds the Debian base image the project's Dockerfiles start FROM on machines that cannot pull
# from a container registry, in two layers:
#   localhost/mpstream-debootstrap:bookworm  a minimal Debian root made by debootstrap from
#       Debian's own package archive and imported into podman; made once, then kept.
#   IMAGE (default localhost/mpstream-base:bookworm)  that root plus the certificate
#       authorities this host trusts locally (/usr/local/share/ca-certificates), so that pip and
#       npm inside image builds accept what the host accepts (a TLS-inspecting proxy's CA).
#       Rebuilt from podman's cache in a second unless those certificates changed.
#
#   scripts/container-base.sh [IMAGE]
#
# The Dockerfiles take it as a build argument (BASE_IMAGE); with Docker and a registry, their
# default, debian:bookworm-slim, is the same distribution.
set -euo pipefail
image=${1:-localhost/mpstream-base:bookworm}
suite=bookworm
root_image=localhost/mpstream-debootstrap:$suite
here=$(cd "$(dirname "$0")/.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/docker/podman/containers.conf}

local_trust() {
  local context
  context=$(mktemp -d /var/tmp/mps-base-ca-XXXXXX)
  mkdir "$context/ca"
  find /usr/local/share/ca-certificates -maxdepth 1 -name '*.crt' -type f \
    -exec cp {} "$context/ca/" \; 2>/dev/null || true
  # The bundle exists once a Dockerfile installs ca-certificates (whose hook adds these CAs).
  cat >"$context/Containerfile" <<FILE
FROM $root_image
COPY ca/ /usr/local/share/ca-certificates/
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
FILE
  podman build -q --layers -t "$image" "$context" >/dev/null || { rm -rf "$context"; return 1; }
  rm -rf "$context"
}

if podman image exists "$root_image"; then
  local_trust
  exit 0
fi
for tool in debootstrap podman; do
  command -v "$tool" >/dev/null || {
    echo "container-base: $tool is missing: run 'make setup' (it installs podman and debootstrap)" >&2
    exit 1
  }
done
[[ $(id -u) -eq 0 ]] || { echo "container-base: debootstrap needs root" >&2; exit 1; }

root=$(mktemp -d /var/tmp/mps-base-XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "container-base: debootstrap $suite (minbase) into $root"
debootstrap --variant=minbase "$suite" "$root" >"$root.log" 2>&1 || {
  tail -5 "$root.log" >&2; rm -f "$root.log"
  echo "container-base: debootstrap failed (is Debian's package archive reachable?)" >&2
  exit 1
}
rm -f "$root.log"
# The archive debootstrap used, plus its updates and security suites, as the slim image has.
mirror=$(awk '$1 == "deb" {print $2; exit}' "$root/etc/apt/sources.list")
cat >"$root/etc/apt/sources.list" <<LIST
deb $mirror $suite main
deb $mirror $suite-updates main
deb $mirror-security $suite-security main
LIST
# As in Debian's slim images: no caches, and apt keeps no downloaded packages.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
echo 'APT::Keep-Downloaded-Packages "false";' >"$root/etc/apt/apt.conf.d/docker-clean"
tar --numeric-owner -C "$root" -c . | podman import \
  --change 'CMD ["/bin/bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --message "debootstrap --variant=minbase $suite" -q - "$root_image" >/dev/null
local_trust
echo "container-base: $image"
