#!/usr/bin/env bash
# Scale-out figures: 4 shard processes against one, and reading from loopback S3 against a
# local file (see bench/scale_out.py).
#   bench/scale_out.sh [DATA.parquet]      (default: IMDB test)
set -euo pipefail
cd "$(dirname "$0")/.."
data=$(realpath "${1:-../shared/datasets/imdb/test.parquet}")
work=target/bench/scale-out
mkdir -p "$work"
# The same build as the tests (`cargo test` resolves dev-dependency features too): a
# `--bins`-only build would resolve features differently and rebuild the workspace.
cargo test --release --workspace --no-run
moto_python=$(bash scripts/install-s3-test-server.sh | tail -n 1)
python3 bench/scale_out.py "${CARGO_TARGET_DIR:-target}/release/pipeline" "$data" "$work" "$moto_python"
