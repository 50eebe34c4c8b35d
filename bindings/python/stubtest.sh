#!/usr/bin/env bash
# Checks the .pyi stubs against the installed package: python -m mypy.stubtest lagless.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m mypy.stubtest lagless --allowlist stubtest-allowlist.txt "$@"
