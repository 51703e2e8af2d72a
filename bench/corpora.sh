#!/usr/bin/env bash
# Each variant's defaults against TF-IDF + logistic regression and fastText, on IMDB and on the
# public corpora of bench/corpora/ (R8: small, 8 classes, 69:1; Reuters-21578 ModApte, 90
# topics, multi-label, from bench/corpora/reuters.py): accuracy (exact label sets), macro-F1
# (and micro-F1), ECE, the number of test classes never predicted, and training time here.
#   bench/corpora.sh [VARIANTS] [CORPUS_DIR...]
# VARIANTS: comma-separated (default ngram,san; `ensemble` adds `pipeline combine` of the others,
# on corpora of one label a document; `NAME=VARIANT:FLAGS` trains a variant with flags, e.g.
# `san-gated=san:--pooled-values gated-words`). A corpus directory holds train.parquet and
# test.parquet (text, label: a list of labels for a multi-label corpus). Default: every corpus
# bench/corpora/prepare.py or reuters.py wrote under
# target/corpora/, then IMDB.
set -euo pipefail
cd "$(dirname "$0")/.."
variants=${1:-ngram,san}
shift || true
work=target/bench/corpora
mkdir -p "$work"

cargo build --release --workspace
export PIPELINE_BIN="${CARGO_TARGET_DIR:-target}/release/pipeline"
venv=target/bench/venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q pyarrow numpy fasttext-numpy2-wheel==0.9.2 scikit-learn==1.9.1
corpora=("$@")
if [ ${#corpora[@]} -eq 0 ]; then
    for dir in target/corpora/*/; do
        [ -f "$dir/train.parquet" ] && [ -f "$dir/test.parquet" ] && corpora+=("${dir%/}")
    done
    corpora+=(../shared/datasets/imdb)
fi
"$venv/bin/python" bench/corpora.py "$work" "$variants" "${corpora[@]}"
