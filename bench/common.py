"""What the benchmark scripts share: a corpus repeated to a size, and a child's wall time and
peak RSS."""
import os
import subprocess
import sys
import time

import pyarrow.parquet as pq


def repeated(data, work, times):
    """`data` repeated `times` times (id and text only), written once under `work` and reused."""
    if times == 1:
        return data
    path = f"{work}/corpus-x{times}.parquet"
    if not os.path.exists(path):
        table = pq.read_table(data, columns=["id", "text"])
        partial = path + ".partial"
        writer = pq.ParquetWriter(partial, table.schema, compression="zstd")
        for _ in range(times):
            writer.write_table(table, row_group_size=5000)
        writer.close()
        os.replace(partial, path)
    return path


def measure(command):
    """Runs `command`, returns (wall seconds, peak RSS in MiB) of that child alone."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(command)}\n{process.stderr.read()}")
    return wall, usage.ru_maxrss / 1024


def pushes_towards_prediction(table):
    """Each row's `contribution` turned towards its prediction. A run records where it points
    them (`pipeline.contribution_towards`): a two-class model's second label on every row
    (`label:pos`), or each row's prediction (`prediction`, and files written before the key)."""
    towards = (table.schema.metadata or {}).get(b"pipeline.contribution_towards", b"prediction").decode()
    label = towards[len("label:"):] if towards.startswith("label:") else None
    rows = table.column("contribution").to_pylist()
    predictions = table.column("prediction").to_pylist()
    return [None if row is None else [p if label in (None, prediction) else -p for p in row]
            for row, prediction in zip(rows, predictions)]
