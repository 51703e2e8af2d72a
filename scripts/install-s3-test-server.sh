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

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-$(dirname "$script_dir")/target/moto}"
# shellcheck source=scripts/venv.sh
source "$script_dir/venv.sh"
install_venv install-s3-test-server "$dest" "moto.server" "moto[server]==$MOTO_VERSION"
