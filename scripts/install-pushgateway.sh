#!/usr/bin/env bash
# Installs Prometheus's Pushgateway from Debian's packages (prometheus-pushgateway), for the
# metrics tests: a real Pushgateway on loopback parses and checks what `pipeline run` pushes.
# Safe to run again. Needs root (or sudo) on a Debian-based machine.
#
# The last line printed is the absolute path of the pushgateway binary.
set -euo pipefail

binary=/usr/bin/prometheus-pushgateway
if [[ ! -x "$binary" ]]; then
    sudo_cmd=()
    if [[ "$(id -u)" != 0 ]]; then sudo_cmd=(sudo); fi
    echo "install-pushgateway: installing Debian's prometheus-pushgateway" >&2
    # The package's post-install would start a service; there is none to start here.
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get install -y --no-install-recommends prometheus-pushgateway >&2 \
        || { "${sudo_cmd[@]}" apt-get update >&2 && "${sudo_cmd[@]}" apt-get install -y --no-install-recommends prometheus-pushgateway >&2; }
fi
"$binary" --version >&2
echo "$binary"
