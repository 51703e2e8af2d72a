"""Benchmark: `pipeline run` on tract and ONNX Runtime, and the default command, vs the Python
stack, unsorted and length-sorted, same graph, file and threads. Prints docs/s, tokens/s, peak RSS and wall time
per run, each stage's share of the run for ours, the ratios, and the largest
|Δprobabilities| between runners. Invoked by bench/run.sh, which sets up its tools.
"""
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq

from common import measure, repeated

MODEL, DATA, WORK, ORT_LIB = sys.argv[1:5]
SIZES = [int(n) for n in os.environ.get("BENCH_REPEATS", "1,10").split(",")]
THREADS = "2"
# `null`: our pipeline with the model replaced by a stand-in that costs nothing (hidden
# `--null-model`), the ceiling of everything around inference. `default`: the command a user
# types (windows, compact attention, contributions; ONNX Runtime), which #34 holds to 2x
# the length-sorted Python stack. `first-command`: the same command on tract, as the README's
# first command runs on a fresh machine, before anything installs ONNX Runtime.
RUNNERS = ["tract", "ort", "default", "first-command", "null", "python", "python-sorted"]
PIPELINE = os.environ.get("PIPELINE_BIN", "target/release/pipeline")
os.makedirs(WORK, exist_ok=True)

results = []
for times in SIZES:
    corpus = repeated(DATA, WORK, times)
    rows = pq.ParquetFile(corpus).metadata.num_rows
    outputs = {}
    for runner in RUNNERS:
        out, metrics = f"{WORK}/{runner}-x{times}.parquet", f"{WORK}/{runner}-x{times}.json"
        if runner.startswith("python"):
            command = [sys.executable, "bench/python_stack.py", MODEL, corpus, out, metrics]
            command += ["sorted"] if runner == "python-sorted" else []
        elif runner in ("default", "first-command"):
            command = [PIPELINE, "run", "--input", corpus, "--model", MODEL, "--output", out, "--threads", THREADS,
                       "--pass-through", "id", "--metrics-json", metrics]
            command += ["--ort-library", ORT_LIB] if runner == "default" else ["--backend", "tract"]
        else:
            # The Python stack cuts each review at the token limit and writes every hop as
            # floats; so does this run, for the same work (windows cost 1.4x on IMDB test:
            # bench/long_documents.sh; compact output: bench/output_size.sh).
            command = [PIPELINE, "run", "--input", corpus, "--model", MODEL, "--output", out,
                       "--threads", THREADS, "--batch-size", "64", "--long-documents", "truncate",
                       "--attention", "full",
                       "--pass-through", "id", "--metrics-json", metrics, "--ort-library", ORT_LIB]
            command += ["--null-model"] if runner == "null" else ["--backend", runner]
        wall, rss = measure(command)
        m = json.load(open(metrics))
        results.append(dict(rows=rows, runner=runner, docs_s=m["docs_per_second"], tokens_s=m["tokens_per_second"],
                            rss=rss, wall=wall))
        outputs[runner] = out
        print(f"{rows:>7} rows  {runner:<13} {m['docs_per_second']:8.1f} docs/s {m['tokens_per_second']:10.0f} tokens/s"
              f"  peak RSS {rss:7.1f} MiB  wall {wall:7.1f} s", flush=True)
        if "stage_seconds" in m:
            busy = "  ".join(f"{stage} {seconds / m['seconds']:4.0%}" for stage, seconds in m["stage_seconds"].items())
            print(f"{'':>7}       {'':<13} stages busy: {busy}", flush=True)
            # Session-only speed: the same batches if nothing but the model ran, on THREADS cores.
            session_only = m["rows"] / (m["session_seconds"] / int(THREADS))
            print(f"{'':>7}       {'':<13} session-only {session_only:8.1f} docs/s; this run reached "
                  f"{m['docs_per_second'] / session_only:.0%} of it", flush=True)
    for a, b in [("tract", "ort"), ("tract", "python"), ("tract", "python-sorted")]:
        diff = subprocess.run([sys.executable, "bench/compare.py", outputs[a], outputs[b]], capture_output=True,
                              text=True, check=True).stdout.strip()
        print(f"{rows:>7} rows  max |Δprobabilities| {a} vs {b}: {diff}", flush=True)

print("\nratios (same file, same threads):")
for times in SIZES:
    rows = [r for r in results if r["rows"] == results[SIZES.index(times) * len(RUNNERS)]["rows"]]
    by = {r["runner"]: r for r in rows}
    for runner in ["tract", "ort", "default", "first-command"]:
        for python in ["python", "python-sorted"]:
            print(f"  {by[python]['rows']:>7} rows  {runner} / {python} docs/s = {by[runner]['docs_s'] / by[python]['docs_s']:.2f}"
                  f"   peak RSS {runner} / {python} = {by[runner]['rss'] / by[python]['rss']:.2f}")
if len(SIZES) > 1:
    small, large = results[:len(RUNNERS)], results[-len(RUNNERS):]
    for s, l in zip(small, large):
        print(f"  {s['runner']:<6} peak RSS {l['rows']} rows / {s['rows']} rows = {l['rss'] / s['rss']:.2f}")
