#!/usr/bin/env python3
"""Per-call overhead of kiln's Python binding over the C API (issue 11 wants < 20 us).

    KILN_PREFIX=build/python/prefix build/python/venv/bin/python bench/python_overhead.py \
        [--runs 20000] [--rounds 7] [MODEL ...]

For each model (default: tests/data/patterns/hardswish_hardsigmoid.onnx, one step on a
4x16 tensor, and models/tinycnn/model.onnx at batch 1), on one thread and the same
inputs: a C loop of kn_context_set_input + kn_context_run (bench/python_overhead.c,
compiled here against KILN_PREFIX's libkiln with pkg-config), a Python loop of
Engine.run(feed) and one of InferenceSession.run(None, feed).  Prints the median over
the rounds of microseconds per call and the difference to C."""
import argparse
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT = [ROOT / "tests" / "data" / "patterns" / "hardswish_hardsigmoid.onnx",
           ROOT / "models" / "tinycnn" / "model.onnx"]


def compile_c(tmp):
    env = dict(os.environ)
    prefix = os.environ.get("KILN_PREFIX")
    if prefix:
        env["PKG_CONFIG_PATH"] = os.pathsep.join(
            [str(p) for p in pathlib.Path(prefix).glob("lib*/pkgconfig")] +
            [env.get("PKG_CONFIG_PATH", "")])
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "kiln"], env=env, check=True,
                           capture_output=True, text=True).stdout
    libdir = subprocess.run(["pkg-config", "--variable=libdir", "kiln"], env=env, check=True,
                            capture_output=True, text=True).stdout.strip()
    exe = os.path.join(tmp, "python_overhead")
    subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-Wextra", "-o", exe,
                    str(ROOT / "bench" / "python_overhead.c"), *shlex.split(flags),
                    "-Wl,-rpath," + libdir], check=True)
    return exe


def py_loop(fn, runs, rounds):
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(runs):
            fn()
        out.append((time.perf_counter() - t0) / runs * 1e6)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=pathlib.Path)
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    os.environ.setdefault("KILN_TACTICS", "heuristic")
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_c(tmp)
        print("%-34s %10s %12s %10s %12s %10s" % ("model", "C us", "Engine.run", "+us",
                                                  "ORT-style", "+us"))
        for m in args.models or DEFAULT:
            e = kiln.load(m, threads=1)
            shapes = {i.name: tuple(d if d is not None else 1 for d in i.shape)
                      for i in e.inputs}
            if any(None in i.shape for i in e.inputs):  # fix dynamic dims as the C side sees them
                e = kiln.build(m, shapes=shapes)
                e.threads = 1
                path = os.path.join(tmp, m.stem + ".kiln")
                e.save(path)
            else:
                path = str(m)
            feed = {i.name: np.zeros(shapes[i.name], i.dtype) for i in e.inputs}
            r = subprocess.run([exe, path, str(args.runs), str(args.rounds)], check=True,
                               capture_output=True, text=True).stdout
            c_us = statistics.median(float(x) for x in r.split())
            sess = kiln.InferenceSession(path)
            sess.engine.threads = 1
            for _ in range(1000):
                e.run(feed)
                sess.run(None, feed)
            py_us = py_loop(lambda: e.run(feed), args.runs, args.rounds)
            ort_us = py_loop(lambda: sess.run(None, feed), args.runs, args.rounds)
            print("%-34s %10.2f %12.2f %10.2f %12.2f %10.2f" %
                  (m.parent.name + "/" + m.name, c_us, py_us, py_us - c_us, ort_us, ort_us - c_us))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
