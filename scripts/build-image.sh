#!/usr/bin/env bash
# Builds the repository's Dockerfile into the `pipeline` image without a Docker daemon, as CI
# does, with what scripts/install-container-tools.sh installs from Debian's packages:
#
#   scripts/build-image.sh [TAG]       # default registry.example.com/attention-classifier/pipeline:0.1.0
#
# 1. The base: Debian bookworm, minimal, without manuals, docs and locales (as debian:slim),
#    made by mmdebstrap from the Debian mirror ($DEBIAN_MIRROR, default deb.debian.org) and
#    imported as localhost/attention-classifier/debian:bookworm-slim, once.
# 2. The binary: $PIPELINE_BINARY, or the one `cargo build --release --bin pipeline` builds
#    (the README's first command's build, which the tests share), stripped, with the ONNX
#    Runtime library scripts/install-onnxruntime.sh installs, into target/image-context/.
# 3. The Dockerfile's `prebuilt` path (BINARY_SOURCE=prebuilt): the same final stage as the
#    compiled path, without a second 40-minute compile inside the build.
#
# With a Docker daemon, `docker build -t TAG .` compiles inside the image instead. The last
# line printed is the tag.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
tag="${1:-registry.example.com/attention-classifier/pipeline:0.1.0}"
base="localhost/attention-classifier/debian:bookworm-slim"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
export CONTAINERS_CONF="$repo/scripts/container/containers.conf"
# The README's build (target/) unless told otherwise: a second target directory is a second cold build.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

die() {
    echo "build-image: error: $*" >&2
    exit 1
}

bash scripts/install-container-tools.sh

if ! podman image exists "$base"; then
    echo "build-image: making the base $base from $mirror" >&2
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    mmdebstrap --variant=minbase \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        bookworm "$tmp/base.tar" "$mirror" >&2 || die "mmdebstrap could not make the base from $mirror"
    podman import "$tmp/base.tar" "$base" >&2
    rm -rf "$tmp"
    trap - EXIT
fi

binary="${PIPELINE_BINARY:-}"
if [[ -z "$binary" ]]; then
    echo "build-image: building the pipeline binary" >&2
    cargo build --release --bin pipeline >&2
    binary="$CARGO_TARGET_DIR/release/pipeline"
fi
[[ -f "$binary" && -x "$binary" ]] || die "$binary is not an executable file; set PIPELINE_BINARY to the pipeline binary"
library="$(bash scripts/install-onnxruntime.sh)"
mkdir -p target

# The context is made beside the old one and swapped in whole, so a bad binary leaves the last
# good context as it was.
context="target/image-context"
staging="$(mktemp -d target/.image-context.XXXXXX)"
trap 'rm -rf "$staging"' EXIT
chmod 755 "$staging"
mkdir -p "$staging/onnxruntime"
strip -o "$staging/pipeline" "$binary" 2>/dev/null \
    || die "$binary is not a program strip can read; set PIPELINE_BINARY to the pipeline binary"
"$staging/pipeline" --version >/dev/null 2>&1 \
    || die "$binary does not run here; set PIPELINE_BINARY to the pipeline binary"
cp "$(dirname "$library")"/libonnxruntime*.so* "$staging/onnxruntime/"
rm -rf "$context"
mv "$staging" "$context"

echo "build-image: building $tag" >&2
buildah bud --isolation=chroot --network=host --layers \
    --ulimit nofile=20000:20000 --ulimit nproc=32768:32768 \
    --build-arg RUNTIME_IMAGE="$base" --build-arg BINARY_SOURCE=prebuilt \
    --tag "$tag" --file Dockerfile . >&2
echo "$tag"
