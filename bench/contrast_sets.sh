#!/usr/bin/env bash
# Accuracy on the IMDb contrast sets (Gardner et al. 2020) and on the reviews they were edited
# from, for the default model and any other packages (#51's robustness target):
#   bench/contrast_sets.sh SOURCE [MODEL_DIR ...]
# SOURCE is a checkout of https://github.com/allenai/contrast-sets at e2b8731 (only
# IMDb/data/*.tsv is read). Choose on the dev split; report the test split.
set -euo pipefail
cd "$(dirname "$0")/.."
source=${1:?usage: bench/contrast_sets.sh CONTRAST_SETS_CHECKOUT [MODEL_DIR ...]}
shift
models=("${@:-fixtures/default-model}")
work=target/bench/contrast_sets
mkdir -p "$work"

cargo build --release --workspace
pipeline="${CARGO_TARGET_DIR:-target}/release/pipeline"
venv=target/bench/venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q pyarrow
"$venv/bin/python" bench/contrast_sets.py convert "$source" "$work/data"
names=()
for model in "${models[@]}"; do
    name=$(basename "$model")
    names+=("$name")
    for file in dev_original dev_contrast test_original test_contrast; do
        "$pipeline" eval --model "$model" --data "$work/data/$file.parquet" --backend tract \
            --metrics-json "$work/$name.$file.json" > /dev/null
    done
done
"$venv/bin/python" bench/contrast_sets.py table "$work" "${names[@]}"
