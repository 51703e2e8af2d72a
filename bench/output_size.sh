#!/usr/bin/env bash
# Size and speed of each --attention choice of `pipeline run`, of the default with
# `--drop tokens`, and of the default as a Delta table, on IMDB test (25,000 reviews, all
# input columns passed through), in one session: the choices take turns, ROUNDS times, so the
# machine's noise falls on each alike. Prints each output's size against the input's, its
# bytes per column, and its best time against `full` (what every run wrote before `compact`).
# BASELINE=PATH adds the `pipeline` binary of an earlier build, run with its own defaults, to
# the turns.
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

choices=(full hops compact summary top-k:16 none)
# The default (compact) with output columns left out: `drop:COLUMNS` runs `--drop COLUMNS`.
drops=(drop:tokens)
runs=("${choices[@]}" "${drops[@]}" delta)
if [[ -n "${BASELINE:-}" ]]; then
    runs+=(baseline)
fi
declare -A seconds
for round in $(seq "$rounds"); do
    for run in "${runs[@]}"; do
        name=${run//[:,]/_}
        out="$work/$name.parquet"
        # A Delta table is a directory.
        [[ $run == delta ]] && out="$work/$name"
        rm -rf "$out"
        if [[ $run == delta ]]; then
            command=("$bin" run --output-format delta)
        elif [[ $run == baseline ]]; then
            command=("$BASELINE" run)
        elif [[ $run == drop:* ]]; then
            command=("$bin" run --drop "${run#drop:}")
        else
            command=("$bin" run --attention "$run")
        fi
        "${command[@]}" --model "$model" --input "$data" --output "$out" --threads "$threads" \
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
    out="$work/$name.parquet"
    [[ $run == delta ]] && out="$work/$name"
    bytes=$(du -sb "$out" | cut -f1)
    # Speed as time relative to full: below 1 is faster.
    printf '%-24s %10.1f %8.2fx %9.1f %12.2fx\n' "$run" "$(python3 -c "print($bytes / 1e6)")" \
        "$(python3 -c "print($bytes / $input_bytes)")" "$best" "$(python3 -c "print($best / $base)")"
done

# Bytes per column of each output (of every file of a Delta table), from the Parquet footers.
py=target/lakehouse-checks/bin/python
[[ -x $py ]] || bash scripts/install-lakehouse-checks.sh > /dev/null
printf '\nMB per column (columns under 0.05 MB left out):\n'
"$py" - "$work" "${runs[@]}" <<'PY'
import collections, pathlib, sys
import pyarrow.parquet as pq
work, runs = pathlib.Path(sys.argv[1]), sys.argv[2:]
for run in runs:
    name = run.replace(":", "_").replace(",", "_")
    path = work / (name if run == "delta" else name + ".parquet")
    files = [path] if path.is_file() else sorted(path.rglob("*.parquet"))
    sizes = collections.Counter()
    for file in files:
        metadata = pq.ParquetFile(file).metadata
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for column in range(row_group.num_columns):
                chunk = row_group.column(column)
                sizes[chunk.path_in_schema.split(".")[0]] += chunk.total_compressed_size
    shown = ", ".join(f"{name} {size / 1e6:.2f}" for name, size in sizes.most_common() if size >= 50_000)
    print(f"{run:24s} {shown}")
PY
