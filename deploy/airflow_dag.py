"""Classify a corpus in object storage with one Kubernetes pod per shard, then finalize.

Each run takes its input, output, model and shard count as DAG parameters (the defaults
below; override them when triggering, `airflow dags trigger classify_corpus --conf
'{"input": "s3://...", "shards": 16}'`), and the DAG runs daily. A daily corpus names its
day in the paths: `{ds}` in `input` and `output` becomes the run's logical date.

Every task is a pod of the image the Dockerfile at the repository root builds
(registry.example.com/attention-classifier/pipeline:0.1.0, as the Kubernetes Jobs name it),
run the way deploy/kubernetes-indexed-job.yaml runs it: deploy/run-shard.sh for shard I of N
(dynamic task mapping, one task per shard; a retried task skips the parts its earlier attempt
committed), as the image's user on a read-only root filesystem with a scratch volume for the
model cache, with the credentials of the `corpus-s3-credentials` Secret and the
`attention-classifier` ServiceAccount (deploy/kubernetes-credentials.yaml). `pipeline
finalize` then writes _SUCCESS (a no-op when the last shard already did), so downstream
tasks can wait on that one object.

Each run can write a Delta Lake table instead (`output_format: delta`: every shard commits its
own parts once, and a daily run into the same table appends only the new files), push its
figures to a Prometheus Pushgateway (`metrics_push`), and send OpenLineage events
(`openlineage_url`). With Airflow's OpenLineage provider enabled, each shard's events name
its Airflow task as their parent run (OPENLINEAGE_PARENT_ID and OPENLINEAGE_ROOT_PARENT_ID,
rendered by the provider's macros), so the lineage graph links the shards to this DAG.

Needs Airflow 2.4+ (dynamic task mapping) with apache-airflow-providers-cncf-kubernetes, and a
connection to the cluster (`kubernetes_default`, or in-cluster). The pod's exit code is in the
task log: 1 = bad input (each retry fails the same way, at once), 75 = object storage failed
after its own retries (Airflow's retries then try later).
"""

from __future__ import annotations

import pendulum
from airflow.decorators import dag, task
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from kubernetes.client import models as k8s

try:  # Airflow 3
    from airflow.sdk import Param
except ImportError:  # Airflow 2
    from airflow.models.param import Param

INPUT = "s3://my-corpus/reviews/*.parquet"
OUTPUT = "s3://my-results/reviews-predictions/"
SHARDS = 8
IMAGE = "registry.example.com/attention-classifier/pipeline:0.1.0"
NAMESPACE = "default"
RUN_SHARD = "/deploy/run-shard.sh"
# One shard's peak RSS stays under 1 GiB (RESULTS.md); --threads follows the CPU limit.
SHARD_CPUS = 2

# As the Kubernetes Job: the image's user, nothing written but the model cache.
POD_SECURITY = k8s.V1PodSecurityContext(run_as_user=10001, run_as_group=10001, run_as_non_root=True)
CONTAINER_SECURITY = k8s.V1SecurityContext(
    read_only_root_filesystem=True,
    allow_privilege_escalation=False,
    capabilities=k8s.V1Capabilities(drop=["ALL"]),
)
MODEL_CACHE = k8s.V1Volume(name="model-cache", empty_dir=k8s.V1EmptyDirVolumeSource(size_limit="1Gi"))
MODEL_CACHE_MOUNT = k8s.V1VolumeMount(name="model-cache", mount_path="/home/pipeline/.cache")
CREDENTIALS = [k8s.V1EnvFromSource(secret_ref=k8s.V1SecretEnvSource(name="corpus-s3-credentials"))]


def shard_arguments(params: dict) -> list[str]:
    """run-shard.sh's flags for every shard: the threads, and `--model` when the run names one."""
    model = ["--model", params["model"]] if params.get("model") else []
    return ["--threads", str(SHARD_CPUS), *model]


def if_lineage(macro: str) -> str:
    """A template of the OpenLineage provider's `macro`, or empty where the provider is not
    installed or not enabled (its macros are then not defined)."""
    plugin = "macros.OpenLineageProviderPlugin"
    return "{{ %s.%s(task_instance) if %s is defined else '' }}" % (plugin, macro, plugin)


