#!/usr/bin/env python3
"""Fails if any crate has an import loop, between its top-level modules or
between the files of one folder (a family's files), and prints each crate's
graph of top-level modules. Edges are the named paths in non-test code
(`crate::x`, `crate::{x, y}`, `super::x`, `crate::family::x`); the crate
root, which lists every module by design, is left out.
Run: `python3 scripts/import-graph.py` (the core tests run it too)."""
import os, re, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates")


def code_of(path):
    text = open(path).read().split("#[cfg(test)]")[0]  # unit tests may reach anywhere
    return re.sub(r"(?m)^\s*//.*$", "", text)  # comments and docs


def names_after(prefix, text):
    names = [m.group(1) for m in re.finditer(prefix + r"(\w+)", text)]
    for group in re.finditer(prefix + r"\{([^}]*)\}", text):
        names += [w.split("::")[0].strip() for w in group.group(1).split(",")]
    return [n for n in names if n]


def loops(edges):
    state, stack, found = {}, [], []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for t in sorted(edges.get(n, ())):
            if state.get(t) == 1:
                found.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[n] = 2

    for n in sorted(edges):
        if n not in state:
            visit(n)
    return found


failed = False
for crate in sorted(os.listdir(root)):
    src = os.path.join(root, crate, "src")
    if not os.path.isdir(src):
        continue
    top_edges, file_edges = {}, {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel.removesuffix(".rs").split(os.sep)
            top = parts[0]
            if top in ("lib", "main"):
                continue
            text = code_of(os.path.join(dirpath, f))
            is_module = lambda base, n: os.path.exists(os.path.join(base, n + ".rs")) or os.path.isdir(os.path.join(base, n))
            for t in names_after(r"\bcrate::", text):
                if t != top and is_module(src, t):
                    top_edges.setdefault(top, set()).add(t)
            # the files of one folder: siblings named through super:: or crate::<folder>::
            if len(parts) == 2 and parts[1] != "mod":
                folder = os.path.join(src, top)
                me = f"{top}/{parts[1]}"
                for t in names_after(r"\bsuper::", text) + names_after(rf"\bcrate::{top}::", text):
                    if t != parts[1] and os.path.exists(os.path.join(folder, t + ".rs")):
                        file_edges.setdefault(me, set()).add(f"{top}/{t}")
    print(f"{crate}:")
    for n in sorted(top_edges):
        print(f"  {n} -> {', '.join(sorted(top_edges[n]))}")
    for cycle in loops(top_edges) + loops(file_edges):
        failed = True
        print(f"  LOOP: {' -> '.join(cycle)}")
sys.exit(1 if failed else 0)
