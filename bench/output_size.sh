#!/usr/bin/env bash
# Size and speed of each --attention choice of `pipeline run`, and of the default with
# `--drop attention` and `--drop attention,tokens`, on IMDB test (25,000 reviews,
# all input columns passed through), in one session: the choices take turns, ROUNDS times,
# so the machine's noise falls on each alike. Prints each output's size against the input's
# and its best docs/s against `full` (what every run wrote before `compact`). BASELINE=PATH
# adds the `pipeline` binary of an earlier build, run with its own defaults, to the turns.
#   bench/output_size.sh [MODEL_DIR] [DATA.parquet]     (ROUNDS=2, THREADS=2 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-fixtures/default-model}
data=${2:-../shared/datasets/imdb/test.parquet}
rounds=${ROUNDS:-2}
threads=${THREADS:-2}
work=target/bench/output-size
mkdir -p "$work"
# The same build as the tests (see bench/run.sh).
cargo test --release --workspace --no-run
bin="${CARGO_TARGET_DIR:-target}/release/pipeline"

choices=(full compact summary top-k:16 none)
# The default (compact) with output columns left out: `drop:COLUMNS` runs `--drop COLUMNS`.
drops=(drop:attention drop:attention,tokens)
runs=("${choices[@]}" "${drops[@]}")
if [[ -n "${BASELINE:-}" ]]; then
    runs+=(baseline)
fi
declare -A seconds
for round in $(seq "$rounds"); do
    for run in "${runs[@]}"; do
        name=${run//[:,]/_}
        rm -f "$work/$name.parquet"
        if [[ $run == baseline ]]; then
            command=("$BASELINE" run)
        elif [[ $run == drop:* ]]; then
            command=("$bin" run --drop "${run#drop:}")
        else
            command=("$bin" run --attention "$run")
        fi
        "${command[@]}" --model "$model" --input "$data" --output "$work/$name.parquet" --threads "$threads" \
            --metrics-json "$work/$name.json" > /dev/null 2>&1
        took=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$work/$name.json")
        seconds[$name]="${seconds[$name]:-} $took"
        echo "round $round: $run ${took} s" >&2
    done
done

input_bytes=$(stat -c %s "$data")
printf 'input: %s, %.1f MB\n' "$data" "$(python3 -c "print($input_bytes / 1e6)")"
printf '%-24s %10s %9s %9s %13s\n' attention MB "x input" "best s" "time vs full"
base=""
for run in "${runs[@]}"; do
    name=${run//[:,]/_}
    best=$(printf '%s\n' ${seconds[$name]} | sort -g | head -n 1)
    base=${base:-$best}
    bytes=$(stat -c %s "$work/$name.parquet")
    # Speed as time relative to full: below 1 is faster.
    printf '%-24s %10.1f %8.2fx %9.1f %12.2fx\n' "$run" "$(python3 -c "print($bytes / 1e6)")" \
        "$(python3 -c "print($bytes / $input_bytes)")" "$best" "$(python3 -c "print($best / $base)")"
done
