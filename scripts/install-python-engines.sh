#!/usr/bin/env bash
# Installs what the wheel's tests run it with into their own virtual environment: pyarrow,
# ONNX Runtime (which the wheel finds by itself), pytest, Ray Data and PySpark; and Java 17
# for Spark from Debian's packages when there is no java (needs root). Safe to run again.
#
#   scripts/install-python-engines.sh [DEST_DIR]      (default: target/python-engines)
#
# The last line printed is the absolute path of the environment's python.
set -euo pipefail

PACKAGES=("pyarrow==26.0.1" "onnxruntime==1.32.0" "pytest==9.2.0" "ray[data]==2.60.0" "pyspark==4.3.0")

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-$(dirname "$script_dir")/target/python-engines}"

if ! command -v java >/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "install-python-engines: installing Java 17 for Spark from Debian's packages" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >&2 \
            || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >&2; } \
            || { echo "install-python-engines: error: apt-get could not install openjdk-17-jre-headless" >&2; exit 1; }
    else
        echo "install-python-engines: error: Spark needs Java 17 or newer; install openjdk-17-jre-headless" >&2
        exit 1
    fi
fi

# shellcheck source=scripts/venv.sh
source "$script_dir/venv.sh"
install_venv install-python-engines "$dest" "pyarrow, onnxruntime, pytest, ray.data, pyspark" "${PACKAGES[@]}"
