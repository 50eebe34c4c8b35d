#!/usr/bin/env bash
# Holds liblagless.so to the committed ABI baseline of its soname (ffi/abi/<soname>.abi):
# fails when a function is removed, a signature or a struct passed across the ABI changes, or
# a constant (error code, ...) changes value, unless the soname changes with it. Adding
# functions, struct-free enum values and constants is compatible and passes.
#
#   ffi/check-abi.sh [LIB]            check LIB (default target/release/liblagless.so)
#   ffi/check-abi.sh --update [LIB]   write the baseline from the current header: run it after
#                                     adding exports (or with a new soname) and commit the result
#
# How: the Rust library carries no C type information, so the ABI is read from what C programs
# compile against, the header (checked against ffi/src by check-header.sh): ffi/abi/stubs.py
# defines every declared function with its declared signature, gcc compiles that with debug
# info under the library's soname, and libabigail (abidw, abidiff) dumps and compares it. The
# library's own dynamic symbols must be exactly the header's functions, so the two agree.
set -euo pipefail
cd "$(dirname "$0")/.."
update=0
if [[ "${1:-}" == "--update" ]]; then update=1; shift; fi
lib="${1:-${CARGO_TARGET_DIR:-target}/release/liblagless.so}"
for tool in abidw abidiff readelf nm cc; do
  command -v "$tool" >/dev/null || { echo "check-abi.sh: $tool not found (apt-get install abigail-tools binutils gcc)" >&2; exit 2; }
done
soname="$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
[[ -n "$soname" ]] || { echo "check-abi.sh: $lib has no soname" >&2; exit 1; }
baseline="ffi/abi/$soname.abi"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 ffi/abi/stubs.py include/lagless.h > "$work/abi.c"
cc -g -O0 -shared -fPIC -Iinclude -Wl,-soname,"$soname" -o "$work/$soname" "$work/abi.c"

# The library exports exactly the header's functions (the stubs add one anchor of their own).
nm -D --defined-only "$lib" | awk '{print $3}' | sort > "$work/lib.syms"
nm -D --defined-only "$work/$soname" | awk '{print $3}' | grep -v '^lagless_abi_' | sort > "$work/header.syms"
if ! diff -u "$work/header.syms" "$work/lib.syms" > "$work/syms.diff"; then
  echo "check-abi.sh: the library's exports and lagless.h's functions differ (- header, + library):" >&2
  grep '^[-+]l' "$work/syms.diff" >&2
  exit 1
fi

abidw --no-corpus-path --no-comp-dir-path --no-show-locs --no-architecture \
  --out-file "$work/current.abi" "$work/$soname"
if [[ $update == 1 ]]; then
  mkdir -p ffi/abi
  cp "$work/current.abi" "$baseline"
  echo "check-abi.sh: wrote $baseline ($(wc -l < "$work/lib.syms") functions); commit it"
  exit 0
fi
if [[ ! -f "$baseline" ]]; then
  echo "check-abi.sh: no baseline $baseline for soname $soname: a new soname starts a new ABI;" \
       "run ffi/check-abi.sh --update and commit $baseline" >&2
  exit 1
fi
# Added functions are compatible; anything else abidiff reports is not. Its exit code is a bit
# set: 4 (ABI change) and 8 (incompatible change) fail here, with its report.
set +e
abidiff --no-added-syms --no-show-locs "$baseline" "$work/current.abi" > "$work/report" 2>&1
rc=$?
set -e
if [[ $rc != 0 ]]; then
  cat "$work/report" >&2
  echo "check-abi.sh: $soname is not compatible with $baseline (abidiff exit $rc)." \
       "Keep the old signatures, or change the soname in ffi/build.rs (and run --update)." >&2
  exit 1
fi
echo "check-abi.sh: $soname is compatible with $baseline ($(wc -l < "$work/lib.syms") exports)"
