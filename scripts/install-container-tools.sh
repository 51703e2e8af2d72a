#!/usr/bin/env bash
# Installs what builds and runs the image without a Docker daemon, from Debian's packages:
# buildah (builds the Dockerfile), podman (runs the image), runc (the container runtime
# podman uses here) and mmdebstrap (makes the Debian base image from the Debian mirror, so no
# registry is needed). Safe to run again: installed tools are kept. Used by .ci/run, by
# scripts/build-image.sh and by hand:
#
#   scripts/install-container-tools.sh
#
# Needs root (or sudo) and Debian's package mirrors.
set -euo pipefail

die() {
    echo "install-container-tools: error: $*" >&2
    exit 1
}

missing=()
for tool in buildah podman runc mmdebstrap; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

command -v apt-get >/dev/null 2>&1 \
    || die "no apt-get: install ${missing[*]} by hand (Debian/Ubuntu packages of the same names)"
sudo=""
if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "installing ${missing[*]} needs root; run as root or install sudo"
    sudo="sudo"
fi
echo "install-container-tools: installing Debian's ${missing[*]}" >&2
$sudo apt-get update -qq >&2 || die "apt-get update failed (no network, or no Debian mirror?)"
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    buildah podman runc mmdebstrap uidmap >&2 \
    || die "apt-get could not install buildah podman runc mmdebstrap"
