#!/usr/bin/env bash
# Stages the GPU benchmark (bench/gpu.sh) for the GPU machine lent through the `device` tool,
# whose transfers carry at most 64 MiB each, working tree included.
#   bench/gpu-stage.sh [DATA.parquet]        (default: IMDB test)
# Writes into .gpu/ (git-ignored):
#   - ONNX Runtime 1.31.1's CUDA build in 32 MiB parts, and a zstd binary
#     (../shared/gpu/stage-onnxruntime-gpu.sh);
#   - bench-NN: the stripped release `pipeline` and DATA as test.parquet, compressed and
#     split so that each part rides along with one ONNX Runtime part;
# and prints the device calls to make, back to back (a machine stays warm ~30 s between calls).
set -euo pipefail
cd "$(dirname "$0")/.."
data=$(realpath "${1:-../shared/datasets/imdb/test.parquet}")
stage=.gpu
cargo test --release --workspace --no-run
bash ../shared/gpu/stage-onnxruntime-gpu.sh "$stage" > /dev/null
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir "$work/bench"
cp "${CARGO_TARGET_DIR:-target}/release/pipeline" "$work/bench/pipeline"
strip "$work/bench/pipeline"
cp "$data" "$work/bench/test.parquet"
rm -f "$stage"/bench-*
tar -C "$work" -cf - bench | zstd -q -T0 -19 --long=27 -o "$work/bench.tar.zst"
# What is left of 64 MiB beside the working tree and one 32 MiB ONNX Runtime part.
tree=$(git ls-files -z | xargs -0 du -cb | tail -n 1 | cut -f1)
room=$(( (64 << 20) - (32 << 20) - tree - (2 << 20) ))
[ "$room" -gt $((4 << 20)) ] || { echo "the working tree ($tree bytes) leaves no room beside an ONNX Runtime part" >&2; exit 1; }
split -b "$room" -d "$work/bench.tar.zst" "$stage/bench-"

ort_parts=("$stage"/part-*)
bench_parts=("$stage"/bench-*)
[ "${#bench_parts[@]}" -le "${#ort_parts[@]}" ] || { echo "more bench parts than ONNX Runtime parts" >&2; exit 1; }
echo "Device calls, back to back (carry lists the .gpu files of each call):"
last=$(( ${#ort_parts[@]} - 1 ))
for i in "${!ort_parts[@]}"; do
    carry="\"${ort_parts[$i]}\""
    [ "$i" -lt "${#bench_parts[@]}" ] && carry+=", \"${bench_parts[$i]}\""
    [ "$i" -eq 0 ] && carry+=", \"$stage/zstd\""
    copy="cp ${ort_parts[$i]}"
    [ "$i" -lt "${#bench_parts[@]}" ] && copy+=" ${bench_parts[$i]}"
    [ "$i" -eq 0 ] && copy="mkdir -p /tmp/ort && $copy $stage/zstd" || true
    command="$copy /tmp/ort/"
    if [ "$i" -eq "$last" ]; then
        command+=" && cd /tmp/ort && cat part-* | ./zstd -d --long=27 | tar xf - && cat bench-* | ./zstd -d --long=27 | tar xf - && rm part-* bench-* && cd - > /dev/null"
        command+=" && LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib ORT_DYLIB_PATH=/tmp/ort/libonnxruntime.so.1.31.1 bench/gpu.sh /tmp/ort/bench \$OUT"
    fi
    echo "  call $((i + 1)): carry [$carry]"
    echo "           command: $command"
done
