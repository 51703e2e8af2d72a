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


def token_lists(table):
    """Each row's tokens: the `tokens` column, or, where the run wrote each token's place in the
    text instead (`token_spans`: `gap * 2**32 + length` in characters, negative for [UNK]),
    those characters lower-cased as the tokenizer reads them (as `attention_classifier.tokens`)."""
    if "tokens" in table.column_names:
        return table.column("tokens").to_pylist()
    text_column = (table.schema.metadata or {})[b"pipeline.token_spans_text"].decode()
    rows = []
    for text, spans in zip(table.column(text_column).to_pylist(), table.column("token_spans").to_pylist()):
        words, end = [], 0
        for value in spans or []:
            start = end + (abs(value) >> 32)
            end = start + (abs(value) & 0xFFFFFFFF)
            words.append("[UNK]" if value < 0 else "".join(c.lower() for c in text[start:end]))
        rows.append(words)
    return rows
