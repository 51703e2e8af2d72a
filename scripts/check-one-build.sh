#!/usr/bin/env bash
# Checks that the README's two commands share one build: every dependency unit (crate, target
# and artifact files) that `cargo build --release --bin pipeline` uses is the very artifact
# `cargo test --release --workspace` uses, so whichever runs first, the other compiles only
# this repository's crates (and, for the tests, the crates only tests use). Builds whatever
# is missing first. Used by .ci/run and by hand:
#
#   scripts/check-one-build.sh
#
# Prints how many dependency units each command uses and how many they share; exits 1 when a
# unit of the first command differs in the second (workspace-hack is stale: run
# `cargo hakari generate && cargo hakari manage-deps`).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The README's build (target/) unless told otherwise: a second target directory is a second cold build.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

cargo build --release --bin pipeline --message-format=json >"$tmp/run.json"
cargo test --release --workspace --no-run --message-format=json >"$tmp/test.json"

python3 - "$tmp/run.json" "$tmp/test.json" <<'PY'
import json
import sys


def dependency_units(path):
    """(package, target, kind) -> artifact files, for every crate not in this repository."""
    units = {}
    with open(path) as messages:
        for line in messages:
            message = json.loads(line)
            if message.get("reason") != "compiler-artifact" or message["package_id"].startswith("path+"):
                continue
            target = message["target"]
            key = (message["package_id"], target["name"], tuple(target["kind"]))
            units.setdefault(key, set()).update(message["filenames"])
    return units


run, test = dependency_units(sys.argv[1]), dependency_units(sys.argv[2])
# The tests may build a crate a second time for the host (a build script's dependency): a
# superset of the same files is the same unit.
differ = sorted(key for key, files in run.items() if not files <= test.get(key, set()))
print(f"one build: the README's run uses {len(run)} dependency units, the tests {len(test)}; "
      f"{len(run) - len(differ)} of the run's are the tests' own, {len(test) - len(run)} are only the tests'")
for package, name, kind in differ:
    print(f"one build: {package} ({name}, {'/'.join(kind)}) is built differently for the two commands", file=sys.stderr)
sys.exit(1 if differ else 0)
PY
