#!/usr/bin/env bash
# Regenerates include/lagless.h from ffi/src with the pinned cbindgen.
#   ffi/gen-header.sh            write include/lagless.h
#   ffi/gen-header.sh -o FILE    write FILE instead (check-header.sh uses this)
set -euo pipefail
CBINDGEN_VERSION=0.27.0
cd "$(dirname "$0")/.."
out=include/lagless.h
if [[ "${1:-}" == "-o" ]]; then out="$2"; fi
if ! command -v cbindgen >/dev/null || [[ "$(cbindgen --version)" != "cbindgen $CBINDGEN_VERSION" ]]; then
  echo "installing cbindgen $CBINDGEN_VERSION" >&2
  cargo install cbindgen --version "$CBINDGEN_VERSION" --locked >&2
fi
mkdir -p "$(dirname "$out")"
cbindgen --quiet --config ffi/cbindgen.toml --crate lagless-ffi --output "$out" ffi
