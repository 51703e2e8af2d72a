#!/usr/bin/env bash
# Installs the checkers of deploy/ into their own virtual environment: kubernetes-validate
# (the Kubernetes API's JSON schemas, bundled, so it validates offline) and Airflow with its
# Kubernetes provider (whose DagBag loads deploy/airflow_dag.py, KubernetesPodOperator
# tasks, as a scheduler would) and its OpenLineage provider (whose macros render the parent
# run the shard pods pass on). Safe to run again.
#
#   scripts/install-deploy-checks.sh [DEST_DIR]      (default: target/deploy-checks)
#
# The last line printed is the absolute path of the environment's python.
set -euo pipefail

PACKAGES=("kubernetes-validate==1.37.0" "apache-airflow==3.3.2" "apache-airflow-providers-cncf-kubernetes==10.25.0"
    "apache-airflow-providers-openlineage==2.20.3")

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-$(dirname "$script_dir")/target/deploy-checks}"
# shellcheck source=scripts/venv.sh
source "$script_dir/venv.sh"
install_venv install-deploy-checks "$dest" "kubernetes_validate, airflow, airflow.providers.cncf.kubernetes, airflow.providers.openlineage" "${PACKAGES[@]}"
