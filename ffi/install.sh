#!/usr/bin/env bash
# Installs the C library under PREFIX:
#   PREFIX/lib/liblagless.so.X.Y.Z (+ liblagless.so.0, liblagless.so), PREFIX/lib/liblagless.a,
#   PREFIX/include/lagless.h, PREFIX/lib/pkgconfig/lagless.pc
# after which `cc app.c $(pkg-config --cflags --libs lagless)` works with
# PKG_CONFIG_PATH=PREFIX/lib/pkgconfig (and LD_LIBRARY_PATH=PREFIX/lib to run, unless PREFIX/lib
# is a system library directory).
#   ffi/install.sh PREFIX            builds the release library first
#   LAGLESS_NO_BUILD=1 ffi/install.sh PREFIX   installs what target/release holds
set -euo pipefail
prefix="${1:?usage: ffi/install.sh PREFIX}"
cd "$(dirname "$0")/.."
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
target="${CARGO_TARGET_DIR:-target}/release"
if [[ "${LAGLESS_NO_BUILD:-0}" != 1 ]]; then
  cargo build --release -p lagless-ffi
fi
install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0755 "$target/liblagless.so" "$prefix/lib/liblagless.so.$version"
ln -sf "liblagless.so.$version" "$prefix/lib/liblagless.so.0"
ln -sf "liblagless.so.0" "$prefix/lib/liblagless.so"
install -m 0644 "$target/liblagless.a" "$prefix/lib/liblagless.a"
install -m 0644 include/lagless.h "$prefix/include/lagless.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" ffi/lagless.pc.in > "$prefix/lib/pkgconfig/lagless.pc"
echo "installed lagless $version under $prefix"
