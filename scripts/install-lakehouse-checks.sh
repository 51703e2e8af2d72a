#!/usr/bin/env bash
# Installs the readers and validators no one here wrote, for the tests of Delta output,
# partitioned datasets, metrics and lineage, into their own virtual environment: deltalake
# (delta-rs's Python reader) with pyarrow, DuckDB and Polars, and jsonschema with the format checkers that
# scripts/validate-openlineage.py needs. Safe to run again.
#
#   scripts/install-lakehouse-checks.sh [DEST_DIR]      (default: target/lakehouse-checks)
#
# The last line printed is the absolute path of the environment's python.
set -euo pipefail

PACKAGES=(
    "deltalake==1.6.6" "pyarrow==22.0.0" "duckdb==2.0.1" "polars==2.1.0"
    "jsonschema==4.26.0" "referencing==0.37.0" "rfc3339-validator==0.1.4" "rfc3986-validator==0.1.1"
)

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-$(dirname "$script_dir")/target/lakehouse-checks}"
# shellcheck source=scripts/venv.sh
source "$script_dir/venv.sh"
install_venv install-lakehouse-checks "$dest" "deltalake, pyarrow, duckdb, polars, jsonschema, referencing, rfc3339_validator, rfc3986_validator" "${PACKAGES[@]}"
