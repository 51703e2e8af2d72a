#!/usr/bin/env bash
# Installs Debian's Chromium for the report's browser test (the test drives it headless
# through the DevTools protocol). Safe to run again: an installed browser is kept. Used by
# .ci/run and by hand:
#
#   scripts/install-chromium.sh
#
# Needs root (or sudo) and Debian's package mirrors. The last line printed is the browser's
# path; the test finds it as `chromium` on PATH, or through CHROME=/path/to/chrome.
set -euo pipefail

die() {
    echo "install-chromium: error: $*" >&2
    exit 1
}

for browser in "${CHROME:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
    if [[ -n "$browser" && -x "$browser" ]]; then
        echo "$browser"
        exit 0
    fi
done

command -v apt-get >/dev/null 2>&1 || die "no apt-get: install Chromium by hand and set CHROME=/path/to/chromium"
sudo=""
if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "installing Chromium needs root; run as root or install sudo"
    sudo="sudo"
fi
echo "install-chromium: installing Debian's chromium" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2 || die "apt-get update failed (no network?)"
$sudo apt-get install -y -qq --no-install-recommends chromium >&2 || die "apt-get install chromium failed"
[[ -x /usr/bin/chromium ]] || die "chromium was installed but /usr/bin/chromium is missing"
echo /usr/bin/chromium
