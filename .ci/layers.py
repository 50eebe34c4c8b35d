#!/usr/bin/env python3
"""The import graph of core/src: imports that point up a layer, and circles of files.

    python3 .ci/layers.py [--paths] [--tests] [--skip group,consumer,producer] [--edges] [core/src]
    python3 .ci/layers.py --check [core/src]

Each file is a node. Every path of a `use crate::`, `use super::`, `use self::` statement (and of
a `use child::` naming a child module) is resolved to the file that defines its target: walk the
module files segment by segment; a segment that is no module file is looked up among the `pub
use` re-exports of the file reached (so `crate::Config` is config/mod.rs), else the item is
defined in that file. `--paths` also counts `crate::a::b` / `super::a` paths written in code.
Uses inside `#[cfg(test)]` modules are left out unless `--tests`: inline `mod tests { .. }` and
whole files declared `#[cfg(test)] mod x;` by their parent (with `#[path = ".."]` too: such a
file is the module its parent names, so metrics_tests.rs is `metrics::tests`).

Upward import: from a file whose top-level module is lower in LAYERS to one that is higher.
Circles: strongly connected components of more than one file; counted twice, with every edge
and without the edges between a file and its own parent module (mod.rs re-exporting a child,
a child using `super::` items), which is how Rust modules are usually written.
`--skip` leaves files of those top-level modules out of the upward count.

`--check` is the CI's step (.ci/run, fast tier): it prints every upward import of every file
(`#[cfg(test)]` code left out, `--skip` ignored) and every circle of files that remains without
the parent <-> child module edges, and exits 1 if there is any, or if a top-level module is
missing from LAYERS. Circles through a parent module (mod.rs and its children) do not fail it.
"""
import os
import re
import sys
from collections import defaultdict

# Bottom-up. `lib` is the crate root's facade (its `pub use` lines re-export every layer).
LAYERS = (
    "types error sync secret log metrics metrics_tests backoff engine buffers sasl security recovery config protocol "
    "net cluster telemetry offsets admin producer fetch group consumer listener lib aio"
).split()

args = sys.argv[1:]
PATHS = "--paths" in args
TESTS = "--tests" in args
EDGES = "--edges" in args
CHECK = "--check" in args
SKIP = set()
if "--skip" in args:
    SKIP = set(args[args.index("--skip") + 1].split(","))
if CHECK:
    SKIP = set()  # every file counts
rest = [
    a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--skip")
]
ROOT = rest[0] if rest else "core/src"


def strip(src, strings=False):
    """The source without comments, strings (unless `strings`) and char literals (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
            continue
        m = re.match(r'b?r(#*)"', src[i : i + 10])
        if m and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(src[i:j] if strings else '""' + "\n" * src.count("\n", i, j))
            i = j
            continue
        c = src[i]
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(src[i : j + 1] if strings else '""' + "\n" * src.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|[^\\'])'", src[i : i + 12])
            if m:
                out.append("' '")
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


files = {}  # module path -> file
for d, _, fs in os.walk(ROOT):
    for f in fs:
        # no_tls.rs is `#[path]`-mounted as the `tls` module when the `tls` feature is off.
        if not f.endswith(".rs") or f == "no_tls.rs":
            continue
        rel = os.path.relpath(os.path.join(d, f), ROOT)
        parts = rel[:-3].split(os.sep)
        if parts[-1] in ("mod", "lib"):
            parts = parts[:-1]
        files[tuple(parts)] = rel
mod_of = {v: k for k, v in files.items()}

# `mod x;` declarations with their attributes: a `#[path]` one mounts its file under the
# declaring module, and a `#[cfg(test)]` one makes its whole file test code.
DECL = re.compile(r"((?:#\[[^\[\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
PATH_ATTR = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')
test_files = set()
for rel in sorted(mod_of):
    here = os.path.dirname(rel)
    own = here if os.path.basename(rel) in ("mod.rs", "lib.rs") else rel[:-3]
    for m in DECL.finditer(strip(open(os.path.join(ROOT, rel)).read(), strings=True)):
        attrs, name = m.group(1), m.group(2)
        p = PATH_ATTR.search(attrs)
        if p:
            target = os.path.normpath(os.path.join(here, p.group(1)))
        else:
            target = next(
                (t for t in (os.path.join(own, name + ".rs"), os.path.join(own, name, "mod.rs"))
                 if t in mod_of),
                None,
            )
        if target not in mod_of:
            continue  # no_tls.rs, or a module of another configuration
        if p:
            del files[mod_of[target]]
            files[mod_of[rel] + (name,)] = target
        if "#[cfg(test)]" in attrs:
            test_files.add(target)
mod_of = {v: k for k, v in files.items()}


def expand(tree):
    """'a::{b, c::{d, self}}' -> [[a, b], [a, c, d], [a, c]]"""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += (ch == "{") - (ch == "}")
            cur += ch
        return parts + [cur] if cur else parts

    def rec(s):
        if "{" not in s:
            return [[x for x in s.split("::") if x]]
        k = s.index("{")
        prefix = [x for x in s[:k].split("::") if x]
        return [
            prefix + ([] if r == ["self"] else r)
            for p in split_top(s[k + 1 : s.rindex("}")])
            for r in rec(p)
        ]

    return rec(tree)


TOKENS = re.compile(
    r"#\[cfg\(test\)\]|\bmod\s+\w+\s*\{"
    r"|(?<![\w.])(?:pub(?:\([^)]*\))?\s+)?use\s+[^;]+;"
    r"|(?<![\w:])(?:crate|super)(?:::\w+)+|[{}]"
)
USE = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")


def parse(rel):
    """(path segments, in a test module, is a `pub use`, inline modules deep) of each use."""
    src = strip(open(os.path.join(ROOT, rel)).read())
    uses, depth, inline, pending_test = [], 0, [], False
    for t in TOKENS.finditer(src):
        s = t.group(0)
        test = pending_test or any(x[1] for x in inline)
        if s == "#[cfg(test)]":
            pending_test = True
        elif s.startswith("mod"):
            depth += 1
            inline.append((depth, test))
            pending_test = False
        elif s == "{":
            depth += 1
            pending_test = False
        elif s == "}":
            if inline and inline[-1][0] == depth:
                inline.pop()
            depth -= 1
        elif s.startswith(("crate::", "super::")):
            if PATHS:
                uses.append((s.split("::"), test, False, len(inline)))
        else:
            pending_test = False
            for p in expand(USE.match(s).group(1)):
                uses.append((p, test, s.startswith("pub"), len(inline)))
    return uses


parsed = {rel: parse(rel) for rel in files.values()}
for rel in test_files:
    parsed[rel] = [(segs, True, is_pub, depth) for segs, _, is_pub, depth in parsed[rel]]


def absolute(rel, segs, inline_depth):
    """The path from the crate root, or None for another crate's."""
    base, s = list(mod_of[rel]), list(segs)
    if s[0] == "crate":
        return s[1:]
    if s[0] == "self":
        return base + s[1:] if inline_depth == 0 else None
    if s[0] == "super":
        while s and s[0] == "super":
            if inline_depth > 0:
                inline_depth -= 1  # out of an inline module first
            else:
                base = base[:-1]
            s = s[1:]
        return base + s
    if inline_depth == 0 and tuple(base + [s[0]]) in files:
        return base + s  # a child module, named without `self::`
    return None


