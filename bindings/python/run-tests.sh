#!/usr/bin/env bash
# Installs the lagless Python package and its test dependencies into a virtualenv, then runs the
# broker-backed pytest suite (stubtest included, in tests/test_typing.py).
#
#   LAGLESS_BOOTSTRAP=127.0.0.1:9092 bindings/python/run-tests.sh [pytest args]
#   LAGLESS_WHEEL=path/to/lagless-*.whl ...   installs that wheel instead of building the package
#
# VENV (default: /tmp/lagless-py-venv) is reused between runs; cargo's target/ directory here
# keeps the native build incremental.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -z "${LAGLESS_BOOTSTRAP:-}" ]; then
    echo "run-tests.sh: LAGLESS_BOOTSTRAP is not set; start a broker with" >&2
    echo "  python3 tests/kafka_broker.py start --dir /tmp/py-broker" >&2
    exit 2
fi
VENV="${VENV:-/tmp/lagless-py-venv}"
PYTHON="${PYTHON:-python3}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# pyarrow, polars and duckdb: the MessageBatch tests import consume_batch() results through Arrow.
# prometheus-client: lagless.prometheus and its official text parser (tests/test_prometheus.py).
"$VENV/bin/python" -m pip install --quiet pytest confluent-kafka mypy pyarrow polars duckdb prometheus-client
start=$(date +%s)
if [ -n "${LAGLESS_WHEEL:-}" ]; then
    # A wheel built already (tests/suites passes the one check-wheel.sh built): no second build.
    if [ ! -f "$LAGLESS_WHEEL" ]; then
        echo "run-tests.sh: LAGLESS_WHEEL=$LAGLESS_WHEEL is not a file (did the wheel build fail?)" >&2
        exit 2
    fi
    "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps "$LAGLESS_WHEEL"
    echo "run-tests.sh: installed $(basename "$LAGLESS_WHEEL")"
else
    "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps "$here"
    echo "run-tests.sh: package built and installed in $(( $(date +%s) - start )) s"
fi
cd "$here"
start=$(date +%s)
set +e
"$VENV/bin/python" -m pytest -v tests "$@"
rc=$?
set -e
echo "run-tests.sh: pytest finished in $(( $(date +%s) - start )) s"
exit $rc
