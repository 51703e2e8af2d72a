"""Classify a Parquet corpus with PySpark: `mapInArrow` hands each task's Arrow batches to the
Classifier of its Python worker (`Classifier.shared`: opened once per worker, not per task).

    python pyspark_map_in_arrow.py --input reviews.parquet --output predictions/ [--model DIR] [--master local[2]]

Spark needs the output schema before it runs: it is the Classifier's output for an empty
table of the input's schema. Spark has no unsigned bytes, so the compact attention columns
(uint8 weights relative to the heaviest) travel as int16, the same values. Output: a directory of Parquet files with the input's columns and
those of `pipeline run`.
"""

import argparse
import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

import pyarrow as pa

import attention_classifier as ac


def spark_type(arrow_type: pa.DataType) -> pa.DataType:
    """`arrow_type` with unsigned bytes widened to int16, which Spark can hold."""
    if pa.types.is_list(arrow_type):
        return pa.list_(spark_type(arrow_type.value_type))
    return pa.int16() if pa.types.is_uint8(arrow_type) else arrow_type


def classify(spark: SparkSession, input: str, output: str, model: str | None = None) -> int:
    """Writes the predictions of every row of `input` under `output`; returns the row count."""
    frame = spark.read.parquet(input)
    empty = to_arrow_schema(frame.schema).empty_table()
    classified = ac.Classifier.shared(model, threads=1).classify(empty).schema
    output_schema = pa.schema([field.with_type(spark_type(field.type)) for field in classified])

    def classify_batches(batches):
        # Opened once per Python worker (Spark reuses them between tasks); one thread each,
        # since Spark runs a task per core.
        classifier = ac.Classifier.shared(model, threads=1)
        for batch in batches:
            yield from classifier.classify(batch).cast(output_schema).to_batches()

    frame.mapInArrow(classify_batches, from_arrow_schema(output_schema)).write.parquet(output)
    return spark.read.parquet(output).count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--model")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    # Spark's Python workers run `python3` from PATH unless told: this one has the wheel.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # A local Spark on loopback, whatever the host name resolves to.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(args.master)
        .appName("attention-classifier")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter()
    rows = classify(spark, args.input, args.output, args.model)
    seconds = time.perf_counter() - started
    print(f"pyspark: {rows} rows in {seconds:.1f} s ({rows / seconds:.0f} docs/s) on {args.master}")
    spark.stop()


if __name__ == "__main__":
    main()
