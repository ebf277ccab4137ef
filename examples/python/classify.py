#!/usr/bin/env python3
"""classify.py MODEL|ENGINE [INPUT.npy|INPUT.pb] [--threads N]

Classifies one image tensor with kiln's Python binding, as examples/c/classify.c does
with the C API: loads an ONNX model (built in memory) or an engine file, reads the input
(.npy or ONNX TensorProto .pb) or makes a random one of the input's shape (dynamic dims:
batch 1, others 224), runs, and prints the top-5 classes of the first row of output 0
with their softmax probabilities."""
import argparse
import sys

import numpy as np

import kiln


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[2])
    ap.add_argument("model")
    ap.add_argument("input", nargs="?")
    ap.add_argument("--threads", type=int)
    args = ap.parse_args()
    try:
        engine = kiln.load(args.model, threads=args.threads)
        (info,) = engine.inputs
        if args.input:
            x = kiln.read_tensor(args.input)
        else:
            shape = [d if d is not None else (224 if k else 1) for k, d in enumerate(info.shape)]
            x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
        scores = engine.run({info.name: x})[engine.outputs[0].name]
    except (kiln.Error, ValueError) as e:
        print("classify.py: %s" % e, file=sys.stderr)
        return 1
    row = scores.reshape(-1, scores.shape[-1])[0].astype(np.float64)
    p = np.exp(row - row.max())
    p /= p.sum()
    print("%s: %d classes" % (args.model, row.size))
    for k, c in enumerate(np.argsort(-row, kind="stable")[:5]):
        print("%d. class %d  score %.5f  p %.5f" % (k + 1, c, row[c], p[c]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
