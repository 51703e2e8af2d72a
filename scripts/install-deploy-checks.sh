#!/usr/bin/env bash
# Installs the checkers of deploy/ into their own virtual environment: kubernetes-validate
# (the Kubernetes API's JSON schemas, bundled, so it validates offline) and Airflow (whose
# DagBag loads deploy/airflow_dag.py as a scheduler would). Safe to run again.
#
#   scripts/install-deploy-checks.sh [DEST_DIR]      (default: target/deploy-checks)
#
# The last line printed is the absolute path of the environment's python.
set -euo pipefail

PACKAGES=("kubernetes-validate==1.37.0" "apache-airflow==3.3.2")

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-$(dirname "$script_dir")/target/deploy-checks}"
if [[ -x "$dest/bin/python" ]] && "$dest/bin/python" -c 'import kubernetes_validate, airflow' 2>/dev/null; then
    echo "$(cd "$dest" && pwd)/bin/python"
    exit 0
fi
mkdir -p "$(dirname "$dest")"
# Built beside the destination and renamed into place, so an interrupted install is never reused.
staging="$(mktemp -d "$(dirname "$dest")/.deploy-checks.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
echo "install-deploy-checks: installing ${PACKAGES[*]} (about a minute)" >&2
"${PYTHON:-python3}" -m venv "$staging" >&2
"$staging/bin/python" -m pip install --quiet "${PACKAGES[@]}" >&2 \
    || { echo "install-deploy-checks: error: pip could not install ${PACKAGES[*]} (no network?)" >&2; exit 1; }
rm -rf "$dest"
mv -T "$staging" "$dest"
echo "$(cd "$dest" && pwd)/bin/python"
