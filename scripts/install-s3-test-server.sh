#!/usr/bin/env bash
# Installs moto's S3-compatible server (a real S3 API on loopback, for the object-storage
# tests) into its own virtual environment. Safe to run again: an existing install is reused.
#
#   scripts/install-s3-test-server.sh [DEST_DIR]
#
# DEST_DIR defaults to target/moto under the repository root. The last line printed is the
# absolute path of the environment's python; start the server with
# `PYTHON -m moto.server -H 127.0.0.1 -p PORT`.
set -euo pipefail

MOTO_VERSION="5.2.5"

die() {
    echo "install-s3-test-server: error: $*" >&2
    exit 1
}

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(dirname "$script_dir")"
dest="${1:-$repo_root/target/moto}"

if [[ -x "$dest/bin/python" ]] && "$dest/bin/python" -c 'import moto.server' 2>/dev/null; then
    echo "$(cd "$dest" && pwd)/bin/python"
    exit 0
fi

python="${PYTHON:-python3}"
command -v "$python" >/dev/null 2>&1 || die "$python not found; install Python 3 (or set PYTHON=/path/to/python3)"

mkdir -p "$(dirname "$dest")" || die "cannot create $(dirname "$dest")"
# Built beside the destination and renamed into place, so an interrupted install is never
# reused. (After the move, run it as `bin/python -m moto.server`: the entry-point scripts
# would still name the staging path.)
staging="$(mktemp -d "$(dirname "$dest")/.moto.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
echo "install-s3-test-server: installing moto[server]==$MOTO_VERSION" >&2
"$python" -m venv "$staging" >&2 || die "cannot create a virtual environment (is python3-venv installed?)"
"$staging/bin/python" -m pip install --quiet "moto[server]==$MOTO_VERSION" >&2 \
    || die "pip could not install moto[server]==$MOTO_VERSION (no network?)"
mv -T "$staging" "$dest" 2>/dev/null || [[ -x "$dest/bin/python" ]] || die "cannot move the install into $dest"
echo "$(cd "$dest" && pwd)/bin/python"
