#!/usr/bin/env bash
# Builds the wheel users install: abi3 (CPython >= 3.9), manylinux2014 x86_64 (glibc 2.17, so
# RHEL 7/8, Amazon Linux 2, Debian 11 and Ubuntu 20.04 take it), linked with zig from PyPI so
# that no old-glibc build image is needed. Then it checks the wheel (tags, files, what
# auditwheel would check: no symbol newer than glibc 2.17), installs it into a fresh virtualenv
# that has nothing else and no way to compile (pip --only-binary), imports it there and, when
# LAGLESS_BOOTSTRAP is set, runs examples/python/demo.py and async_demo.py (lagless.aio) against
# that broker. Last, the sdist: it must carry every file cargo needs to resolve the build offline.
#
#   bindings/python/check-wheel.sh                 wheel in a temporary directory
#   LAGLESS_WHEEL_DIR=DIR bindings/python/check-wheel.sh   keeps the wheel in DIR (tests/suites
#                                                  installs it for the pytest suite: one build)
#   LAGLESS_WHEEL_BUILD_ONLY=1 bindings/python/check-wheel.sh   builds the wheel, checks nothing
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
# maturin 1.9+ writes the PEP 639 license fields; ziglang is zig itself, as a PyPI package.
command -v maturin >/dev/null || "$PYTHON" -m pip install --quiet "maturin>=1.9,<2"
"$PYTHON" -c 'import ziglang' 2>/dev/null || "$PYTHON" -m pip install --quiet "ziglang>=0.13,<0.18"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="${LAGLESS_WHEEL_DIR:-$work/wheel}"
mkdir -p "$out"
rm -f "$out"/lagless-*.whl
start=$(date +%s)
# --target names the host triple explicitly so that the build directory stays the same between
# runs (bindings/python/target/x86_64-unknown-linux-gnu) and later builds are incremental.
maturin build --release --zig --compatibility manylinux2014 --target x86_64-unknown-linux-gnu \
    --manifest-path "$here/Cargo.toml" --out "$out"
wheel="$(ls "$out"/lagless-*.whl)"
echo "check-wheel.sh: built $(basename "$wheel") in $(( $(date +%s) - start )) s, $(du -k "$wheel" | cut -f1) KiB"
# LAGLESS_WHEEL_BUILD_ONLY=1: the build alone (.ci/run starts one early, so that the wheel suite's
# build, the same command on the same target directory, finds it done).
[[ -n "${LAGLESS_WHEEL_BUILD_ONLY:-}" ]] && exit 0
case "$(basename "$wheel")" in
    *-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl | *-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl) ;;
    *) echo "check-wheel.sh: not an abi3 manylinux2014 x86_64 wheel" >&2; exit 1 ;;
esac
# The wheel's files and metadata; and the newest glibc symbol version the extension needs
# (what auditwheel checks for the manylinux2014 tag: at most GLIBC_2.17).
"$PYTHON" - "$wheel" "$work" <<'PY'
import re, subprocess, sys, zipfile
wheel, work = sys.argv[1], sys.argv[2]
z = zipfile.ZipFile(wheel)
names = set(z.namelist())
missing = [f for f in ("lagless/py.typed", "lagless/_lagless.pyi", "lagless/__init__.py") if f not in names]
if missing:
    sys.exit(f"check-wheel.sh: missing from the wheel: {', '.join(missing)}")
meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
for field in ("License-Expression: Apache-2.0", "License-File: LICENSE", "Project-URL: Repository",
              "Classifier: Typing :: Typed", "Requires-Python: >=3.9", "Description-Content-Type: text/markdown"):
    if field not in meta:
        sys.exit(f"check-wheel.sh: the wheel's METADATA lacks {field!r}")
# The command-line tool, as a console script run inside the extension module.
entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
scripts = {line.replace(" ", "") for line in entry_points.splitlines()}
if "lagless=lagless._cli:main" not in scripts or "lagless/_cli.py" not in names:
    sys.exit("check-wheel.sh: the wheel does not install the `lagless` console script")
if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
    sys.exit("check-wheel.sh: the licence file is not in the wheel")
so = next(n for n in names if n.startswith("lagless/_lagless") and n.endswith(".so"))
path = z.extract(so, work)
symbols = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, check=True).stdout
versions = {tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", symbols)}
newest = max(versions)
if newest > (2, 17):
    sys.exit(f"check-wheel.sh: the extension needs GLIBC_{'.'.join(map(str, newest))}, newer than manylinux2014's 2.17")
print(f"check-wheel.sh: newest glibc symbol the extension needs: GLIBC_{'.'.join(map(str, newest))}")
PY

venv="$work/venv"
"$PYTHON" -m venv "$venv"
# --only-binary :all: and --no-index: the install cannot fall back to building from source.
"$venv/bin/python" -m pip install --quiet --no-index --only-binary :all: "$wheel"
"$venv/bin/python" - <<'PY'
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
if [[ -n "${LAGLESS_BOOTSTRAP:-}" ]]; then
    (cd "$work" && "$venv/bin/python" "$root/examples/python/demo.py")
    echo "check-wheel.sh: examples/python/demo.py ran from the installed wheel"
    (cd "$work" && "$venv/bin/python" "$root/examples/python/async_demo.py")
    echo "check-wheel.sh: examples/python/async_demo.py ran from the installed wheel"
fi

# The sdist: maturin copies the core and its path dependency (lagless-kafka-protocol) into it;
# cargo must be able to resolve the whole build from its files alone, offline, with the committed
# lock file.
maturin sdist --manifest-path "$here/Cargo.toml" --out "$work/sdist" >/dev/null
sdist="$(ls "$work"/sdist/lagless-*.tar.gz)"
tar xzf "$sdist" -C "$work/sdist"
cargo metadata --format-version 1 --offline --locked \
    --manifest-path "$work/sdist/$(basename "$sdist" .tar.gz)/bindings/python/Cargo.toml" >/dev/null
echo "check-wheel.sh: $(basename "$sdist") ($(du -k "$sdist" | cut -f1) KiB) resolves offline from its own files"
