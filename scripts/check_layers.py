#!/usr/bin/env python3
"""Checks kiln's layering: no include or call runs up a layer, and no cycle
joins files of different families.

    scripts/check_layers.py BUILD_DIR [--graph]

Edges come from two places: every `#include "..."` in the sources (resolved
against the including file's folder, then src/ and include/), and every
symbol an object file of BUILD_DIR uses that another object file defines
(nm).  A file belongs to the layer of its folder (LAYERS below, lowest
first: a file may use its own layer and the ones before it) and to a family:
a .c file and the .h of the same stem are one module, and the modules of one
family folder (FAMILY_DIRS) are one family.  Within a layer, modules of
different families may depend on each other only one way: a cycle between
them is reported with the files and symbols that close it.

docs/ARCHITECTURE.md describes the layers; this table is their source of
truth.  Exit status: 0 clean, 1 violations (listed), 2 usage.
"""
import os
import re
import subprocess
import sys
from collections import defaultdict

# (layer, folders): lowest first.  A folder not listed here is an error, so
# a new folder must be placed deliberately.
LAYERS = [
    ("trace", ["src/trace", "include/kiln_trace.h"]),
    ("core", ["src/core", "include"]),
    ("kernels", ["src/kernels"]),
    ("ir", ["src/ir"]),
    ("quant", ["src/quant"]),
    ("onnx", ["src/onnx"]),
    ("ops", ["src/ops"]),
    ("tactics", ["src/tactics"]),
    ("cost", ["src/cost"]),
    ("passes", ["src/passes"]),
    ("plan", ["src/plan"]),
    ("engine", ["src/engine"]),
    ("builder", ["src/builder"]),
    ("tools", ["tools", "serve"]),
]
# Folders whose files together form one family (each subfolder of these is
# one family too): kernels per family folder, the tactics per op family, the
# server, each tool.
FAMILY_DIRS = ["src/kernels", "src/tactics", "serve", "tools/loadgen"]
# Folders whose modules are a single family.
ONE_FAMILY = ["src/trace"]
# Folders where a family is the first word of a file's name: conv.c and
# conv_lowp.c are the conv family, gemm_tactic.c and gemm_lowp.c the gemm
# one, fuse_act.c and fuse_norm.c the fusion passes, exec.c, exec_prepare.c
# and exec_run.c the executor.
WORD_FAMILY = ["src/ops", "src/passes", "src/engine"]

SRC_EXT = (".c", ".h", ".inc")


def layer_of(path):
    for i, (name, dirs) in enumerate(LAYERS):
        for d in dirs:
            if path == d or path.startswith(d + "/"):
                return i
    return None


def module_of(path):
    stem, _ = os.path.splitext(path)
    return stem


def family_of(path):
    for d in ONE_FAMILY:
        if path.startswith(d + "/"):
            return d
    for d in WORD_FAMILY:
        if path.startswith(d + "/") and "/" not in path[len(d) + 1:]:
            return d + "/" + os.path.basename(path).split("_")[0].split(".")[0]
    for d in FAMILY_DIRS:
        if path.startswith(d + "/"):
            rest = path[len(d) + 1:]
            if "/" in rest:
                return d + "/" + rest.split("/")[0]
            return d
    return module_of(path)


def sources(root):
    out = []
    for top in ("src", "include", "tools", "serve"):
        for dp, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith(SRC_EXT):
                    out.append(os.path.relpath(os.path.join(dp, f), root))
    return sorted(out)


INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_edges(root, files):
    fileset = set(files)
    edges = defaultdict(set)  # (a, b) -> reasons
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for inc in INC.findall(text):
            for base in (os.path.dirname(f), "src", "include"):
                cand = os.path.normpath(os.path.join(base, inc))
                if cand in fileset:
                    if cand != f:
                        edges[(f, cand)].add("#include")
                    break
    return edges


def objects(build, root):
    """(source path, object path) for every object file built from the tree."""
    out = []
    cmf = os.path.join(build, "CMakeFiles")
    for dp, _, files in os.walk(build):
        for f in files:
            if not f.endswith(".c.o"):
                continue
            o = os.path.join(dp, f)
            rel = os.path.relpath(o, build)
            m = re.search(r"\.dir/(.*)\.o$", rel)
            if not m:
                continue
            src = m.group(1)
            if os.path.exists(os.path.join(root, src)):
                out.append((src, o))
    return out


def symbol_edges(build, root):
    objs = objects(build, root)
    src_of = {o: src for src, o in objs}
    defs = {}
    uses = defaultdict(set)
    # one nm for every object file (-A: each line starts with "FILE: ")
    r = subprocess.run(["nm", "-P", "-A"] + [o for _, o in objs], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        obj, _, rest = line.partition(": ")
        parts = rest.split()
        if len(parts) < 2 or obj not in src_of:
            continue
        src, sym, kind = src_of[obj], parts[0], parts[1]
        if kind == "U":
            uses[src].add(sym)
        elif kind in "TDRBCGSV":
            defs.setdefault(sym, src)
    edges = defaultdict(set)
    for src, syms in uses.items():
        for s in syms:
            d = defs.get(s)
            if d and d != src:
                edges[(src, d)].add(s)
    return edges


def sccs(nodes, adj):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(adj[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(adj[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
    return out


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    build = argv[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sources(root)
    bad = []
    for f in files:
        if layer_of(f) is None:
            bad.append(f"{f}: folder is in no layer (scripts/check_layers.py LAYERS)")
    edges = include_edges(root, files)
    for k, v in symbol_edges(build, root).items():
        edges[k] |= v
    if not any(v - {"#include"} for v in edges.values()):
        print(f"check_layers: no object files under {build}: build it first", file=sys.stderr)
        return 2
    names = [n for n, _ in LAYERS]
    for (a, b), why in sorted(edges.items()):
        la, lb = layer_of(a), layer_of(b)
        if la is None or lb is None:
            continue
        if lb > la:
            bad.append(f"{a} ({names[la]}) uses {b} ({names[lb]}), a higher layer: "
                       + ", ".join(sorted(why)[:4]))
    # cycles between families: modules as nodes, only edges inside one layer
    madj = defaultdict(set)
    mwhy = defaultdict(set)
    for (a, b), why in edges.items():
        ma, mb = module_of(a), module_of(b)
        if ma == mb or layer_of(a) != layer_of(b):
            continue
        madj[ma].add(mb)
        mwhy[(ma, mb)] |= {f"{os.path.basename(a)}->{os.path.basename(b)}: {w}" for w in why}
    mods = sorted(set(module_of(f) for f in files))
    for comp in sccs(mods, madj):
        fams = set(family_of(m) for m in comp)
        if len(fams) < 2:
            continue
        comp = sorted(comp)
        links = []
        cs = set(comp)
        for m in comp:
            for n in sorted(madj[m] & cs):
                if family_of(m) != family_of(n):
                    links.append(sorted(mwhy[(m, n)])[0])
        bad.append("cycle between families " + ", ".join(sorted(fams)) + ": "
                   + "; ".join(links[:8]) + (" ..." if len(links) > 8 else ""))
    if "--graph" in argv:
        for (a, b), why in sorted(edges.items()):
            print(f"{a} -> {b}: {', '.join(sorted(why)[:3])}")
    for b in bad:
        print(b)
    if bad:
        print(f"check_layers: {len(bad)} violation(s)", file=sys.stderr)
        return 1
    print(f"check_layers: {len(files)} files, {len(edges)} dependencies, layers and families clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
