#!/usr/bin/env python3
"""Bytes of some columns of a `pipeline run` output at each zstd level, row groups as written.

Rewrites each named column alone with pyarrow (dictionary on, pages of up to 8 MiB, as
`pipeline/src/sinks/layout.rs` writes them; `--no-dictionary` for the text column, which is
written without one) and prints its compressed bytes per level, then the seconds the fastest
of three writes took: how the level of each column in `layout.rs` was chosen (RESULTS.md,
#50).

    python bench/zstd_levels.py OUTPUT.parquet COLUMN [COLUMN ...] [--levels 1,2,3,...]
        [--no-dictionary]

Needs pyarrow (target/lakehouse-checks/bin/python has it).
"""

import argparse
import io
import time

import pyarrow.parquet as pq


def compressed_bytes(table, row_groups, level, dictionary):
    """The column's compressed bytes at `level`, and the fastest of three writes in seconds."""
    fastest = None
    for _ in range(3):
        buffer = io.BytesIO()
        started = time.perf_counter()
        writer = pq.ParquetWriter(buffer, table.schema, compression="zstd", compression_level=level,
                                  data_page_size=8 << 20, use_dictionary=dictionary)
        offset = 0
        for rows in row_groups:
            writer.write_table(table.slice(offset, rows))
            offset += rows
        writer.close()
        took = time.perf_counter() - started
        fastest = took if fastest is None else min(fastest, took)
    metadata = pq.ParquetFile(io.BytesIO(buffer.getvalue())).metadata
    size = sum(metadata.row_group(group).column(column).total_compressed_size
               for group in range(metadata.num_row_groups)
               for column in range(metadata.row_group(group).num_columns))
    return size, fastest


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("columns", nargs="+")
    parser.add_argument("--levels", default="1,2,3,6,9,12,15,16,17,19")
    parser.add_argument("--no-dictionary", action="store_true")
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    metadata = pq.ParquetFile(args.output).metadata
    row_groups = [metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)]
    table = pq.read_table(args.output, columns=args.columns)
    print("column".ljust(24) + "".join(f"{'level ' + str(level):>10}" for level in levels) + "   (MB, then s)")
    for column in args.columns:
        results = [compressed_bytes(table.select([column]), row_groups, level, not args.no_dictionary)
                   for level in levels]
        print(column.ljust(24) + "".join(f"{size / 1e6:10.3f}" for size, _ in results))
        print("".ljust(24) + "".join(f"{seconds:10.2f}" for _, seconds in results))


if __name__ == "__main__":
    main()
