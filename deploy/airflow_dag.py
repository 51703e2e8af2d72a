"""Classify a corpus in object storage with one Airflow task per shard, then finalize.

Dynamic task mapping runs `pipeline run --shard I/N` for I in 0..N-1; a retried task skips
the parts its earlier attempt committed. `pipeline run --finalize` then writes _SUCCESS (a
no-op when the last shard already did), so downstream tasks can wait on that one object.

Needs Airflow 2.4+ (dynamic task mapping) and the `pipeline` binary on the workers. Credentials
come from the standard environment variables (AWS_*, GOOGLE_*, AZURE_*); set them in the
worker's environment or through `env=` below. The exit code tells what to do with a failure:
1 = bad input (retrying will not help), 75 = object storage failed after retries (retry later).
"""

from __future__ import annotations

import pendulum
from airflow.decorators import dag, task
from airflow.exceptions import AirflowFailException

INPUT = "s3://my-corpus/reviews/*.parquet"
OUTPUT = "s3://my-results/reviews-predictions/"
SHARDS = 8
PIPELINE = "/usr/local/bin/pipeline"


def run(args: list[str]) -> None:
    import subprocess

    result = subprocess.run([PIPELINE, *args], check=False)
    if result.returncode == 1 or result.returncode == 2:
        # Bad input or usage: a retry would fail the same way.
        raise AirflowFailException(f"pipeline {' '.join(args)} exited {result.returncode}")
    if result.returncode != 0:
        raise RuntimeError(f"pipeline {' '.join(args)} exited {result.returncode}; Airflow retries it")


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False, tags=["classify"])
def classify_corpus():
    @task(retries=3, retry_exponential_backoff=True)
    def classify_shard(index: int) -> None:
        run(["run", "--input", INPUT, "--output", OUTPUT, "--shard", f"{index}/{SHARDS}", "--log-format", "json"])

    @task(retries=2)
    def finalize() -> None:
        run(["run", "--finalize", OUTPUT])

    classify_shard.expand(index=list(range(SHARDS))) >> finalize()


classify_corpus()
