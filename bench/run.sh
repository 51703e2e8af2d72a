#!/usr/bin/env bash
# Throughput and memory of `pipeline run` (tract, ONNX Runtime) next to the Python stack a
# user would otherwise write, on IMDB test (25,000 reviews) and on that file repeated 10 times.
#   bench/run.sh [MODEL_DIR] [DATA.parquet]      (BENCH_REPEATS=1,10 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-fixtures/default-model}
data=${2:-../shared/datasets/imdb/test.parquet}
work=target/bench
mkdir -p "$work"

# The README's build, which the tests share (workspace-hack: ARCHITECTURE.md, "One build").
# The binary is where CARGO_TARGET_DIR puts it.
cargo build --release --workspace
export PIPELINE_BIN="${CARGO_TARGET_DIR:-target}/release/pipeline"
ort_lib=$(bash scripts/install-onnxruntime.sh | tail -n 1)
# The venv is shared with other benches (corpora.sh, contrast_sets.sh), which install other
# packages into it: install this bench's every time (a no-op when present).
[ -x "$work/venv/bin/python" ] || python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q pyarrow numpy tokenizers onnxruntime==1.32.0
"$work/venv/bin/python" bench/run.py "$model" "$data" "$work" "$ort_lib"
