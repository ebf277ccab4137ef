#!/usr/bin/python3
"""ONNX Runtime's dynamic quantization pattern, written by hand.

    scripts/make_dynamic_quant.py MODEL.onnx OUT.onnx [--per-channel] [--u8-weights]

onnxruntime's `quantize_dynamic` (not installable here: no PyPI) rewrites
every MatMul whose B is a weight into

    A -> DynamicQuantizeLinear -> (Aq u8, A_scale, A_zero)
    MatMulInteger(Aq, Bq, A_zero, B_zero) -> Cast(float) -> Mul(A_scale * B_scale)

with B quantized symmetric s8 per tensor (or per output column with
--per-channel), zero point 0, as ORT's default QInt8 weights.  --u8-weights
quantizes B asymmetrically to u8 over [min(w, 0), max(w, 0)] with its zero
point, as ORT's QUInt8 weights.  A B given as a
Transpose of an initializer (PyTorch's Linear export) is folded first.
This script writes that graph so that kiln's MatMulInteger and
DynamicQuantizeLinear paths (tactic qgemm_integer) can be tested and timed
on whole models: tests/quantize_test.sh, docs/PRECISION.md.  The original
fp32 weights are dropped when nothing else reads them.
"""

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--per-channel", action="store_true")
    ap.add_argument("--u8-weights", action="store_true")
    args = ap.parse_args()

    m = onnx.load(args.model)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    weights = {name: numpy_helper.to_array(t) for name, t in inits.items()}
    for n in g.node:  # MatMul(x, Transpose(W)): fold the transpose
        if n.op_type == "Transpose" and n.input[0] in weights and weights[n.input[0]].ndim == 2:
            weights[n.output[0]] = weights[n.input[0]].T.copy()

    nodes, count = [], 0
    for n in g.node:
        w = weights.get(n.input[1]) if n.op_type == "MatMul" else None
        if w is None or w.ndim != 2 or w.dtype != np.float32:
            nodes.append(n)
            continue
        axis = 0 if args.per_channel else None
        if args.u8_weights:  # asymmetric over [min(w, 0), max(w, 0)], as ORT's QUInt8
            lo = np.minimum(w.min(axis=axis), 0.0)
            hi = np.maximum(w.max(axis=axis), 0.0)
            scale = np.asarray(np.maximum(hi - lo, 1e-8) / 255.0, np.float32)
            zero_i = np.clip(np.round(-lo / scale), 0, 255)
            codes = np.clip(np.round(w / scale) + zero_i, 0, 255).astype(np.uint8)
            zero = np.asarray(zero_i, np.uint8)
        else:  # symmetric s8, zero point 0 (ORT's default QInt8 weights)
            scale = np.asarray(np.maximum(np.abs(w).max(axis=axis), 1e-8) / 127.0, np.float32)
            codes = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
            zero = np.zeros(scale.shape, np.int8)
        p = "dynq%d" % count
        g.initializer.extend([numpy_helper.from_array(codes, p + "_B"),
                              numpy_helper.from_array(scale, p + "_B_scale"),
                              numpy_helper.from_array(zero, p + "_B_zero")])
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [n.input[0]],
                             [p + "_A", p + "_A_scale", p + "_A_zero"], name=p + "_quant"),
            helper.make_node("MatMulInteger", [p + "_A", p + "_B", p + "_A_zero", p + "_B_zero"],
                             [p + "_s32"], name=p + "_matmul"),
            helper.make_node("Cast", [p + "_s32"], [p + "_f32"], to=TensorProto.FLOAT,
                             name=p + "_cast"),
            helper.make_node("Mul", [p + "_A_scale", p + "_B_scale"], [p + "_scale"],
                             name=p + "_scale_mul"),
            helper.make_node("Mul", [p + "_f32", p + "_scale"], [n.output[0]], name=p + "_mul"),
        ]
        count += 1
    del g.node[:]
    g.node.extend(nodes)
    # drop what nothing reads any more (the fp32 weights, their transposes)
    while True:
        read = {i for n in g.node for i in n.input} | {o.name for o in g.output}
        dead = [n for n in g.node if not any(o in read for o in n.output)]
        if not dead:
            break
        for n in dead:
            g.node.remove(n)
    read = {i for n in g.node for i in n.input}
    keep = [t for t in g.initializer if t.name in read]
    del g.initializer[:]
    g.initializer.extend(keep)
    if not any(o.domain in ("", "ai.onnx") and o.version >= 11 for o in m.opset_import):
        raise SystemExit("%s: opset below 11 has no DynamicQuantizeLinear" % args.model)
    onnx.checker.check_model(m)
    onnx.save(m, args.out)
    print("%s: %d MatMuls dynamically quantized -> %s" % (args.model, count, args.out))


if __name__ == "__main__":
    main()
