#!/usr/bin/env bash
# The fast tier against fastText and TF-IDF + logistic regression on IMDB (train, then
# classify test, each on one core): accuracy, docs/s per core, peak RSS.
#   bench/fast_tier.sh [TRAIN.parquet] [TEST.parquet]     (ROUNDS=3 turns each by default)
# BASELINE=PATH adds the `pipeline` binary of an earlier build, on the same ngram package.
# The ngram package is trained here with `pipeline train --variant ngram` and no tuning flags.
set -euo pipefail
cd "$(dirname "$0")/.."
train=${1:-../shared/datasets/imdb/train.parquet}
test=${2:-../shared/datasets/imdb/test.parquet}
work=target/bench/fast-tier
mkdir -p "$work"

cargo build --release --workspace
export PIPELINE_BIN="${CARGO_TARGET_DIR:-target}/release/pipeline"
ort_lib=$(bash scripts/install-onnxruntime.sh | tail -n 1)
venv=target/bench/venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q pyarrow numpy tokenizers onnxruntime==1.32.0 fasttext-numpy2-wheel==0.9.2 scikit-learn==1.9.1
"$PIPELINE_BIN" train --variant ngram --train "$train" --out "$work/ngram" --force
"$venv/bin/python" bench/fast_tier.py "$train" "$test" "$work" "$work/ngram" fixtures/default-model "$ort_lib"
