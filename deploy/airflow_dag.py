"""Classify a corpus in object storage with one Airflow task per shard, then finalize.

Each run takes its input, output, model and shard count as DAG parameters (the defaults
below; override them when triggering, `airflow dags trigger classify_corpus --conf
'{"input": "s3://...", "shards": 16}'`), and the DAG runs daily. A daily corpus names its
day in the paths: `{ds}` in `input` and `output` becomes the run's logical date.

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

try:  # Airflow 3
    from airflow.sdk import Param
except ImportError:  # Airflow 2
    from airflow.models.param import Param

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


def location(template: str, ds: str) -> str:
    """A parameter's path with `{ds}` (the run's logical date, 2026-11-25) filled in."""
    return template.replace("{ds}", ds)


@dag(
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["classify"],
    params={
        "input": Param(INPUT, type="string", description="Parquet/IPC file, directory, glob or URL; {ds} = date"),
        "output": Param(OUTPUT, type="string", description="the dataset output (a prefix); {ds} = date"),
        "model": Param(None, type=["null", "string"], description="a model package; none: the default model"),
        "shards": Param(SHARDS, type="integer", minimum=1, description="tasks the run is split into"),
    },
)
def classify_corpus():
    @task
    def shard_indices(params: dict | None = None) -> list[int]:
        return list(range(int((params or {})["shards"])))

    @task(retries=3, retry_exponential_backoff=True)
    def classify_shard(index: int, params: dict | None = None, ds: str | None = None) -> None:
        params, ds = params or {}, ds or ""
        shards = int(params["shards"])
        env = {
            "PIPELINE": PIPELINE,
            "PIPELINE_INPUT": location(params["input"], ds),
            "PIPELINE_OUTPUT": location(params["output"], ds),
            "SHARD_COUNT": str(shards),
            "SHARD_INDEX": str(index),
        }
        model = ["--model", params["model"]] if params.get("model") else []
        run([RUN_SHARD, "--threads", str(shard_threads(os.cpu_count(), shards)), *model], env=env)

    @task(retries=2)
    def finalize(params: dict | None = None, ds: str | None = None) -> None:
        run([PIPELINE, "run", "--finalize", location((params or {})["output"], ds or "")])

    classify_shard.expand(index=shard_indices()) >> finalize()


classify_corpus()
