#!/usr/bin/env bash
# Side-by-side benchmark of xy against supervisord and pm2 (issue 8).
# Installs supervisor (PyPI, venv) and pm2 (npm) under bench/.cache/ if
# missing, builds the release binaries, then runs bench/compare.py, which
# prints one Markdown table and writes it to bench/.cache/latest.md.
# Usage: bench/compare.sh [--quick] [--only xy,supervisord,pm2] [--scenarios ...] [--keep]
#   env: XYBENCH_NO_BUILD=1 uses the release xyd/xyctl already built (no cargo build).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=bench/.cache

if [[ "$(uname -s)" != Linux ]]; then
    echo "bench/compare.sh reads /proc: Linux only" >&2
    exit 1
fi

if [[ ! -x $cache/venv/bin/supervisord ]]; then
    echo "== installing supervisor into $cache/venv" >&2
    python3 -m venv "$cache/venv"
    "$cache/venv/bin/pip" install --quiet --disable-pip-version-check supervisor
fi
if [[ ! -x $cache/npm/node_modules/.bin/pm2 ]]; then
    echo "== installing pm2 into $cache/npm" >&2
    # No `pm2 --version` here: every pm2 command spawns a daemon in ~/.pm2.
    npm install --silent --no-audit --no-fund --prefix "$cache/npm" pm2
fi

echo "== cargo build --release (xyd, xyctl, test children)" >&2
if ! cargo build --release -p xy-testbins; then
    echo "cannot build the test children" >&2
    exit 1
fi
# xy itself may be mid-change: without its binaries the run still compares
# supervisord and pm2 and marks xy "pending".
if [[ -n ${XYBENCH_NO_BUILD:-} ]]; then :; elif ! cargo build --release -p xy-daemon -p xy-cli; then
    echo "!! xyd/xyctl did not build: xy will be marked pending" >&2
    export XYBENCH_XY_PENDING=1
fi

exec python3 bench/compare.py "$@"