# Each shard pod's environment: run-shard.sh's variables, as the Kubernetes Job sets them,
# rendered per mapped task (the shard is the task's map index; values handed over from
# another task through XCom would not be rendered), and the parent run for lineage.
SHARD_ENV = {
    "PIPELINE_INPUT": "{{ params.input.replace('{ds}', ds) }}",
    "PIPELINE_OUTPUT": "{{ params.output.replace('{ds}', ds) }}",
    "SHARD_COUNT": "{{ params.shards }}",
    "SHARD_INDEX": "{{ ti.map_index }}",
    "PIPELINE_OUTPUT_FORMAT": "{{ params.output_format }}",
    "PIPELINE_JOB_NAME": "{{ dag.dag_id }}",
    "PIPELINE_METRICS_PUSH": "{{ params.metrics_push or '' }}",
    "OPENLINEAGE_URL": "{{ params.openlineage_url or '' }}",
    "OPENLINEAGE_NAMESPACE": "{{ params.openlineage_namespace }}",
    "OPENLINEAGE_PARENT_ID": if_lineage("lineage_parent_id"),
    "OPENLINEAGE_ROOT_PARENT_ID": if_lineage("lineage_root_parent_id"),
}


def pod(**kwargs) -> dict:
    """What every pod of the DAG shares with the Kubernetes Jobs."""
    return dict(
        image=IMAGE,
        namespace=NAMESPACE,
        service_account_name="attention-classifier",
        security_context=POD_SECURITY,
        container_security_context=CONTAINER_SECURITY,
        volumes=[MODEL_CACHE],
        volume_mounts=[MODEL_CACHE_MOUNT],
        env_from=CREDENTIALS,
        get_logs=True,
        on_finish_action="delete_succeeded_pod",
        **kwargs,
    )


@dag(
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["classify"],
    params={
        "input": Param(INPUT, type="string", description="Parquet/IPC file, directory, glob or URL; {ds} = date"),
        "output": Param(OUTPUT, type="string", description="the dataset output (a prefix); {ds} = date"),
        "model": Param(None, type=["null", "string"], description="a model package; none: the default model"),
        "shards": Param(SHARDS, type="integer", minimum=1, description="pods the run is split into"),
        "output_format": Param(
            "parquet", enum=["parquet", "delta"], description="parquet: parts + _SUCCESS; delta: a Delta Lake table"
        ),
        "metrics_push": Param(None, type=["null", "string"], description="a Prometheus Pushgateway URL; none: no push"),
        "openlineage_url": Param(None, type=["null", "string"], description="an OpenLineage endpoint; none: no events"),
        "openlineage_namespace": Param("default", type="string", description="the OpenLineage namespace of the job"),
    },
)
def classify_corpus():
    @task
    def shard_pods(params: dict | None = None) -> list[list[str]]:
        """One entry per shard: its pod's arguments (the shard itself is the map index)."""
        params = params or {}
        return [shard_arguments(params)] * int(params["shards"])

    classify_shard = KubernetesPodOperator.partial(
        **pod(
            task_id="classify_shard",
            name="classify-shard",
            cmds=[RUN_SHARD],
            env_vars=SHARD_ENV,
            container_resources=k8s.V1ResourceRequirements(
                requests={"cpu": str(SHARD_CPUS), "memory": "1Gi"},
                limits={"cpu": str(SHARD_CPUS), "memory": "1536Mi"},
            ),
            retries=3,
            retry_exponential_backoff=True,
        )
    ).expand(arguments=shard_pods())

    finalize = KubernetesPodOperator(
        **pod(
            task_id="finalize",
            name="classify-finalize",
            cmds=["pipeline"],
            arguments=["finalize", "{{ params.output.replace('{ds}', ds) }}"],
            container_resources=k8s.V1ResourceRequirements(
                requests={"cpu": "100m", "memory": "256Mi"}, limits={"cpu": "1", "memory": "512Mi"}
            ),
            retries=2,
        )
    )

    classify_shard >> finalize


classify_corpus()
