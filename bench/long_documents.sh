#!/usr/bin/env bash
# Accuracy and speed of each --long-documents mode of `pipeline run` on IMDB test (25,000
# reviews; 4,441 are longer than the default model's 400 tokens), in one session: the modes
# take turns, ROUNDS times, so the machine's noise falls on each alike. Prints accuracy on all
# reviews and on the long ones, and docs/s relative to truncate.
#   bench/long_documents.sh [MODEL_DIR] [DATA.parquet]     (ROUNDS=2 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-fixtures/default-model}
data=${2:-../shared/datasets/imdb/test.parquet}
rounds=${ROUNDS:-2}
work=target/bench/long-documents
mkdir -p "$work"
# The same build as the tests (see bench/run.sh).
cargo test --release --workspace --no-run
bin="${CARGO_TARGET_DIR:-target}/release/pipeline"

modes=("truncate" "head-tail" "windows" "windows --long-document-aggregate max")
declare -A seconds
for round in $(seq "$rounds"); do
    for mode in "${modes[@]}"; do
        name=${mode// /_}
        # shellcheck disable=SC2086
        "$bin" run --model "$model" --input "$data" --output "$work/$name.parquet" --pass-through label \
            --long-documents $mode --metrics-json "$work/$name.json" > /dev/null 2>&1
        took=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$work/$name.json")
        seconds[$name]="${seconds[$name]:-} $took"
        echo "round $round: $mode ${took} s" >&2
    done
done

printf '%-40s %9s %14s %12s %10s\n' mode accuracy "long accuracy" "best s" "vs truncate"
base=""
for mode in "${modes[@]}"; do
    name=${mode// /_}
    best=$(printf '%s\n' ${seconds[$name]} | sort -g | head -n 1)
    base=${base:-$best}
    read -r accuracy long_accuracy < <("$bin" sql --format csv "SELECT
        avg(CASE WHEN prediction = label THEN 1.0 ELSE 0.0 END),
        avg(CASE WHEN cardinality(tokens) > 400 OR truncated THEN CASE WHEN prediction = label THEN 1.0 ELSE 0.0 END END)
        FROM '$work/$name.parquet'" | tail -n 1 | tr ',' ' ')
    printf '%-40s %9.4f %14.4f %12.1f %9.2fx\n' "$mode" "$accuracy" "$long_accuracy" "$best" \
        "$(python3 -c "print($best / $base)")"
done
