#!/usr/bin/env bash
# Stages the GPU benchmark (bench/gpu.sh) for the GPU machine lent through the `device` tool,
# whose transfers carry at most 64 MiB each, working tree included.
#   [BASE=an/earlier/pipeline] bench/gpu-stage.sh [DATA.parquet]       (default: IMDB test)
# Packs into one zstd stream, split into as few parts as the transfer limit allows (.gpu/,
# git-ignored): ONNX Runtime 1.31.1's CUDA build (../shared/gpu/stage-onnxruntime-gpu.sh), the
# stripped release `pipeline`, DATA as test.parquet and, with BASE, that binary as a zstd patch
# against this one (a second binary whole would cost two more transfers), for bench/gpu.sh to
# run beside it. Prints the device calls to make, back to back (a machine stays warm ~30 s
# between calls): each sends one part; the last unpacks them and runs bench/gpu.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
data=$(realpath "${1:-../shared/datasets/imdb/test.parquet}")
base=${BASE:+$(realpath "$BASE")}
stage=.gpu
cargo test --release --workspace --no-run
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
bash ../shared/gpu/stage-onnxruntime-gpu.sh "$work/ort" > /dev/null
mkdir "$work/bench"
cp "${CARGO_TARGET_DIR:-target}/release/pipeline" "$work/bench/pipeline"
strip "$work/bench/pipeline"
cp "$data" "$work/bench/test.parquet"
if [ -n "$base" ]; then
    cp "$base" "$work/base"
    strip "$work/base"
    # The reference is as large as the binary, so the window must cover it (--long=28).
    zstd -q -19 --long=28 --patch-from="$work/bench/pipeline" "$work/base" -o "$work/bench/pipeline-base.patch.zst"
fi
tar -C "$work" -cf - bench | zstd -q -T0 -19 --long=27 -o "$work/bench.tar.zst"
# ONNX Runtime's parts are one zstd stream of a tar; the bench's follows it, and tar reads the
# two archives one after the other (--ignore-zeros).
rm -rf "$stage"; mkdir "$stage"
cp "$work/ort/zstd" "$stage/zstd"
# What is left of 64 MiB beside the working tree, zstd and a margin.
tree=$(git ls-files -z | xargs -0 du -cb | tail -n 1 | cut -f1)
room=$(( (64 << 20) - tree - $(stat -c %s "$stage/zstd") - (1 << 20) ))
[ "$room" -gt $((8 << 20)) ] || { echo "the working tree ($tree bytes) leaves no room to carry parts" >&2; exit 1; }
cat "$work"/ort/part-* "$work/bench.tar.zst" | split -b "$room" -d - "$stage/part-"

parts=("$stage"/part-*)
last=$(( ${#parts[@]} - 1 ))
echo "Device calls, back to back (${#parts[@]} parts; carry lists the .gpu files of each call):"
for i in "${!parts[@]}"; do
    carry="\"${parts[$i]}\""
    command="cp ${parts[$i]} /tmp/ort/"
    if [ "$i" -eq 0 ]; then
        carry+=", \"$stage/zstd\""
        command="mkdir -p /tmp/ort && cp ${parts[$i]} $stage/zstd /tmp/ort/"
    fi
    if [ "$i" -eq "$last" ]; then
        command+=" && cd /tmp/ort && cat part-* | ./zstd -d --long=27 | tar -xif - && rm part-*"
        [ -n "$base" ] && command+=" && ./zstd -q -d --long=28 --patch-from=bench/pipeline bench/pipeline-base.patch.zst -o bench/pipeline-base && chmod +x bench/pipeline-base"
        command+=" && cd - > /dev/null"
        command+=" && LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib ORT_DYLIB_PATH=/tmp/ort/libonnxruntime.so.1.31.1 bench/gpu.sh /tmp/ort/bench \$OUT"
    fi
    echo "  call $((i + 1)): carry [$carry]"
    echo "           command: $command"
done
