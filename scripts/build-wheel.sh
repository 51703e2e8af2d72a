#!/usr/bin/env bash
# Builds the Python wheel (`pip install` gives the `pipeline` command and the
# `attention_classifier` module) into target/wheels/, with maturin from PyPI.
#
#   scripts/build-wheel.sh
#
# The `pipeline` binary is the one the tests run: built by the README's test command's build
# (`cargo test --release --workspace --no-run`, the only profile and feature set we build), then
# stripped into the wheel's scripts. The module is built by maturin into the same target
# directory, and the script fails if maturin compiles any dependency that build had built (CI
# runs it, so a second build of the dependencies turns CI red). The last line printed is the
# wheel's absolute path.
set -euo pipefail

MATURIN="maturin==1.16.0"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# The README's build (target/) unless told otherwise: a second target directory is a second cold build.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
tools="$repo/target/maturin"

if ! "$tools/bin/maturin" --version 2>/dev/null | grep -q "${MATURIN#maturin==}"; then
    echo "build-wheel: installing $MATURIN into $tools" >&2
    rm -rf "$tools"
    "${PYTHON:-python3}" -m venv "$tools" >&2
    "$tools/bin/python" -m pip install --quiet "$MATURIN" >&2 \
        || { echo "build-wheel: error: pip could not install $MATURIN (no network?)" >&2; exit 1; }
fi

echo "build-wheel: building the pipeline binary" >&2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cargo test --release --workspace --no-run --message-format=json-render-diagnostics >"$tmp/test-build.json"
scripts="python/wheel-data/scripts"
rm -rf python/wheel-data
mkdir -p "$scripts"
strip -o "$scripts/pipeline" "$CARGO_TARGET_DIR/release/pipeline"

echo "build-wheel: building the wheel" >&2
rm -rf target/wheels
"$tools/bin/maturin" build --release --manifest-path python/Cargo.toml --out target/wheels 2>&1 | tee "$tmp/maturin.log" >&2
# One build: the module may compile the crates only it uses (pyo3 and what pyo3 needs), never a
# crate the test build already built: that would be a second build of the dependencies.
python3 - "$tmp/test-build.json" "$tmp/maturin.log" <<'PY'
import json
import re
import sys

built = set()
for line in open(sys.argv[1]):
    message = json.loads(line)
    package = message.get("package_id", "")
    if message.get("reason") != "compiler-artifact" or package.startswith("path+"):
        continue
    source, spec = package.split("#", 1)
    # `…#name@version`, or `…/name#version` where the name is the source's last segment.
    name, version = spec.rsplit("@", 1) if "@" in spec else (source.rstrip("/").rsplit("/", 1)[-1], spec)
    built.add((name, version))
# A dependency's line names no local path (`Compiling pyo3 v0.29.0`); this repository's crates do.
compiled = [(name, version) for name, version, rest in
            re.findall(r"^\s*Compiling (\S+) v(\S+)(.*)$", open(sys.argv[2]).read(), re.M) if "(/" not in rest]
again = sorted(f"{name} {version}" for name, version in compiled if (name, version) in built)
if again:
    print("build-wheel: error: maturin compiled again dependencies the test build had built (a second build; "
          f"is workspace-hack stale? run cargo hakari generate): {', '.join(again)}", file=sys.stderr)
    sys.exit(1)
print(f"build-wheel: one build: maturin compiled {len(compiled)} dependencies, only the module's own "
      f"({', '.join(name for name, _ in compiled) or 'none'}); the test build's {len(built)} were reused", file=sys.stderr)
PY
wheel="$(ls target/wheels/attention_classifier-*.whl)"
echo "$repo/$wheel"
