#!/usr/bin/env bash
# Installs cargo-hakari, which keeps workspace-hack/ (one feature set per dependency for the
# whole workspace) up to date, from crates.io into a tools directory outside the clone.
# Safe to run again: the pinned version, once installed, is kept. Used by .ci/run and by hand:
#
#   PATH="$(scripts/install-cargo-hakari.sh):$PATH"
#   cargo hakari generate && cargo hakari manage-deps    # after adding or changing a dependency
#
# The last line printed is the directory that holds the `cargo-hakari` binary.
set -euo pipefail

HAKARI_VERSION="0.9.39"
root="${HAKARI_ROOT:-$HOME/.cache/attention-classifier/tools}"

if ! "$root/bin/cargo-hakari" hakari --version 2>/dev/null | grep -q "$HAKARI_VERSION"; then
    echo "install-cargo-hakari: installing cargo-hakari $HAKARI_VERSION into $root" >&2
    cargo install --quiet --locked --version "$HAKARI_VERSION" --root "$root" cargo-hakari >&2 \
        || { echo "install-cargo-hakari: error: cargo could not install cargo-hakari (no network?)" >&2; exit 1; }
fi
echo "$root/bin"
