#!/usr/bin/env bash
# Installs the ONNX Runtime 1.32.0 CPU shared library (no Python packages) for the `ort` backend.
#
#   scripts/install-onnxruntime.sh [DEST_DIR]
#
# DEST_DIR defaults to onnxruntime/ in the target directory the binaries are built into
# ($CARGO_TARGET_DIR, else target/ under the repository root), where a `pipeline` built there
# looks for it without being told. The wheel is fetched with
# `pip download --no-deps` and only the shared libraries are extracted from it. Safe to run again:
# an existing install is reused. The last line printed is the absolute path of the library,
# suitable for ORT_DYLIB_PATH.
set -euo pipefail

ORT_VERSION="1.32.0"
LIB_NAME="libonnxruntime.so.${ORT_VERSION}"
PROVIDERS_NAME="libonnxruntime_providers_shared.so"

die() {
    echo "install-onnxruntime: error: $*" >&2
    exit 1
}

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(dirname "$script_dir")"
dest="${1:-${CARGO_TARGET_DIR:-$repo_root/target}/onnxruntime}"

if [[ -f "$dest/$LIB_NAME" ]]; then
    echo "$(cd "$dest" && pwd)/$LIB_NAME"
    exit 0
fi

case "$(uname -s)" in
    Linux) ;;
    *) die "this script installs the Linux library only; on $(uname -s) install onnxruntime==$ORT_VERSION with pip and set ORT_DYLIB_PATH to its onnxruntime/capi library" ;;
esac

python="${PYTHON:-python3}"
command -v "$python" >/dev/null 2>&1 \
    || die "$python not found; install Python 3 with pip (or set PYTHON=/path/to/python3), or download the ONNX Runtime $ORT_VERSION release yourself and set ORT_DYLIB_PATH"
"$python" -m pip --version >/dev/null 2>&1 \
    || die "pip is not available for $python; install it (e.g. \`$python -m ensurepip --upgrade\` or your distribution's python3-pip package)"

mkdir -p "$dest" || die "cannot create $dest"
dest="$(cd "$dest" && pwd)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/install-onnxruntime.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "install-onnxruntime: downloading onnxruntime==$ORT_VERSION wheel" >&2
"$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "onnxruntime==$ORT_VERSION" >&2 \
    || die "pip could not download onnxruntime==$ORT_VERSION (no network, or no wheel for this Python/platform?)"

shopt -s nullglob
wheels=("$tmp"/onnxruntime-"$ORT_VERSION"-*.whl)
shopt -u nullglob
[[ ${#wheels[@]} -eq 1 ]] || die "expected one onnxruntime-$ORT_VERSION wheel in $tmp, found ${#wheels[@]}"
wheel="${wheels[0]}"
echo "install-onnxruntime: using $(basename "$wheel")" >&2

members=("onnxruntime/capi/$LIB_NAME" "onnxruntime/capi/$PROVIDERS_NAME")
extract="$tmp/extract"
mkdir -p "$extract"
if command -v unzip >/dev/null 2>&1; then
    unzip -q -o "$wheel" "${members[@]}" -d "$extract" || die "could not extract ${members[*]} from $wheel"
else
    "$python" - "$wheel" "$extract" "${members[@]}" <<'PY' || die "could not extract the libraries from $wheel"
import sys, zipfile
wheel, dest, *members = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive:
    for member in members:
        archive.extract(member, dest)
PY
fi

# Copy next to each other (ONNX Runtime loads the providers library from its own directory),
# the main library last and via a rename so an interrupted run never leaves a partial file behind.
install -m 0755 "$extract/onnxruntime/capi/$PROVIDERS_NAME" "$dest/$PROVIDERS_NAME"
install -m 0755 "$extract/onnxruntime/capi/$LIB_NAME" "$dest/.$LIB_NAME.partial.$$"
mv -f "$dest/.$LIB_NAME.partial.$$" "$dest/$LIB_NAME"

echo "$dest/$LIB_NAME"
