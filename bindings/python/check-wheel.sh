#!/usr/bin/env bash
# Builds the abi3 wheel with maturin and installs it into a fresh virtualenv that has nothing
# else, then imports it there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PYTHON="${PYTHON:-python3}"
command -v maturin >/dev/null || "$PYTHON" -m pip install --quiet "maturin>=1.5,<2"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
maturin build --release --manifest-path "$here/Cargo.toml" --out "$out"
wheel="$(ls "$out"/lagless-*.whl)"
echo "check-wheel.sh: built $(basename "$wheel")"
case "$(basename "$wheel")" in
    *-abi3-*) ;;
    *) echo "check-wheel.sh: not an abi3 wheel" >&2; exit 1 ;;
esac
# Read the wheel's file list in Python: `zipfile -l | grep -q` lets grep close the pipe early,
# and under pipefail the listing's broken pipe would read as a missing file.
"$PYTHON" - "$wheel" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
missing = [f for f in ("lagless/py.typed", "lagless/_lagless.pyi", "lagless/__init__.py") if f not in names]
if missing:
    sys.exit(f"check-wheel.sh: missing from the wheel: {', '.join(missing)}")
PY
rm -rf /tmp/x
"$PYTHON" -m venv /tmp/x
/tmp/x/bin/python -m pip install --quiet --no-index "$wheel"
/tmp/x/bin/python - <<'PY'
import lagless
tp = lagless.TopicPartition("t", 0)
try:
    lagless.Consumer({"no.such.key": "1"})
except lagless.ConfigError as e:
    assert e.key == "no.such.key", e.key
else:
    raise SystemExit("expected ConfigError")
print("check-wheel.sh: lagless", lagless.__version__, "imports in a fresh virtualenv:", tp)
PY
