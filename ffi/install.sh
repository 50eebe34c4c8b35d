#!/usr/bin/env bash
# Installs the C library under PREFIX:
#   PREFIX/lib/liblagless.so.X.Y.Z (stripped) with its links liblagless.so.0 (the soname) and
#   liblagless.so (for -llagless), PREFIX/lib/liblagless.a (debug info stripped),
#   PREFIX/include/lagless.h, PREFIX/lib/pkgconfig/lagless.pc, and the CMake package
#   PREFIX/lib/cmake/lagless (find_package(lagless): imported targets lagless::lagless, shared,
#   and lagless::lagless_static).
# Then `cc app.c $(pkg-config --cflags --libs lagless)` works with
# PKG_CONFIG_PATH=PREFIX/lib/pkgconfig, and CMake with -DCMAKE_PREFIX_PATH=PREFIX (to run, add
# LD_LIBRARY_PATH=PREFIX/lib unless PREFIX/lib is a system library directory; CMake builds
# carry the path in their build-tree rpath).
#   ffi/install.sh PREFIX                      builds the release library first
#   LAGLESS_NO_BUILD=1 ffi/install.sh PREFIX   installs what target/release holds
#   LAGLESS_NO_STRIP=1 ffi/install.sh PREFIX   keeps the debug info (for profiling)
set -euo pipefail
prefix="${1:?usage: ffi/install.sh PREFIX}"
cd "$(dirname "$0")/.."
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
major="${version%%.*}"
target="${CARGO_TARGET_DIR:-target}/release"
if [[ "${LAGLESS_NO_BUILD:-0}" != 1 ]]; then
  cargo build --release -p lagless-ffi
fi
lib="$prefix/lib"
install -d "$lib/pkgconfig" "$lib/cmake/lagless" "$prefix/include"
install -m 0755 "$target/liblagless.so" "$lib/liblagless.so.$version"
install -m 0644 "$target/liblagless.a" "$lib/liblagless.a"
if [[ "${LAGLESS_NO_STRIP:-0}" != 1 ]]; then
  # The release profile keeps debug info for profiling: tens of MB nobody linking needs.
  # --strip-unneeded keeps the dynamic symbol table; --strip-debug keeps what linking needs.
  strip --strip-unneeded "$lib/liblagless.so.$version"
  strip --strip-debug "$lib/liblagless.a"
fi
ln -sf "liblagless.so.$version" "$lib/liblagless.so.$major"
ln -sf "liblagless.so.$major" "$lib/liblagless.so"
install -m 0644 include/lagless.h "$prefix/include/lagless.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" ffi/lagless.pc.in > "$lib/pkgconfig/lagless.pc"
sed -e "s|@VERSION@|$version|g" -e "s|@MAJOR@|$major|g" ffi/lagless-config.cmake.in \
  > "$lib/cmake/lagless/lagless-config.cmake"
sed -e "s|@VERSION@|$version|g" ffi/lagless-config-version.cmake.in \
  > "$lib/cmake/lagless/lagless-config-version.cmake"
echo "installed lagless $version under $prefix"
