"""Classify a corpus in object storage with one Airflow task per shard, then finalize.

Dynamic task mapping runs deploy/run-shard.sh (`pipeline run --shard I/N`, the same script the
Kubernetes Job calls) for I in 0..N-1; a retried task skips
the parts its earlier attempt committed. `pipeline run --finalize` then writes _SUCCESS (a
no-op when the last shard already did), so downstream tasks can wait on that one object.

Needs Airflow 2.4+ (dynamic task mapping), and the `pipeline` binary and run-shard.sh on the
workers where the paths below say: the image the Dockerfile at the repository root builds
(registry.example.com/attention-classifier/pipeline:0.1.0, as the Kubernetes Jobs name it)
carries both there, so workers run from it, or from an image built on it. Credentials
come from the standard environment variables (AWS_*, GOOGLE_*, AZURE_*); set them in the
worker's environment or through `env=` below. The exit code tells what to do with a failure:
1 = bad input (retrying will not help), 75 = object storage failed after retries (retry later).
"""

from __future__ import annotations

import os

import pendulum
from airflow.decorators import dag, task
from airflow.exceptions import AirflowFailException

INPUT = "s3://my-corpus/reviews/*.parquet"
OUTPUT = "s3://my-results/reviews-predictions/"
SHARDS = 8
PIPELINE = "/usr/local/bin/pipeline"
RUN_SHARD = "/deploy/run-shard.sh"


def shard_threads(cores: int | None, shards: int) -> int:
    """Threads for one shard: the worker's cores shared by the shards that may run on it at
    once (all of them, with the LocalExecutor), at least one. Without --threads every shard
    would start one thread per core, and N shards on one worker would fight over them."""
    return max(1, (cores or 1) // shards)


def run(command: list[str], env: dict[str, str] | None = None) -> None:
    import os
    import subprocess

    result = subprocess.run(command, env={**os.environ, **(env or {})}, check=False)
    if result.returncode == 1 or result.returncode == 2:
        # Bad input or usage: a retry would fail the same way.
        raise AirflowFailException(f"{' '.join(command)} exited {result.returncode}")
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}; Airflow retries it")


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False, tags=["classify"])
def classify_corpus():
    @task(retries=3, retry_exponential_backoff=True)
    def classify_shard(index: int) -> None:
        shard = {"PIPELINE": PIPELINE, "PIPELINE_INPUT": INPUT, "PIPELINE_OUTPUT": OUTPUT}
        threads = shard_threads(os.cpu_count(), SHARDS)
        env = {**shard, "SHARD_COUNT": str(SHARDS), "SHARD_INDEX": str(index)}
        run([RUN_SHARD, "--threads", str(threads)], env=env)

    @task(retries=2)
    def finalize() -> None:
        run([PIPELINE, "run", "--finalize", OUTPUT])

    classify_shard.expand(index=list(range(SHARDS))) >> finalize()


classify_corpus()
