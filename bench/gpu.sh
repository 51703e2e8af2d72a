#!/usr/bin/env bash
# GPU benchmark, run ON the GPU machine after bench/gpu-stage.sh's parts are unpacked there.
# Needs only bash and the staged files: no Python, no network.
#   bench/gpu.sh STAGE_DIR [OUT_DIR]
# STAGE_DIR holds `pipeline` and `test.parquet` (IMDB test), and optionally `pipeline-base`:
# an earlier build, run beside `pipeline` in the same steps on the same machine (an A/B).
# ORT_DYLIB_PATH names ONNX Runtime's CUDA build (onnxruntime-gpu 1.31.1). DEVICE=cpu runs the
# same steps on the CPU, to check the script on a machine without a GPU.
#   ROWS_REPEAT (default 4): the corpus is IMDB test repeated, 100,000 rows;
#   LARGE_REPEAT (default 40; 0 leaves it out): one more corpus, 1,000,000 rows, run at the
#     first batch size, so that start-up's share of the smaller one shows;
#   BATCH_SIZES (default "1024"): each adds a run of the corpus per binary;
#   SESSIONS (default "1"): the values of PIPELINE_CUDA_SESSIONS to run `pipeline` with (the
#     base build runs with its own).
#
# Prints, and writes to OUT_DIR/gpu-bench.txt:
#   1. agreement with the CPU on IMDB test: largest |Δprobabilities| and flipped predictions,
#      TF32 off (the default) and on (--tf32);
#   2. for each corpus, batch size and binary, the default command (windows, compact attention
#      and contributions written): docs/s end to end (the run's own clock, and the process's
#      wall clock with start-up) beside the session-only docs/s of the same run (the rows over
#      the time spent inside ONNX Runtime's runs), the GPU's mean utilisation, and each stage's
#      busy seconds.
set -euo pipefail
stage=$(realpath "$1")
out=$(realpath -m "${2:-${OUT:-/tmp/gpu-bench}}")
device=${DEVICE:-cuda}
repeat=${ROWS_REPEAT:-4}
large_repeat=${LARGE_REPEAT:-40}
read -r -a batch_sizes <<< "${BATCH_SIZES:-1024}"
read -r -a sessions_list <<< "${SESSIONS:-1}"
# Each run is BINARY:SESSIONS (0: the binary's own default).
runs=()
[ -x "$stage/pipeline-base" ] && runs+=(pipeline-base:0)
for n in "${sessions_list[@]}"; do runs+=("pipeline:$n"); done
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

say "# GPU benchmark, $(date -u +%FT%TZ), device=$device, runs (binary:CUDA sessions): ${runs[*]}"
command -v nvidia-smi > /dev/null && say "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
say "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo || true)"

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
    PIPELINE_CUDA_SESSIONS=${sessions_list[-1]} \
    "$pipeline" run --input "$stage/test.parquet" "${flags[@]}" --batch-size 1024 --chunk-rows 8192 --pass-through id \
        --output "$work/gpu-$tf32.parquet" --log-format json 2> "$work/gpu-$tf32.log"
    say "agreement with the CPU, TF32 $tf32 (docs,max |Δprob|,flipped): $(agreement "$work/gpu-$tf32.parquet")"
done

# 2. The corpora, generated here from IMDB test (carrying them would cost transfers). Whole
# copies one after another: copies of a review side by side in a window would compress away
# in the output and flatter the write stage.
make_corpus() {
    "$pipeline" sql --table t="$stage/test.parquet" --output "$work/corpus-$1.parquet" \
        "SELECT t.id || '-' || CAST(r.n AS VARCHAR) AS id, t.text
         FROM t CROSS JOIN (SELECT unnest(range($1)) AS n) r ORDER BY r.n" \
        2> /dev/null
}

# One run: BINARY:SESSIONS REPEAT BATCH [FLAGS...].
bench_run() {
    local binary=${1%%:*} sessions=${1##*:} corpus=$2 batch=$3
    shift 3
    local label="$binary, sessions ${sessions/#0/default}, ×$corpus"
    local session_env=()
    [ "$sessions" != 0 ] && session_env=("PIPELINE_CUDA_SESSIONS=$sessions")
    local window=$(( batch * 8 > 2048 ? batch * 8 : 2048 ))
    local sampler=""
    if command -v nvidia-smi > /dev/null && [ "$device" = cuda ]; then
        nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 > "$work/util.txt" 2> /dev/null &
        sampler=$!
    fi
    local began ended
    began=$(date +%s.%N)
    env "${session_env[@]}" "$stage/$binary" run --input "$work/corpus-$corpus.parquet" "${gpu_flags[@]}" "$@" --batch-size "$batch" \
        --chunk-rows "$window" --pass-through id --output "$work/out.parquet" --metrics-json "$work/m.json" \
        --log-format json 2> "$work/run.log" || { cat "$work/run.log" >&2; return 1; }
    ended=$(date +%s.%N)
    local util="n/a"
    if [ -n "$sampler" ]; then
        kill "$sampler" 2> /dev/null || true
        wait "$sampler" 2> /dev/null || true
        util=$(awk '$1 ~ /^[0-9]+$/ { sum += $1; n++ } END { if (n) printf "%.0f%%", sum / n; else print "n/a" }' "$work/util.txt")
    fi
    # Session-only: the rows over the time inside sessions, summed over the sessions that ran
    # at once (one per core on the CPU): with one CUDA session, ONNX Runtime's own pace.
    local divisor=1; [ "$device" = cpu ] && divisor=$(nproc)
    awk -v label="$label" -v batch="$batch" -v divisor="$divisor" -v began="$began" -v ended="$ended" -v util="$util" '
        match($0, /"rows": *[0-9]+/) && !rows { rows = substr($0, RSTART, RLENGTH); sub(/.*: */, "", rows) }
        match($0, /"docs_per_second": *[0-9.e+-]+/) { dps = substr($0, RSTART, RLENGTH); sub(/.*: */, "", dps) }
        match($0, /"session_seconds": *[0-9.e+-]+/) { ss = substr($0, RSTART, RLENGTH); sub(/.*: */, "", ss) }
        match($0, /"seconds": *[0-9.e+-]+/) && !seen++ { s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s) }
        END {
            wall = ended - began
            only = rows / (ss / divisor)
            printf "%s, batch %d: %d rows in %.1f s (%.1f s with start-up) = %.0f docs/s end to end (%.0f with start-up); session-only %.0f docs/s; end to end reaches %.0f%% of it; GPU busy %s\n",
                label, batch, rows, s, wall, dps, rows / wall, only, 100 * dps / only, util
        }' "$work/m.json" | tee -a "$report"
    say "  stages busy (s): $(tr -d '\n ' < "$work/m.json" | sed -n 's/.*"stage_seconds":{\([^}]*\)}.*/\1/p')"
    rm -f "$work/out.parquet"
}

# 3. End to end against session-only: each batch size on the corpus, then the large corpus,
# each binary in turn.
make_corpus "$repeat"
say "corpus: IMDB test repeated $repeat times"
for batch in "${batch_sizes[@]}"; do
    for run in "${runs[@]}"; do
        bench_run "$run" "$repeat" "$batch"
    done
done
if [ "$large_repeat" -gt 0 ]; then
    make_corpus "$large_repeat"
    say "corpus: IMDB test repeated $large_repeat times"
    for run in "${runs[@]}"; do
        bench_run "$run" "$large_repeat" "${batch_sizes[0]}"
    done
fi
