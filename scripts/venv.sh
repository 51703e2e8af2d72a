# What the installers of the tests' Python tools share (sourced, not run):
#
#   install_venv NAME DEST IMPORTS PACKAGE...
#
# Reuses DEST when its python can `import IMPORTS`; otherwise creates a virtual environment
# beside DEST, pip-installs the packages into it and renames it into place, so an interrupted
# install is never reused. Prints the environment's python last. (After the move, run tools as
# `bin/python -m TOOL`: entry-point scripts still name the staging path.)

install_venv() {
    local name=$1 dest=$2 imports=$3
    shift 3
    if [[ -x "$dest/bin/python" ]] && "$dest/bin/python" -c "import $imports" 2>/dev/null; then
        echo "$(cd "$dest" && pwd)/bin/python"
        return 0
    fi
    local python="${PYTHON:-python3}"
    command -v "$python" >/dev/null 2>&1 \
        || { echo "$name: error: $python not found; install Python 3 (or set PYTHON=/path/to/python3)" >&2; return 1; }
    mkdir -p "$(dirname "$dest")"
    local staging
    staging="$(mktemp -d "$(dirname "$dest")/.$(basename "$dest").XXXXXX")"
    echo "$name: installing $* into $dest" >&2
    if ! "$python" -m venv "$staging" >&2; then
        rm -rf "$staging"
        echo "$name: error: cannot create a virtual environment (is python3-venv installed?)" >&2
        return 1
    fi
    if ! "$staging/bin/python" -m pip install --quiet "$@" >&2; then
        rm -rf "$staging"
        echo "$name: error: pip could not install $* (no network?)" >&2
        return 1
    fi
    rm -rf "$dest"
    mv -T "$staging" "$dest"
    echo "$(cd "$dest" && pwd)/bin/python"
}
