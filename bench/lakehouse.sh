#!/usr/bin/env bash
# What a Delta table, metrics and lineage cost a run (see bench/lakehouse.py).
#   bench/lakehouse.sh [DATA.parquet]      (default: IMDB test)
set -euo pipefail
cd "$(dirname "$0")/.."
data=$(realpath "${1:-../shared/datasets/imdb/test.parquet}")
work=target/bench/lakehouse
mkdir -p "$work"
# The test build's binary (one build: see ARCHITECTURE.md).
cargo test --release --workspace --no-run
moto_python=$(bash scripts/install-s3-test-server.sh | tail -n 1)
python3 bench/lakehouse.py "${CARGO_TARGET_DIR:-target}/release/pipeline" "$data" "$work" "$moto_python"
