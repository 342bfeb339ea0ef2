#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The layering of the source tree, checked from the sources.

- A pure protocol core (`drivers/.../proto/`) compiles in the kernel and on the host: it uses
  only `core` and its own modules (`super::`), never `kernel::`, `crate::`, `std::`, `alloc::`
  or `bindings::`.
- The kernel crate's Rust (`rust/kernel/`) includes nothing from `drivers/` or `samples/`.
- The modules of a driver, and those of a protocol core, depend on each other without cycles:
  a module's dependencies are the modules its code names (`crate::x` in a driver, `super::x` in
  a protocol core); a child module (`qp/context.rs`) counts as its parent (`qp`). Doc comments
  and comments do not count.

Prints each violation and exits 1 if there is any; prints a one-line summary otherwise.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Drivers whose module graph is checked: directory, crate root file.
DRIVERS = [
    ("drivers/infiniband/sw/rsiw", "rsiw.rs"),
    ("drivers/infiniband/ulp/rpcrdma2", "rpcrdma2.rs"),
]
# Protocol cores: directory, module file (the core's root in the kernel build).
PROTO_CORES = [
    ("drivers/infiniband/sw/rsiw/proto", "drivers/infiniband/sw/rsiw/proto.rs"),
    ("drivers/infiniband/ulp/rpcrdma2/proto", "drivers/infiniband/ulp/rpcrdma2/proto.rs"),
]
FORBIDDEN_IN_PROTO = re.compile(r"\b(kernel|crate|std|alloc|bindings)::")


def code_of(text):
    """The text without comments, doc comments and string literals."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    out = []
    for line in text.splitlines():
        line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
        cut = line.find("//")
        out.append(line if cut < 0 else line[:cut])
    return "\n".join(out)


def named_modules(code, prefix):
    """The first path segments after `prefix::`, including `prefix::{a, b::c}` groups."""
    names = set()
    for m in re.finditer(re.escape(prefix) + r"::", code):
        rest = code[m.end():]
        rest = rest.lstrip()
        if rest.startswith("{"):
            depth, items, cur = 0, [], ""
            for ch in rest:
                if ch == "{":
                    depth += 1
                    if depth == 1:
                        continue
                elif ch == "}":
                    depth -= 1
                    if depth == 0:
                        items.append(cur)
                        break
                if depth == 1 and ch == ",":
                    items.append(cur)
                    cur = ""
                else:
                    cur += ch
            for item in items:
                word = re.match(r"\s*([a-z_][a-z0-9_]*)", item)
                if word and word.group(1) not in ("self", "super", "crate"):
                    names.add(word.group(1))
        else:
            word = re.match(r"([a-z_][a-z0-9_]*)", rest)
            if word:
                names.add(word.group(1))
    return names


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def module_files(directory, skip):
    """(module name, file) for the .rs files of `directory` and its child directories."""
    for dirpath, _, files in os.walk(directory):
        rel = os.path.relpath(dirpath, directory)
        for f in sorted(files):
            if not f.endswith(".rs") or f in skip:
                continue
            top = f[:-3] if rel == "." else rel.split(os.sep)[0]
            yield top, os.path.join(dirpath, f)


def check_driver(directory, root, problems):
    path = os.path.join(ROOT, directory)
    if not os.path.isdir(path):
        return 0
    graph = {}
    skip = {root}
    for name, f in module_files(path, skip):
        # KUnit crates and the protocol core (checked on its own) are not driver modules.
        if name.endswith("_kunit") or name == "proto":
            continue
        code = code_of(open(f, encoding="utf-8").read())
        deps = named_modules(code, "crate") - {name, "proto"}
        graph.setdefault(name, set()).update(deps)
    known = set(graph)
    for name in graph:
        graph[name] &= known
    for comp in cycles(graph):
        problems.append(f"{directory}: modules depend on each other in a cycle: {', '.join(comp)}")
    return len(graph)


def check_proto(directory, root_file, problems):
    path = os.path.join(ROOT, directory)
    if not os.path.isdir(path):
        return 0
    graph = {}
    files = list(module_files(path, set()))
    files.append(("", os.path.join(ROOT, root_file)))
    for name, f in files:
        code = code_of(open(f, encoding="utf-8").read())
        for m in FORBIDDEN_IN_PROTO.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            problems.append(f"{os.path.relpath(f, ROOT)}:{line}: a protocol core uses {m.group(0)}")
        if name:
            deps = named_modules(code, "super") - {name}
            graph.setdefault(name, set()).update(deps)
    known = set(graph)
    for name in graph:
        graph[name] &= known
    for comp in cycles(graph):
        problems.append(f"{directory}: modules depend on each other in a cycle: {', '.join(comp)}")
    return len(graph)


def check_kernel_crate(problems):
    base = os.path.join(ROOT, "rust")
    count = 0
    for dirpath, _, files in os.walk(base):
        for f in files:
            if not f.endswith((".rs", ".c", ".h")):
                continue
            count += 1
            full = os.path.join(dirpath, f)
            text = open(full, encoding="utf-8").read()
            for m in re.finditer(r'(#\[path\s*=\s*"[^"]*"|#include\s*[<"][^>"]*[>"]|include!\([^)]*\))', text):
                if re.search(r"drivers/|samples/", m.group(0)):
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{os.path.relpath(full, ROOT)}:{line}: the kernel crate includes {m.group(0)}")
    return count


def main():
    problems = []
    drivers = sum(check_driver(d, r, problems) for d, r in DRIVERS)
    cores = sum(check_proto(d, r, problems) for d, r in PROTO_CORES)
    kernel = check_kernel_crate(problems)
    for p in problems:
        print("layering: " + p)
    if problems:
        return 1
    print(f"layering: {drivers} driver modules and {cores} protocol-core modules without cycles, "
          f"protocol cores on core only, {kernel} kernel-crate files including no driver")
    return 0


if __name__ == "__main__":
    sys.exit(main())
