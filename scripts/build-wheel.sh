#!/usr/bin/env bash
# Builds the Python wheel (`pip install` gives the `pipeline` command and the
# `attention_classifier` module) into target/wheels/, with maturin from PyPI.
#
#   scripts/build-wheel.sh
#
# The `pipeline` binary is the one the tests run: built by the README's test command's build
# (`cargo test --release --workspace --no-run`, the only profile and feature set we build), then
# stripped into the wheel's scripts. The module is built by maturin into the same target
# directory. The last line printed is the wheel's absolute path.
set -euo pipefail

MATURIN="maturin==1.16.0"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# The README's build (target/) unless told otherwise: a second target directory is a second cold build.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
tools="$repo/target/maturin"

if ! "$tools/bin/maturin" --version 2>/dev/null | grep -q "${MATURIN#maturin==}"; then
    echo "build-wheel: installing $MATURIN into $tools" >&2
    rm -rf "$tools"
    "${PYTHON:-python3}" -m venv "$tools" >&2
    "$tools/bin/python" -m pip install --quiet "$MATURIN" >&2 \
        || { echo "build-wheel: error: pip could not install $MATURIN (no network?)" >&2; exit 1; }
fi

echo "build-wheel: building the pipeline binary" >&2
cargo test --release --workspace --no-run >&2
scripts="python/wheel-data/scripts"
rm -rf python/wheel-data
mkdir -p "$scripts"
strip -o "$scripts/pipeline" "$CARGO_TARGET_DIR/release/pipeline"

echo "build-wheel: building the wheel" >&2
rm -rf target/wheels
"$tools/bin/maturin" build --release --manifest-path python/Cargo.toml --out target/wheels >&2
wheel="$(ls target/wheels/attention_classifier-*.whl)"
echo "$repo/$wheel"
