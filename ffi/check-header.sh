#!/usr/bin/env bash
# Fails when include/lagless.h differs from what the pinned cbindgen generates from ffi/src:
# an exported signature changed without regenerating the header (run ffi/gen-header.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bash ffi/gen-header.sh -o "$tmp/lagless.h"
if ! diff -u include/lagless.h "$tmp/lagless.h"; then
  echo "include/lagless.h is stale: run ffi/gen-header.sh and commit the result" >&2
  exit 1
fi
echo "include/lagless.h is up to date"
