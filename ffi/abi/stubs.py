#!/usr/bin/env python3
"""Writes, from lagless.h, a C file that defines every declared function with its declared
signature (bodies trap) and an enum holding every LAGLESS_* constant of the header.

ffi/check-abi.sh compiles it with full debug info into a library named like liblagless.so, so
that libabigail sees the C ABI exactly as C programs see it: the functions' parameter and
return types, the layouts of the structs they take, the callbacks' signatures and the values of
the error codes and other constants. The Rust library itself carries no C type information.

    python3 ffi/abi/stubs.py include/lagless.h > abi.c
"""
import re
import sys

header = open(sys.argv[1], encoding="utf-8").read()
# Comments out, so that a prototype quoted in a comment is not taken for a declaration.
code = re.sub(r"/\*.*?\*/", "", header, flags=re.S)
code = re.sub(r"//[^\n]*", "", code)

prototypes = re.findall(r"^([A-Za-z_][\w \t*]*?\b(lagless_\w+))\(([^;{}]*)\);", code, flags=re.M)
if not prototypes:
    sys.exit("stubs.py: no lagless_* function declarations found")
constants = re.findall(r"^#define (LAGLESS_\w+) (-?(?:0x[0-9A-Fa-f]+|\d+))[uUlL]*\s*$", code, flags=re.M)
# The release numbers change with every release without changing the ABI.
constants = [c for c in constants if not c[0].startswith("LAGLESS_VERSION_")]

out = ['#include "lagless.h"', ""]
for head, name, params in prototypes:
    out.append(f"{head}({params}) {{ __builtin_trap(); }}")
out.append("")
out.append("/* The header's constants, as enumerators so that their values are part of the ABI dump. */")
out.append("enum lagless_abi_constants {")
out += [f"    LAGLESS_ABI_{name} = {name}," for name, _ in constants]
out.append("};")
out.append("enum lagless_abi_constants lagless_abi_constants_anchor(enum lagless_abi_constants c) { return c; }")
print("\n".join(out))
print(f"stubs.py: {len(prototypes)} functions, {len(constants)} constants", file=sys.stderr)
