#!/usr/bin/env bash
# Inference speed of trained packages: `pipeline run` over IMDB test (25,000 reviews) with 2
# threads, one package after the other, so the figures of one run compare. Pass the names of
# package directories under models/, e.g.: bench/variants.sh san han-w2v lama-ctx-w2v
set -euo pipefail
cd "$(dirname "$0")/.."
# The same build as the tests (`cargo test` resolves dev-dependency features too): a
# `--bins`-only build would resolve features differently and rebuild the workspace.
cargo test --release --workspace --no-run --quiet
pipeline="${CARGO_TARGET_DIR:-target}/release/pipeline"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for name in "$@"; do
  summary=$("$pipeline" run --input ../shared/datasets/imdb/test.parquet \
      --model "models/$name" --output "$scratch/$name.parquet" --threads 2 2>&1 | grep "rows (" | tail -1)
  echo "$name: $summary"
done
