#!/usr/bin/env bash
# A Delta table's incremental reruns against its size: N one-row input files classified into a
# table, then a rerun with nothing to do and a rerun with one new file, for each N given. A run
# asks the table about every unit and input file; this shows whether that costs one read of the
# log or one per question (quadratic). Prints seconds per step and the reruns' share of the
# first run. About 5 minutes on 2 cores for the defaults. PIPELINE=path runs another build of
# the binary instead of this one (to compare builds in one session).
#   bench/delta_rerun.sh [N ...]      (default: 1000 4000 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PIPELINE:-}" ]; then
    cargo test --release --workspace --no-run
fi
pipeline="${PIPELINE:-${CARGO_TARGET_DIR:-target}/release/pipeline}"
work=target/bench/delta_rerun
if [ ! -x target/bench/venv/bin/python ]; then
    python3 -m venv target/bench/venv
    target/bench/venv/bin/pip install -q pyarrow numpy tokenizers onnxruntime==1.32.0
fi
target/bench/venv/bin/python - "$pipeline" "$work" "${@:-1000 4000 10000}" <<'PY'
import os, shutil, subprocess, sys, time

pipeline, work = sys.argv[1], sys.argv[2]
sizes = [int(n) for arg in sys.argv[3:] for n in arg.split()]
import pyarrow as pa, pyarrow.parquet as pq

def timed(*args):
    started = time.perf_counter()
    subprocess.run([pipeline, "run", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started

print(f"{'files':>7} {'first run s':>12} {'rerun, nothing new s':>21} {'rerun, one new file s':>22} {'ratios':>14}")
for n in sizes:
    shutil.rmtree(work, ignore_errors=True)
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs)
    for i in range(n):
        pq.write_table(pa.table({"id": [f"r{i}"], "text": [f"review {i}: a fine film, not bad at all"]}), os.path.join(inputs, f"f{i:06d}.parquet"))
    table = os.path.join(work, "table")
    flags = ["--input", inputs, "--output", table, "--output-format", "delta", "--threads", "2"]
    first = timed(*flags)
    nothing = timed(*flags)
    pq.write_table(pa.table({"id": ["new"], "text": ["one more review"]}), os.path.join(inputs, "zz-new.parquet"))
    one_new = timed(*flags)
    print(f"{n:>7} {first:>12.1f} {nothing:>21.1f} {one_new:>22.1f} {nothing / first:>6.2f} {one_new / first:>6.2f}")
PY