exports = defaultdict(dict)
for rel, uses in parsed.items():
    for segs, test, is_pub, depth in uses:
        a = absolute(rel, segs, depth) if is_pub and not test and depth == 0 else None
        if a:
            exports[rel][a[-1]] = a


def resolve(segs, hops=0):
    mod, i = (), 0
    while i < len(segs):
        if mod + (segs[i],) in files:
            mod += (segs[i],)
            i += 1
            continue
        rel = files[mod]
        if segs[i] in exports[rel] and hops < 8:
            return resolve(exports[rel][segs[i]] + segs[i + 1 :], hops + 1)
        break
    return files[mod]


edges = defaultdict(lambda: defaultdict(set))  # file -> file -> paths
for rel, uses in parsed.items():
    for segs, test, _, depth in uses:
        a = None if test and not TESTS else absolute(rel, segs, depth)
        if a is None:
            continue
        a = [x for x in a if x != "*"]
        tgt = resolve(a)
        if tgt != rel:
            edges[rel][tgt].add("::".join(segs))


def layer(rel):
    return mod_of[rel][0] if mod_of[rel] else "lib"


unlisted = sorted(rel for rel in files.values() if layer(rel) not in LAYERS)
for rel in unlisted:
    print(f"{rel}: its top-level module `{layer(rel)}` is not in LAYERS (.ci/layers.py)")
if unlisted:
    sys.exit(1)


def up(a, b):
    return layer(a) != layer(b) and LAYERS.index(layer(a)) < LAYERS.index(layer(b))


ups = sorted((a, b) for a in edges for b in edges[a] if up(a, b) and layer(a) not in SKIP)
label = f" (from outside {','.join(sorted(SKIP))})" if SKIP else ""
every = sum(1 for a in edges for b in edges[a] if up(a, b))
print(f"upward imports{label}: {len(ups)} (every file: {every})")
for a, b in ups:
    print(f"  {a} -> {b}: {', '.join(sorted(edges[a][b]))}")
if CHECK and ups:
    print("--check failed: move each imported item down to a layer at or below its importer's")
    print("(LAYERS in .ci/layers.py is bottom-up)")
    sys.exit(1)


def circles(graph):
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(files.values()):
        if v not in index:
            visit(v)
    return sorted(out, key=lambda c: (len(c), c))


def parent_edge(a, b):
    return mod_of[a][:-1] == mod_of[b] or mod_of[b][:-1] == mod_of[a]


for title, graph in (
    ("circles, every edge", {a: set(bs) for a, bs in edges.items()}),
    (
        "circles, without parent <-> child module edges",
        {a: {b for b in bs if not parent_edge(a, b)} for a, bs in edges.items()},
    ),
):
    found = circles(graph)
    print(f"{title}: {len(found)}")
    for c in found:
        print(f"  [{len(c)}] {' '.join(c)}")
        if EDGES or (CHECK and graph is not None and title.startswith("circles, without")):
            for a in c:
                for b in sorted(graph.get(a, ())):
                    if b in c:
                        print(f"      {a} -> {b}: {', '.join(sorted(edges[a][b]))}")
    sibling_circles = found
if CHECK and sibling_circles:
    print("--check failed: files that import each other (not through a parent module) form the")
    print("circles above; move what both need into a file that imports neither")
    sys.exit(1)
