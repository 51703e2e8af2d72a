"""The wheel from Python, measured: its size, import time, `Classifier.classify` docs/s
against `pipeline run` in the same session (the two alternate, ROUNDS times), and the Ray Data
and PySpark examples' docs/s. Run by bench/python_api.sh with the wheel installed.

    python bench/python_api.py WHEEL DATA.parquet WORK_DIR
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

ROUNDS = int(os.environ.get("ROUNDS", "2"))
HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "python" / "examples"


def import_seconds(module: str) -> float:
    """The median wall time of a fresh interpreter that imports `module`, over 7 starts."""
    times = []
    for _ in range(7):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def pipeline_run(data: str, output: Path) -> float:
    """`pipeline run` (the wheel's command) wall time; its own summary has the same count."""
    output.unlink(missing_ok=True)
    start = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "pipeline"), "run", "--input", data, "--output", str(output)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def python_classify(data: str) -> tuple[float, str]:
    """Reading the Parquet file and `Classifier.classify` on it, timed in a fresh interpreter
    from before the import (what a Ray or Spark worker pays) to the last row."""
    script = (
        "import time; start = time.perf_counter()\n"
        "import pyarrow.parquet as pq, attention_classifier as ac\n"
        "c = ac.Classifier()\n"
        f"out = c.classify(pq.read_table({data!r}))\n"
        "print(time.perf_counter() - start, c.backend, out.num_rows)\n"
    )
    seconds, backend, rows = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                                            text=True).stdout.split()
    return float(seconds), backend


def example(name: str, data: str, output: Path) -> str:
    shutil.rmtree(output, ignore_errors=True)
    result = subprocess.run([sys.executable, str(EXAMPLES / name), "--input", data, "--output", str(output)],
                            check=True, capture_output=True, text=True)
    return result.stdout.strip().splitlines()[-1]


def main() -> None:
    wheel, data, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    rows = pq.ParquetFile(data).metadata.num_rows
    print(f"wheel: {Path(wheel).name}, {os.path.getsize(wheel) / 1e6:.1f} MB")
    print(f"import: attention_classifier {import_seconds('attention_classifier') * 1000:.0f} ms, "
          f"pyarrow alone {import_seconds('pyarrow') * 1000:.0f} ms (median of 7 fresh interpreters)")
    runs, classifies = [], []
    for round in range(ROUNDS):
        runs.append(pipeline_run(data, work / "predictions.parquet"))
        seconds, backend = python_classify(data)
        classifies.append(seconds)
        print(f"round {round + 1}: pipeline run {runs[-1]:.1f} s, Classifier.classify ({backend}) {seconds:.1f} s",
              file=sys.stderr)
    best_run, best_classify = min(runs), min(classifies)
    print(f"{rows} rows: pipeline run {rows / best_run:.0f} docs/s, Classifier.classify {rows / best_classify:.0f} docs/s"
          f" ({best_run / best_classify:.2f}× pipeline run; best of {ROUNDS} each, alternating)")
    print(example("ray_data.py", data, work / "ray"))
    print(example("pyspark_map_in_arrow.py", data, work / "spark"))
    print(json.dumps({"pipeline_run_s": runs, "classify_s": classifies}))


if __name__ == "__main__":
    main()
