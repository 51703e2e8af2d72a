#!/usr/bin/env bash
# GPU benchmark, run ON the GPU machine after bench/gpu-stage.sh's parts are unpacked there.
# Needs only bash and the staged files: no Python, no network.
#   bench/gpu.sh STAGE_DIR [OUT_DIR]
# STAGE_DIR holds `pipeline` and `test.parquet` (IMDB test); ORT_DYLIB_PATH names ONNX
# Runtime's CUDA build (onnxruntime-gpu 1.31.1). DEVICE=cpu runs the same steps on the CPU,
# to check the script on a machine without a GPU. ROWS_REPEAT (default 40) sets the corpus
# size: IMDB test repeated, 1,000,000 rows by default, so that start-up does not dominate.
#
# Prints, and writes to OUT_DIR/gpu-bench.txt:
#   1. agreement with the CPU on IMDB test: largest |Δprobabilities| and flipped predictions,
#      TF32 off (the default) and on (--tf32);
#   2. end-to-end docs/s on the large corpus, attention columns written, beside the session-only
#      docs/s of the same run (the rows over the time spent inside ONNX Runtime's runs on the
#      same batches), and each stage's busy share;
#   3. the same for each batch size in BATCH_SIZES (default "1024"; each adds a full run).
set -euo pipefail
stage=$(realpath "$1")
out=$(realpath -m "${2:-${OUT:-/tmp/gpu-bench}}")
device=${DEVICE:-cuda}
repeat=${ROWS_REPEAT:-40}
batch_sizes=${BATCH_SIZES:-1024}
pipeline="$stage/pipeline"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
report="$out/gpu-bench.txt"
: > "$report"
say() { echo "$*" | tee -a "$report"; }

[ -x "$pipeline" ] || { echo "no executable pipeline in $stage" >&2; exit 1; }
[ -f "$stage/test.parquet" ] || { echo "no test.parquet in $stage" >&2; exit 1; }
[ -n "${ORT_DYLIB_PATH:-}" ] || { echo "set ORT_DYLIB_PATH to ONNX Runtime's libonnxruntime.so.*" >&2; exit 1; }
gpu_flags=(--backend ort --device "$device")

say "# GPU benchmark, $(date -u +%FT%TZ), device=$device"
command -v nvidia-smi > /dev/null && say "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
say "cores: $(nproc)"

# 1. Agreement with the CPU on IMDB test.
"$pipeline" run --input "$stage/test.parquet" --backend ort --device cpu --pass-through id \
    --output "$work/cpu.parquet" --log-format json 2> "$work/cpu.log"
agreement() {
    "$pipeline" sql --table g="$1" --table c="$work/cpu.parquet" --format csv \
        "SELECT count(*) AS docs,
                max(greatest(abs(g.probabilities[1] - c.probabilities[1]), abs(g.probabilities[2] - c.probabilities[2]))) AS max_abs_diff,
                sum(CASE WHEN g.prediction <> c.prediction THEN 1 ELSE 0 END) AS flipped
         FROM g JOIN c ON g.id = c.id" | tail -n 1
}
tf32_settings=(off); [ "$device" = cuda ] && tf32_settings+=(on)
for tf32 in "${tf32_settings[@]}"; do
    flags=("${gpu_flags[@]}")
    [ "$tf32" = on ] && flags+=(--tf32)
    "$pipeline" run --input "$stage/test.parquet" "${flags[@]}" --batch-size 1024 --window 8192 --pass-through id \
        --output "$work/gpu-$tf32.parquet" --log-format json 2> "$work/gpu-$tf32.log"
    say "agreement with the CPU, TF32 $tf32 (docs,max |Δprob|,flipped): $(agreement "$work/gpu-$tf32.parquet")"
done

# 2. The large corpus, generated here from IMDB test (carrying it would cost transfers). Whole
# copies one after another: copies of a review side by side in a window would compress away
# in the output and flatter the write stage.
"$pipeline" sql --table t="$stage/test.parquet" --output "$work/corpus.parquet" \
    "SELECT t.id || '-' || CAST(r.n AS VARCHAR) AS id, t.text
     FROM t CROSS JOIN (SELECT unnest(range($repeat)) AS n) r ORDER BY r.n" \
    2> /dev/null
say "corpus: IMDB test repeated $repeat times"

# 3. End to end against session-only, per batch size.
for batch in $batch_sizes; do
    window=$(( batch * 8 > 2048 ? batch * 8 : 2048 ))
    "$pipeline" run --input "$work/corpus.parquet" "${gpu_flags[@]}" --batch-size "$batch" --window "$window" \
        --pass-through id --output "$work/out.parquet" --metrics-json "$work/m.json" --log-format json 2> "$work/run.log"
    # The session count: one on CUDA, one per core on the CPU.
    sessions=1; [ "$device" = cpu ] && sessions=$(nproc)
    awk -v batch="$batch" -v window="$window" -v sessions="$sessions" '
        match($0, /"rows": *[0-9]+/) { rows = substr($0, RSTART, RLENGTH); sub(/.*: */, "", rows) }
        match($0, /"docs_per_second": *[0-9.e+-]+/) { dps = substr($0, RSTART, RLENGTH); sub(/.*: */, "", dps) }
        match($0, /"session_seconds": *[0-9.e+-]+/) { ss = substr($0, RSTART, RLENGTH); sub(/.*: */, "", ss) }
        match($0, /"seconds": *[0-9.e+-]+/) && !seen++ { s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s) }
        END {
            only = rows / (ss / sessions)
            printf "batch %d, window %d: %d rows in %.1f s = %.0f docs/s end to end; session-only %.0f docs/s; end to end reaches %.0f%% of it\n",
                batch, window, rows, s, dps, only, 100 * dps / only
        }' "$work/m.json" | tee -a "$report"
    say "  stages busy (s): $(tr -d '\n ' < "$work/m.json" | sed -n 's/.*"stage_seconds":{\([^}]*\)}.*/\1/p')"
    say "  output: $(du -h "$work/out.parquet" | cut -f1)"
    rm -f "$work/out.parquet"
done
