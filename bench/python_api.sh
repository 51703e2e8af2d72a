#!/usr/bin/env bash
# The wheel measured from Python (bench/python_api.py): size, import time, classify docs/s
# against `pipeline run` in the same session, Ray Data and PySpark docs/s, on IMDB test.
#   bench/python_api.sh [DATA.parquet]      (ROUNDS=2 by default)
# Builds the wheel (scripts/build-wheel.sh) and installs it into target/python-engines.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/datasets/imdb/test.parquet}
wheel=$(bash scripts/build-wheel.sh | tail -1)
python=$(bash scripts/install-python-engines.sh | tail -1)
"$python" -m pip install --quiet --no-deps --force-reinstall "$wheel"
"$python" bench/python_api.py "$wheel" "$data" target/bench/python-api
