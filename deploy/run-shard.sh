#!/bin/sh
# One shard of a sharded `pipeline run`: what the Kubernetes Indexed Job and the Airflow DAG
# beside this file both call, so the two run exactly the same command.
#
#   PIPELINE_INPUT=s3://my-corpus/reviews/*.parquet \
#   PIPELINE_OUTPUT=s3://my-results/reviews-predictions/ \
#   SHARD_COUNT=8 SHARD_INDEX=3 deploy/run-shard.sh [more `pipeline run` flags]
#
# PIPELINE_INPUT, PIPELINE_OUTPUT  where to read and write (local paths or URLs)
# SHARD_COUNT                      how many shards the run is split into
# SHARD_INDEX                      this shard (0 .. SHARD_COUNT-1); left out, `pipeline`
#                                  reads JOB_COMPLETION_INDEX, as a Kubernetes Indexed Job sets
# PIPELINE_OUTPUT_FORMAT           parquet (default: parts and _SUCCESS) or delta (a Delta Lake
#                                  table at PIPELINE_OUTPUT; each shard commits its parts once)
# PIPELINE_JOB_NAME                what metrics and lineage call the run (default: pipeline_run)
# PIPELINE_METRICS_PUSH            a Prometheus Pushgateway (http://host:9091); empty: no push
# OPENLINEAGE_URL, OPENLINEAGE_NAMESPACE, OPENLINEAGE_PARENT_ID, OPENLINEAGE_ROOT_PARENT_ID
#                                  read by pipeline itself: lineage events, empty URL: none
# PIPELINE                         the binary (default: `pipeline` on PATH)
# PIPELINE_LOG_FORMAT              json (default, one object per line) or human
#
# The exit code is pipeline's: 0 done, 1 bad input (a retry fails the same way), 2 usage,
# 75 object storage failed after retries (retry later). A retried shard skips the parts it
# already committed.
set -eu

missing() {
    echo "run-shard.sh: set $1 ($2)" >&2
    exit 2
}
[ -n "${PIPELINE_INPUT:-}" ] || missing PIPELINE_INPUT "the input location"
[ -n "${PIPELINE_OUTPUT:-}" ] || missing PIPELINE_OUTPUT "the output dataset location"
[ -n "${SHARD_COUNT:-}" ] || missing SHARD_COUNT "how many shards the run is split into"

if [ -n "${SHARD_INDEX:-}" ]; then
    set -- --shard "$SHARD_INDEX/$SHARD_COUNT" "$@"
else
    set -- --shards "$SHARD_COUNT" "$@"
fi
if [ -n "${PIPELINE_METRICS_PUSH:-}" ]; then
    set -- --metrics-push "$PIPELINE_METRICS_PUSH" "$@"
fi
if [ -n "${PIPELINE_JOB_NAME:-}" ]; then
    set -- --job-name "$PIPELINE_JOB_NAME" "$@"
fi
set -- --output-format "${PIPELINE_OUTPUT_FORMAT:-parquet}" "$@"
# exec: signals reach pipeline itself, and its exit code is the script's.
exec "${PIPELINE:-pipeline}" --log-format "${PIPELINE_LOG_FORMAT:-json}" run \
    --input "$PIPELINE_INPUT" --output "$PIPELINE_OUTPUT" "$@"
