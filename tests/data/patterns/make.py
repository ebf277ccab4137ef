#!/usr/bin/python3
"""Generates the small models tests/unit/test_patterns.c loads: decomposed
LayerNorm, GELU, HardSwish and attention blocks the pattern passes must fuse
(*.onnx named <pass>_<case>.onnx), and near misses they must leave alone
(named <pass>_miss_<case>.onnx).  Run from anywhere: writes next to itself."""
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper as h, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT
rng = np.random.default_rng(7)


def c(name, val, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(val, dtype=dtype), name)


def save(name, nodes, inputs, outputs, inits, opset=13):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="make.py")
    m.ir_version = 8
    if opset <= 17:  # the onnx package here (1.12) knows opsets up to 17
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, name + ".onnx"))


def vi(name, shape):
    return h.make_tensor_value_info(name, F, shape)


# ---- LayerNorm -------------------------------------------------------------

def layernorm(name, opset=13, axes=(-1,), affine=True, eps_after_sqrt=False,
              second_axes=None, square="pow", exponent=2.0, d_output=False,
              sub_other=False, shape=(2, 3, 8)):
    nshape = [shape[a] for a in sorted(a % len(shape) for a in axes)]
    inits = [c("two", exponent), c("eps", 1e-5),
             c("gamma", rng.uniform(0.5, 1.5, nshape)), c("beta", rng.uniform(-1, 1, nshape))]
    def rmean(i, o, ax):
        if opset >= 18:
            inits.append(c(o + "_axes", list(ax), np.int64))
            return h.make_node("ReduceMean", [i, o + "_axes"], [o], keepdims=1)
        return h.make_node("ReduceMean", [i], [o], axes=list(ax), keepdims=1)
    nodes = [rmean("x", "mean", axes),
             h.make_node("Sub", ["x2" if sub_other else "x", "mean"], ["d"])]
    if square == "pow":
        nodes.append(h.make_node("Pow", ["d", "two"], ["sq"]))
    else:
        nodes.append(h.make_node("Mul", ["d", "d"], ["sq"]))
    nodes.append(rmean("sq", "var", second_axes or axes))
    if eps_after_sqrt:
        nodes += [h.make_node("Sqrt", ["var"], ["sd"]), h.make_node("Add", ["sd", "eps"], ["den"])]
    else:
        nodes += [h.make_node("Add", ["var", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["den"])]
    nodes.append(h.make_node("Div", ["d", "den"], ["n"]))
    out = "n"
    if affine:
        nodes += [h.make_node("Mul", ["gamma", "n"], ["g"]), h.make_node("Add", ["g", "beta"], ["y"])]
        out = "y"
    ins = [vi("x", list(shape))] + ([vi("x2", list(shape))] if sub_other else [])
    outs = [vi(out, list(shape))] + ([vi("d", list(shape))] if d_output else [])
    save(name, nodes, ins, outs, inits, opset)


layernorm("layernorm_basic")
layernorm("layernorm_noaffine", affine=False)
layernorm("layernorm_opset18", opset=18)
layernorm("layernorm_two_axes", axes=(-2, -1))
layernorm("layernorm_mul_square", square="mul")
layernorm("layernorm_miss_eps_after_sqrt", eps_after_sqrt=True)
layernorm("layernorm_miss_axis1", axes=(1,), affine=False)
layernorm("layernorm_miss_axes_differ", axes=(-1,), second_axes=(-2, -1))
layernorm("layernorm_miss_d_output", d_output=True)
layernorm("layernorm_miss_pow4", exponent=4.0)
layernorm("layernorm_miss_sub_other_x", sub_other=True)

# ---- GELU ------------------------------------------------------------------

def gelu(name, form="a", scale="div", half=0.5, root=math.sqrt(2), erf_output=False):
    inits = [c("half", half), c("one", 1.0), c("root", root), c("invroot", 1 / root)]
    nodes = []
    if scale == "div":
        nodes.append(h.make_node("Div", ["x", "root"], ["u"]))
    else:
        nodes.append(h.make_node("Mul", ["invroot", "x"], ["u"]))
    nodes += [h.make_node("Erf", ["u"], ["e"]), h.make_node("Add", ["one", "e"], ["a"])]
    if form == "a":      # (x * 0.5) * a
        nodes += [h.make_node("Mul", ["x", "half"], ["m"]), h.make_node("Mul", ["m", "a"], ["y"])]
    elif form == "b":    # (x * a) * 0.5
        nodes += [h.make_node("Mul", ["a", "x"], ["m"]), h.make_node("Mul", ["half", "m"], ["y"])]
    else:                # x * (a * 0.5)
        nodes += [h.make_node("Mul", ["a", "half"], ["m"]), h.make_node("Mul", ["x", "m"], ["y"])]
    outs = [vi("y", [3, 16])] + ([vi("e", [3, 16])] if erf_output else [])
    save(name, nodes, [vi("x", [3, 16])], outs, inits)


def gelu_tanh(name, cube="pow"):
    inits = [c("half", 0.5), c("one", 1.0), c("beta", math.sqrt(2 / math.pi)),
             c("kappa", 0.044715), c("three", 3.0)]
    if cube == "pow":
        nodes = [h.make_node("Pow", ["x", "three"], ["c3"])]
    else:
        nodes = [h.make_node("Mul", ["x", "x"], ["sq"]), h.make_node("Mul", ["x", "sq"], ["c3"])]
    nodes += [h.make_node("Mul", ["kappa", "c3"], ["k3"]), h.make_node("Add", ["x", "k3"], ["in"]),
              h.make_node("Mul", ["beta", "in"], ["t"]), h.make_node("Tanh", ["t"], ["th"]),
              h.make_node("Add", ["one", "th"], ["a"]), h.make_node("Mul", ["half", "x"], ["m"]),
              h.make_node("Mul", ["m", "a"], ["y"])]
    save(name, nodes, [vi("x", [3, 16])], [vi("y", [3, 16])], inits)


gelu("gelu_erf_a")
gelu("gelu_erf_b", form="b", scale="mul")
gelu("gelu_erf_c", form="c")
gelu_tanh("gelu_tanh_pow")
gelu_tanh("gelu_tanh_mul", cube="mul")
gelu("gelu_miss_half06", half=0.6)
gelu("gelu_miss_root15", root=1.5)
gelu("gelu_miss_erf_output", erf_output=True)

# ---- HardSwish ---------------------------------------------------------------

def hardswish_hs(name, alpha=1 / 6, opset=13):
    nodes = [h.make_node("HardSigmoid", ["x"], ["hs"], alpha=alpha, beta=0.5),
             h.make_node("Mul", ["x", "hs"], ["y"])]
    save(name, nodes, [vi("x", [4, 16])], [vi("y", [4, 16])], [], opset)


def hardswish_clip(name, opset=13, lo=0.0, hi=6.0, three=3.0, div_first=False, mul16=False):
    inits = [c("three", three), c("six", 6.0), c("sixth", 1 / 6)]
    if opset >= 11:
        inits += [c("lo", lo), c("hi", hi)]
        clip = h.make_node("Clip", ["u", "lo", "hi"], ["r"])
    else:
        clip = h.make_node("Clip", ["u"], ["r"], min=lo, max=hi)
    nodes = [h.make_node("Add", ["x", "three"], ["u"]), clip]
    div = (h.make_node("Mul", ["sixth", "{}"], ["{}"]) if mul16 else
           h.make_node("Div", ["{}", "six"], ["{}"]))
    def scaled(i, o):
        n = onnx.NodeProto()
        n.CopyFrom(div)
        n.input[:] = [s.replace("{}", i) for s in n.input]
        n.output[:] = [o]
        return n
    if div_first:
        nodes += [scaled("r", "q"), h.make_node("Mul", ["q", "x"], ["y"])]
    else:
        nodes += [h.make_node("Mul", ["x", "r"], ["p"]), scaled("p", "y")]
    save(name, nodes, [vi("x", [4, 16])], [vi("y", [4, 16])], inits, opset)


hardswish_hs("hardswish_hardsigmoid")
hardswish_hs("hardswish_hardsigmoid_opset14", opset=14)
hardswish_clip("hardswish_clip_div")
hardswish_clip("hardswish_clip_mul16_first", opset=14, div_first=True, mul16=True)
hardswish_clip("hardswish_clip_attrs", opset=10)
hardswish_hs("hardswish_miss_alpha02", alpha=0.2)
hardswish_clip("hardswish_miss_clip5", hi=5.0)
hardswish_clip("hardswish_miss_add4", three=4.0)

# ---- attention ---------------------------------------------------------------

def attention(name, B=2, S=5, H=2, D=4, dynamic=False, mask=True, scale="div",
              k_two_step=False, softmax_axis=-1, scores_output=False, odd_perm=False,
              per_head_scale=False, mask_first=False):
    HD = H * D
    bd = ["batch", "seq"] if dynamic else [B, S]
    inits = [c("wq", rng.normal(0, 0.5, (HD, HD))), c("wk", rng.normal(0, 0.5, (HD, HD))),
             c("wv", rng.normal(0, 0.5, (HD, HD))),
             c("sqrt_d", math.sqrt(D)),
             c("inv_sqrt_d", 1 / math.sqrt(D)),
             c("head_scale", np.full((1, H, 1, 1), 1 / math.sqrt(D)))]
    nodes = [h.make_node("MatMul", ["x", "wq"], ["q"]), h.make_node("MatMul", ["x", "wk"], ["k"]),
             h.make_node("MatMul", ["x", "wv"], ["v"])]
    def split_target(src, tag):
        if not dynamic:
            inits.append(c("split_" + tag, [B, S, H, D], np.int64))
            return "split_" + tag
        nodes.extend([
            h.make_node("Shape", [src], [tag + "_shape"]),
            h.make_node("Gather", [tag + "_shape", "i0"], [tag + "_b"], axis=0),
            h.make_node("Gather", [tag + "_shape", "i1"], [tag + "_s"], axis=0),
            h.make_node("Unsqueeze", [tag + "_b", "ax0"], [tag + "_b1"]),
            h.make_node("Unsqueeze", [tag + "_s", "ax0"], [tag + "_s1"]),
            h.make_node("Concat", [tag + "_b1", tag + "_s1", "hd"], [tag + "_target"], axis=0)])
        return tag + "_target"
    if dynamic:
        inits += [c("i0", 0, np.int64), c("i1", 1, np.int64), c("ax0", [0], np.int64),
                  c("hd", [H, D], np.int64), c("hxd", [HD], np.int64)]
    qperm = [2, 0, 1, 3] if odd_perm else [0, 2, 1, 3]
    for t in ("q", "k", "v"):
        nodes.append(h.make_node("Reshape", [t, split_target(t, t)], [t + "r"]))
    nodes.append(h.make_node("Transpose", ["qr"], ["qh"], perm=qperm))
    nodes.append(h.make_node("Transpose", ["vr"], ["vh"], perm=qperm))
    if odd_perm:
        nodes.append(h.make_node("Transpose", ["kr"], ["kt"], perm=[2, 0, 3, 1]))
    elif k_two_step:
        nodes += [h.make_node("Transpose", ["kr"], ["kh"], perm=[0, 2, 1, 3]),
                  h.make_node("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2])]
    else:
        nodes.append(h.make_node("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]))
    nodes.append(h.make_node("MatMul", ["qh", "kt"], ["s0"]))
    if per_head_scale:
        nodes.append(h.make_node("Mul", ["s0", "head_scale"], ["s1"]))
    elif scale == "div":
        nodes.append(h.make_node("Div", ["s0", "sqrt_d"], ["s1"]))
    elif scale == "mul":
        nodes.append(h.make_node("Mul", ["inv_sqrt_d", "s0"], ["s1"]))
    else:
        nodes.append(h.make_node("Identity", ["s0"], ["s1"]))
    if mask:
        nodes.append(h.make_node("Add", ["mask", "s1"] if mask_first else ["s1", "mask"], ["s2"]))
    else:
        nodes.append(h.make_node("Identity", ["s1"], ["s2"]))
    nodes += [h.make_node("Softmax", ["s2"], ["p"], axis=softmax_axis),
              h.make_node("MatMul", ["p", "vh"], ["o"])]
    nodes.append(h.make_node("Transpose", ["o"], ["ot"],
                             perm=[1, 2, 0, 3] if odd_perm else [0, 2, 1, 3]))
    if dynamic:
        nodes += [h.make_node("Shape", ["ot"], ["ot_shape"]),
                  h.make_node("Gather", ["ot_shape", "i0"], ["ot_b"], axis=0),
                  h.make_node("Shape", ["ot"], ["ot_shape2"]),
                  h.make_node("Gather", ["ot_shape2", "i1"], ["ot_s"], axis=0),
                  h.make_node("Unsqueeze", ["ot_b", "ax0"], ["ot_b1"]),
                  h.make_node("Unsqueeze", ["ot_s", "ax0"], ["ot_s1"]),
                  h.make_node("Concat", ["ot_b1", "ot_s1", "hxd"], ["merge"], axis=0)]
    else:
        inits.append(c("merge", [B, S, HD], np.int64))
    nodes.append(h.make_node("Reshape", ["ot", "merge"], ["y"]))
    ins = [vi("x", bd + [HD])]
    if mask:
        ins.append(vi("mask", [bd[0], 1, 1, bd[1]]))
    outs = [vi("y", bd + [HD])] + ([vi("s0", [B, H, S, S])] if scores_output else [])
    save(name, nodes, ins, outs, inits)


attention("attention_const")
attention("attention_dynamic", dynamic=True, scale="mul", mask_first=True)
attention("attention_kt_two_step", k_two_step=True, mask=False, scale="none")
attention("attention_long", B=1, S=150, H=2, D=8, dynamic=True)
attention("attention_miss_softmax_axis2", softmax_axis=2)
attention("attention_miss_scores_output", scores_output=True)
attention("attention_miss_odd_perm", odd_perm=True)
attention("attention_miss_per_head_scale", per_head_scale=True)
