"""Peak memory of `pipeline run` as the corpus grows: the default backend (what `pipeline run`
picks with no flag) and the null model (the pipeline without inference), on the corpus and
on it repeated to a million rows. Memory must be bounded by the queues, not the corpus.
Invoked by bench/memory.sh, which sets up its tools.
"""
import json
import os
import sys

import pyarrow.parquet as pq

from common import measure, repeated

PIPELINE, DATA, WORK, ORT_LIB = sys.argv[1:5]
SIZES = [int(n) for n in os.environ.get("BENCH_MEMORY_REPEATS", "1,40").split(",")]
RUNNERS = {"default": [], "null": ["--null-model"]}
LIMIT_MIB = 1024
os.makedirs(WORK, exist_ok=True)

peaks = {}
for times in SIZES:
    corpus = repeated(DATA, WORK, times)
    rows = pq.ParquetFile(corpus).metadata.num_rows
    for runner, flags in RUNNERS.items():
        out, metrics = f"{WORK}/memory-{runner}.parquet", f"{WORK}/memory-{runner}.json"
        command = [PIPELINE, "run", "--input", corpus, "--output", out, "--pass-through", "id",
                   "--metrics-json", metrics, "--ort-library", ORT_LIB] + flags
        wall, rss = measure(command)
        m = json.load(open(metrics))
        # A million rows with attention is several GB of output: only its size is kept.
        size_gb = os.path.getsize(out) / 1e9
        os.remove(out)
        peaks[(runner, rows)] = rss
        print(f"{rows:>8} rows  {runner:<8} {m['docs_per_second']:8.1f} docs/s  peak RSS {rss:7.1f} MiB"
              f"  wall {wall:7.1f} s  output {size_gb:.2f} GB  backend {m.get('backend', '?')}", flush=True)

print("\npeak RSS, largest corpus / smallest (target: within 20 %, and at most 1 GiB):")
all_rows = sorted({rows for _, rows in peaks})
for runner in RUNNERS:
    small, large = peaks[(runner, all_rows[0])], peaks[(runner, all_rows[-1])]
    verdict = "met" if large / small <= 1.2 and max(small, large) <= LIMIT_MIB else "NOT met"
    print(f"  {runner:<8} {all_rows[-1]} / {all_rows[0]} rows: {large:.0f} / {small:.0f} MiB = {large / small:.2f}  ({verdict})")
