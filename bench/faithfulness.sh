#!/usr/bin/env bash
# ERASER faithfulness and VADER plausibility of the explanations on IMDB test (#36), for the
# default model and, when given, other packages (the fast tier's, say):
#   bench/faithfulness.sh [ROWS] [MODEL_DIR ...]      (default: 2000 rows, fixtures/default-model)
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-2000}
shift || true
models=("${@:-fixtures/default-model}")
work=target/bench/faithfulness
mkdir -p "$work"

cargo build --release --workspace
pipeline="${CARGO_TARGET_DIR:-target}/release/pipeline"
ORT_DYLIB_PATH=$(realpath "$(bash scripts/install-onnxruntime.sh | tail -n 1)")
export ORT_DYLIB_PATH
venv=target/bench/venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q pyarrow vaderSentiment==3.3.2
for model in "${models[@]}"; do
    "$venv/bin/python" bench/faithfulness.py "$pipeline" "$model" ../shared/datasets/imdb/test.parquet "$work" "$rows"
    echo
done
