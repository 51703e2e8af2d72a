#!/usr/bin/env bash
# Peak RSS of `pipeline run` on IMDB test and on it repeated 40 times (1,000,000 rows), for the
# default backend and the null model (see bench/memory.py). About 10 minutes on 2 cores.
#   bench/memory.sh [DATA.parquet]      (BENCH_MEMORY_REPEATS=1,40 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/datasets/imdb/test.parquet}
work=target/bench/memory
mkdir -p "$work"
# The same build as the tests (`cargo test` resolves dev-dependency features too).
cargo test --release --workspace --no-run
ort_lib=$(bash scripts/install-onnxruntime.sh | tail -n 1)
if [ ! -x target/bench/venv/bin/python ]; then
    python3 -m venv target/bench/venv
    target/bench/venv/bin/pip install -q pyarrow numpy tokenizers onnxruntime==1.32.0
fi
target/bench/venv/bin/python bench/memory.py "${CARGO_TARGET_DIR:-target}/release/pipeline" "$data" "$work" "$ort_lib"
