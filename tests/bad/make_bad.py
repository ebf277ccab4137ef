#!/usr/bin/python3
"""Writes the fixtures of tests/cli_test.sh into this folder.

Run with a Python that has onnx and numpy (Debian: /usr/bin/python3 with
python3-onnx).  The output is deterministic and committed, so the test itself
needs no Python.  Every file stays well under 10 KB; the 1000-level nested
model is stored gzip'd (nested1000.onnx.gz) and unpacked by the test.

Layout
  good.onnx            Y = Relu(X + B), X float [1,4], B initializer [1,4]
  good_data/           input_0.pb (X), output_0.pb (expected Y, numpy),
                       output_0.npy (expected Y as .npy), x.npy (X as .npy)
  dyn.onnx, dyn_data/  same with X float [N,4]; data for N=3
  ext.onnx, weights.bin
                       B read from external data weights.bin (offset 16)
  sparse.onnx          B as a sparse initializer (good_data/sparse_output_0.pb)
  nested_if2/10.onnx   valid If nested 2 and 10 deep, Y = 1.5
  bad_*.onnx           hostile models: must fail with one clear line
  bad_op_NAME.onnx     one op named NAME with impossible attributes or data
  edge_op_*.onnx       integer corners kiln defines (x/0 = 0): must run
  in_*.pb, in_*.npy    hostile inputs for good.onnx
"""
import gzip
import os
import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 13


def path(name):
    return os.path.join(HERE, name)


def write(name, data):
    p = path(name)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)
    assert len(data) < 10240, (name, len(data))


def save(name, model):
    write(name, model.SerializeToString())


def model(nodes, inputs, outputs, inits=(), opset=OPSET, domains=(), name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in domains]
    m = helper.make_model(g, opset_imports=ops, producer_name="kiln-tests")
    m.ir_version = 8
    return m


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


X = vi("X", [1, 4])
Y = vi("Y", [1, 4])
X_VAL = np.array([[-2.0, -0.5, 0.5, 2.0]], dtype=np.float32)
B_VAL = np.array([[1.0, 1.0, -1.0, 0.25]], dtype=np.float32)
B = numpy_helper.from_array(B_VAL, "B")


def add_relu(x=X, y=Y, inits=(B,), **kw):
    nodes = [helper.make_node("Add", ["X", "B"], ["S"], name="add"),
             helper.make_node("Relu", ["S"], ["Y"], name="relu")]
    return model(nodes, [x], [y], inits, **kw)


def tensor_pb(arr, name):
    return numpy_helper.from_array(arr, name).SerializeToString()


def expected(x):
    return np.maximum(x + B_VAL, 0).astype(np.float32)


# ---- protobuf by hand, for what onnx's API cannot (or will not) build ----

def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_len(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def field_int(num, v):
    return varint(num << 3) + varint(v)


def nested_if_model(levels, io=True):
    """ModelProto whose graph holds an If whose then_branch holds an If ...
    `levels` deep (GraphProto=1:node, NodeProto 4:op_type 5:attribute,
    AttributeProto 1:name 6:g 20:type, ModelProto 1:ir_version 7:graph
    8:opset_import)."""
    g = field_len(2, b"leaf")
    for _ in range(levels):
        attr = field_len(1, b"then_branch") + field_len(6, g) + field_int(20, 5)
        node = field_len(4, b"If") + field_len(5, attr)
        if io:  # cond input and output; left out of the gzip'd one to keep it small
            node = field_len(1, b"c") + field_len(2, b"y") + node
        g = field_len(1, node)
    opset = field_int(2, OPSET)
    return field_int(1, 8) + field_len(7, g) + field_len(8, opset)


def parses(data):
    try:
        onnx.ModelProto.FromString(data)
        return True
    except Exception:
        return False


def op_cases():
    """bad_op_NAME.onnx: one node named NAME whose inputs are all
    initializers, with attributes or data that no run can satisfy.  Each
    must fail with a message naming the node, at load or at run."""
    f32 = lambda *shape: np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    i64 = lambda *v: np.array(v, dtype=np.int64)
    img, w22 = f32(1, 1, 4, 4), f32(1, 1, 2, 2)
    x14 = f32(1, 4)
    cases = [
        # name, op, inputs (arrays), attributes, outputs
        ("conv_stride0", "Conv", [img, w22], dict(strides=[0, 0]), 1),
        ("conv_kernel_too_big", "Conv", [img, f32(1, 1, 5, 5)], {}, 1),
        ("conv_group0", "Conv", [img, w22], dict(group=0), 1),
        ("conv_group_mismatch", "Conv", [img, w22], dict(group=3), 1),
        ("conv_negative_pads", "Conv", [img, w22], dict(pads=[-3, -3, -3, -3]), 1),
        ("conv_dilation0", "Conv", [img, w22], dict(dilations=[0, 0]), 1),
        ("conv_channels", "Conv", [img, f32(1, 3, 2, 2)], {}, 1),
        ("convtranspose_stride0", "ConvTranspose", [img, w22], dict(strides=[0, 0]), 1),
        ("maxpool_kernel0", "MaxPool", [img], dict(kernel_shape=[0, 0]), 1),
        ("maxpool_stride0", "MaxPool", [img], dict(kernel_shape=[2, 2], strides=[0, 0]), 1),
        ("avgpool_kernel_too_big", "AveragePool", [img], dict(kernel_shape=[9, 9]), 1),
        ("lppool_p0", "LpPool", [img], dict(kernel_shape=[2, 2], p=0), 1),
        ("slice_step0", "Slice", [x14, i64(0), i64(4), i64(1), i64(0)], {}, 1),
        ("range_delta0", "Range", [np.array(0, np.int64), np.array(10, np.int64),
                                   np.array(0, np.int64)], {}, 1),
        ("range_delta0_float", "Range", [np.array(0, np.float32), np.array(10, np.float32),
                                         np.array(0, np.float32)], {}, 1),
        ("range_huge", "Range", [np.array(0, np.int64), np.array(10 ** 18, np.int64),
                                 np.array(1, np.int64)], {}, 1),
        ("tile_huge", "Tile", [x14, i64(10 ** 9, 10 ** 9)], {}, 1),
        ("tile_negative", "Tile", [x14, i64(-1, 1)], {}, 1),
        ("pad_huge", "Pad", [x14, i64(0, 0, 0, 10 ** 12)], {}, 1),
        ("pad_negative_too_much", "Pad", [x14, i64(0, -9, 0, 0)], {}, 1),
        ("transpose_perm_dup", "Transpose", [x14], dict(perm=[0, 0]), 1),
        ("transpose_perm_range", "Transpose", [x14], dict(perm=[0, 5]), 1),
        ("concat_axis", "Concat", [x14, x14], dict(axis=5), 1),
        ("concat_shapes", "Concat", [x14, f32(2, 3)], dict(axis=0), 1),
        ("split_sizes", "Split", [x14, i64(1, 1)], dict(axis=1), 2),
        ("split_negative", "Split", [x14, i64(-1, 5)], dict(axis=1), 2),
        ("squeeze_axis", "Squeeze", [x14, i64(3)], {}, 1),
        ("squeeze_not_one", "Squeeze", [x14, i64(1)], {}, 1),
        ("unsqueeze_axis", "Unsqueeze", [x14, i64(10)], {}, 1),
        ("unsqueeze_dup", "Unsqueeze", [x14, i64(0, 0)], {}, 1),
        ("flatten_axis", "Flatten", [x14], dict(axis=5), 1),
        ("softmax_axis", "Softmax", [x14], dict(axis=5), 1),
        ("reducesum_axis", "ReduceSum", [x14, i64(7)], {}, 1),
        ("argmax_axis", "ArgMax", [x14], dict(axis=9), 1),
        ("cumsum_axis", "CumSum", [x14, np.array(5, np.int64)], {}, 1),
        ("depthtospace_block0", "DepthToSpace", [img], dict(blocksize=0), 1),
        ("spacetodepth_block0", "SpaceToDepth", [img], dict(blocksize=0), 1),
        ("spacetodepth_block3", "SpaceToDepth", [img], dict(blocksize=3), 1),
        ("onehot_huge", "OneHot", [i64(1, 2), np.array(10 ** 15, np.int64),
                                   np.array([0, 1], np.float32)], {}, 1),
        ("topk_k_too_big", "TopK", [x14, i64(100)], {}, 2),
        ("topk_k_negative", "TopK", [x14, i64(-1)], {}, 2),
        ("gatherelements_oob", "GatherElements", [x14, i64(0, 9).reshape(1, 2)],
         dict(axis=1), 1),
        ("gathernd_oob", "GatherND", [x14, i64(0, 9).reshape(1, 2)], {}, 1),
        ("gathernd_batch_dims", "GatherND", [x14, i64(0).reshape(1, 1)],
         dict(batch_dims=5), 1),
        ("scatternd_oob", "ScatterND", [x14, i64(0, 9).reshape(1, 2),
                                        np.array([1], np.float32)], {}, 1),
        ("scatterelements_oob", "ScatterElements", [x14, i64(9).reshape(1, 1),
                                                    np.ones((1, 1), np.float32)],
         dict(axis=1), 1),
        ("einsum_garbage", "Einsum", [x14, x14], dict(equation="ij,jk->ik->q"), 1),
        ("einsum_mismatch", "Einsum", [x14, x14], dict(equation="ij,jk->ik"), 1),
        ("cast_to_99", "Cast", [x14], dict(to=99), 1),
        ("resize_huge", "Resize", [img, np.array([], np.float32),
                                   np.array([1, 1, 1e9, 1e9], np.float32)], {}, 1),
        ("resize_negative", "Resize", [img, np.array([], np.float32),
                                       np.array([1, 1, -2, -2], np.float32)], {}, 1),
        ("expand_incompatible", "Expand", [x14, i64(3, 5)], {}, 1),
        ("expand_negative", "Expand", [x14, i64(-3, 4)], {}, 1),
        ("reshape_two_minus1", "Reshape", [x14, i64(-1, -1)], {}, 1),
        ("reshape_minus2", "Reshape", [x14, i64(-2, -2)], {}, 1),
        ("reshape_zero_past_rank", "Reshape", [x14, i64(1, 0, 0, 4)], {}, 1),
        ("constantofshape_negative", "ConstantOfShape", [i64(-1, 4)], {}, 1),
        ("gemm_mismatch", "Gemm", [x14, f32(3, 2)], {}, 1),
        ("matmul_scalar", "MatMul", [np.array(1, np.float32), x14], {}, 1),
        ("add_broadcast", "Add", [x14, f32(3)], {}, 1),
        ("where_broadcast", "Where", [np.ones((2, 1), bool), x14, f32(3, 1)], {}, 1),
        ("batchnorm_channels", "BatchNormalization",
         [img, f32(3), f32(3), f32(3), f32(3)], {}, 1),
        ("layernorm_axis", "LayerNormalization", [x14, f32(4)], dict(axis=5), 1),
        ("instancenorm_channels", "InstanceNormalization", [img, f32(3), f32(3)], {}, 1),
        ("trilu_rank1", "Trilu", [f32(4)], {}, 1),
        ("compress_long", "Compress", [x14, np.ones(9, bool)], dict(axis=1), 1),
        ("reversesequence_oob", "ReverseSequence", [f32(2, 2, 1), i64(9, 9)], {}, 1),
        ("lstm_hidden_mismatch", "LSTM", [f32(1, 1, 4), f32(1, 12, 4), f32(1, 12, 5)],
         dict(hidden_size=3), 3),
        ("nonmaxsuppression_boxes", "NonMaxSuppression", [f32(1, 2, 3), f32(1, 1, 2)], {}, 1),
        ("constant_no_value", "Constant", [], {}, 1),
        ("eyelike_rank3", "EyeLike", [f32(1, 2, 2)], {}, 1),
        ("maxunpool_oob", "MaxUnpool", [f32(1, 1, 2, 2), i64(0, 1, 2, 99).reshape(1, 1, 2, 2)],
         dict(kernel_shape=[2, 2]), 1),
        ("gridsample_rank", "GridSample", [x14, x14], {}, 1),
        ("dft_axis", "DFT", [f32(1, 4, 1)], dict(axis=7), 1),
        ("stft_frame_too_long", "STFT", [f32(1, 4, 1), np.array(1, np.int64),
                                         np.array([], np.float32), np.array(99, np.int64)], {}, 1),
    ]
    # edge_op_NAME.onnx: integer corners that src/ops/binary.c defines
    # (x/0 and x%0 give 0, INT_MIN/-1 wraps); they must run, not trap.
    edges = [
        ("div_int_zero", "Div", [i64(1, 2), i64(0, 0)], {}, 1),
        ("div_int_min_neg1", "Div", [i64(-2 ** 63), i64(-1)], {}, 1),
        ("div_int32_zero", "Div", [np.array([7], np.int32), np.array([0], np.int32)], {}, 1),
        ("mod_int_zero", "Mod", [i64(1, 2), i64(0, 0)], {}, 1),
        ("mod_fmod_int_zero", "Mod", [i64(1, 2), i64(0, 0)], dict(fmod=1), 1),
        ("mod_int_min_neg1", "Mod", [i64(-2 ** 63), i64(-1)], {}, 1),
        ("bitshift_64", "BitShift", [np.array([1], np.uint64), np.array([64], np.uint64)],
         dict(direction="LEFT"), 1),
    ]
    for prefix, table in (("bad_op_", cases), ("edge_op_", edges)):
        for name, op, arrays, attrs, nout in table:
            inits, ins = [], []
            for k, a in enumerate(arrays):
                inits.append(numpy_helper.from_array(np.asarray(a), "in%d" % k))
                ins.append("in%d" % k)
            outs = ["out%d" % k for k in range(nout)]
            node = helper.make_node(op, ins, outs, name=name, **attrs)
            save(prefix + name + ".onnx",
                 model([node], [], [vi(o, None) for o in outs], inits, opset=17))


def control_cases():
    """If/Loop whose subgraphs do not fit the node, and a valid If nested
    10 deep (nested_if10.onnx, Y = 1.5)."""
    def branch(name, nouts=1, value=1.5, use=None):
        nodes, outs = [], []
        for k in range(nouts):
            src = use or "c%d" % k
            nodes.append(helper.make_node("Identity", [src], ["%s_y%d" % (name, k)]))
            if use is None:
                nodes.insert(0, helper.make_node(
                    "Constant", [], ["c%d" % k],
                    value=numpy_helper.from_array(np.array([value], np.float32))))
            outs.append(vi("%s_y%d" % (name, k), [1]))
        return helper.make_graph(nodes, name, [], outs)

    def if_model(cond, then_g, else_g, nouts=1, name="if"):
        attrs = {"then_branch": then_g}
        if else_g is not None:
            attrs["else_branch"] = else_g
        node = helper.make_node("If", ["cond"], ["y%d" % k for k in range(nouts)],
                                name=name, **attrs)
        return model([node], [], [vi("y%d" % k, None) for k in range(nouts)],
                     [numpy_helper.from_array(cond, "cond")])

    true = np.array(True)
    save("bad_if_outputs.onnx", if_model(true, branch("then", 2), branch("else", 2)))
    save("bad_if_cond_float.onnx", if_model(np.array([1.0], np.float32),
                                            branch("then"), branch("else")))
    save("bad_if_missing_else.onnx", if_model(true, branch("then"), None))
    save("bad_if_outer_ghost.onnx", if_model(true, branch("then", use="ghost"),
                                             branch("else")))
    save("bad_if_branch_shapes.onnx",
         if_model(true, branch("then"),
                  helper.make_graph([helper.make_node("Constant", [], ["e"], value_ints=[1, 2])],
                                    "else", [], [vi("e", [2], TensorProto.INT64)])))
    # the body should take (iteration, cond, v) and return (cond, v)
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"])], "body",
                             [vi("c", [], TensorProto.BOOL)], [vi("c_out", [], TensorProto.BOOL)])
    save("bad_loop_body_arity.onnx",
         model([helper.make_node("Loop", ["M", "cond", "v0"], ["v"], name="loop", body=body)],
               [], [vi("v", None)],
               [numpy_helper.from_array(np.array(3, np.int64), "M"),
                numpy_helper.from_array(true, "cond"),
                numpy_helper.from_array(np.array([1.0], np.float32), "v0")]))

    for depth in (2, 10):  # nested_if2.onnx is small enough for the sweeps
        g = branch("leaf")
        for level in range(depth):
            node = helper.make_node("If", ["cond"], ["y%d" % level], name="if%d" % level,
                                    then_branch=g, else_branch=branch("e%d" % level, value=-1))
            g = helper.make_graph([node], "g%d" % level, [], [vi("y%d" % level, [1])])
        m = model(g.node, [], [vi("Y", [1])], [numpy_helper.from_array(true, "cond")])
        m.graph.node[0].output[0] = "Y"
        save("nested_if%d.onnx" % depth, m)


def main():
    # ---- valid models and their data ----
    good = add_relu()
    onnx.checker.check_model(good)
    save("good.onnx", good)
    write("good_data/input_0.pb", tensor_pb(X_VAL, "X"))
    write("good_data/output_0.pb", tensor_pb(expected(X_VAL), "Y"))
    sb = np.array([[0, 1, 0, 1]], dtype=np.float32)
    write("good_data/sparse_output_0.pb", tensor_pb(np.maximum(X_VAL + sb, 0), "Y"))
    np.save(path("good_data/x.npy"), X_VAL)
    np.save(path("good_data/output_0.npy"), expected(X_VAL))

    dyn = add_relu(x=vi("X", ["N", 4]), y=vi("Y", ["N", 4]))
    onnx.checker.check_model(dyn)
    save("dyn.onnx", dyn)
    xd = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) / 2
    write("dyn_data/input_0.pb", tensor_pb(xd, "X"))
    write("dyn_data/output_0.pb", tensor_pb(expected(xd), "Y"))

    # external data: 16 bytes of padding, then B
    write("weights.bin", b"kiln-test-pad-16" + B_VAL.tobytes())

    def ext_model(location, offset=16, length=16):
        b = TensorProto(name="B", data_type=TensorProto.FLOAT, dims=[1, 4])
        b.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", offset), ("length", length)):
            if v is not None:
                e = b.external_data.add()
                e.key, e.value = k, str(v)
        return add_relu(inits=(b,))

    save("ext.onnx", ext_model("weights.bin"))
    save("bad_ext_missing.onnx", ext_model("no_such_weights.bin"))
    save("bad_ext_dotdot.onnx", ext_model("../../etc/passwd", offset=0))
    save("bad_ext_dotdot_inside.onnx", ext_model("../bad/weights.bin"))
    save("bad_ext_abs.onnx", ext_model("/etc/passwd", offset=0))
    save("bad_ext_offset.onnx", ext_model("weights.bin", offset=1 << 20))
    save("bad_ext_short.onnx", ext_model("weights.bin", offset=24))
    save("bad_ext_length.onnx", ext_model("weights.bin", length=1 << 40))
    save("bad_ext_neg_offset.onnx", ext_model("weights.bin", offset=-16))
    save("bad_ext_noloc.onnx", ext_model("", offset=0))
    save("bad_ext_dir.onnx", ext_model("good_data", offset=0))

    # ---- broken bytes ----
    gb = good.SerializeToString()
    for cut in (1, 7, len(gb) // 3, len(gb) // 2, len(gb) - 1):
        t = gb[:cut]
        assert not parses(t), cut
        write("bad_trunc_%d.onnx" % cut, t)
    rng = random.Random(1234)
    write("bad_random.onnx", bytes(rng.randrange(256) for _ in range(512)))
    flips = []
    while len(flips) < 4:
        pos, bit = rng.randrange(len(gb)), rng.randrange(8)
        f = bytearray(gb)
        f[pos] ^= 1 << bit
        if not parses(bytes(f)):
            flips.append(pos)
            write("bad_bitflip_%d.onnx" % pos, bytes(f))
    write("bad_empty.onnx", b"")
    write("bad_nested70.onnx", nested_if_model(70))
    nested = nested_if_model(1000, io=False)
    with gzip.GzipFile(path("nested1000.onnx.gz"), "wb", mtime=0) as f:
        f.write(nested)
    assert os.path.getsize(path("nested1000.onnx.gz")) < 10240

    # ---- well-formed protobuf, hostile content ----
    def raw_init(name, dims, raw=b"", dtype=TensorProto.FLOAT):
        t = TensorProto(name=name, data_type=dtype)
        t.dims.extend(dims)
        t.raw_data = raw
        return t

    def init_model(t):
        """Y = X + t, so the initializer is used."""
        t.name = "B"
        return add_relu(inits=(t,))

    save("bad_huge_init.onnx", init_model(raw_init("B", [1000000, 1000000, 1000])))
    save("bad_overflow_init.onnx", init_model(raw_init("B", [1 << 40, 1 << 40])))
    save("bad_rawlen.onnx", init_model(raw_init("B", [1, 4], b"\0" * 12)))
    # within the per-tensor limit (12 GiB), but the data is 16 bytes
    save("bad_rawlen_big.onnx", init_model(raw_init("B", [1 << 30, 3], b"\0" * 16)))
    save("bad_floatdata_count.onnx",
         init_model(TensorProto(name="B", data_type=TensorProto.FLOAT, dims=[1, 4],
                                float_data=[1.0, 2.0, 3.0])))
    save("bad_negdim.onnx", init_model(raw_init("B", [-1, 4], b"\0" * 16)))
    save("bad_rank100_init.onnx", init_model(raw_init("B", [1] * 100, b"\0" * 4)))
    save("bad_dtype_init.onnx", init_model(raw_init("B", [1, 4], b"\0" * 16, dtype=99)))
    save("bad_rank100_input.onnx", add_relu(x=vi("X", [1] * 100)))

    def sparse_model(dims, indices):
        vals = numpy_helper.from_array(np.ones(len(indices), dtype=np.float32), "B")
        idx = numpy_helper.from_array(np.array(indices, dtype=np.int64), "B_idx")
        m = add_relu(inits=())
        m.graph.sparse_initializer.append(helper.make_sparse_tensor(vals, idx, dims))
        return m

    save("sparse.onnx", sparse_model([1, 4], [1, 3]))
    save("bad_sparse_index.onnx", sparse_model([1, 4], [1, 4]))
    save("bad_sparse_huge.onnx", sparse_model([1 << 30, 1 << 30], [0]))

    shape_t = numpy_helper.from_array(np.array([10 ** 15], dtype=np.int64), "shape")
    save("bad_huge_constantofshape.onnx",
         model([helper.make_node("ConstantOfShape", ["shape"], ["Y"], name="cos")],
               [], [vi("Y", None)], [shape_t]))
    big = numpy_helper.from_array(np.array([10 ** 12, 4], dtype=np.int64), "shape")
    save("bad_huge_expand.onnx",
         model([helper.make_node("Expand", ["X", "shape"], ["Y"], name="expand")],
               [X], [vi("Y", None)], [big]))

    save("bad_unknown_op.onnx",
         model([helper.make_node("FrobnicateTensor", ["X"], ["Y"], name="frob")], [X], [Y]))
    save("bad_unknown_domain.onnx",
         model([helper.make_node("Relu", ["X"], ["Y"], name="relu", domain="com.example.kiln")],
               [X], [Y], domains=[("com.example.kiln", 1)]))
    save("bad_unimported_domain.onnx",
         model([helper.make_node("Relu", ["X"], ["Y"], name="relu", domain="com.example.kiln")],
               [X], [Y]))
    save("bad_opset99.onnx", add_relu(opset=99))
    save("bad_dangling.onnx",
         model([helper.make_node("Add", ["X", "ghost"], ["Y"], name="add")], [X], [Y]))
    save("bad_name_newline.onnx",  # the message must stay one line
         model([helper.make_node("Add", ["X", "gh\nost\x1b[2J"], ["Y"], name="add")],
               [X], [Y]))
    save("bad_cycle.onnx",
         model([helper.make_node("Add", ["X", "R"], ["S"], name="add"),
                helper.make_node("Relu", ["S"], ["R"], name="relu"),
                helper.make_node("Identity", ["R"], ["Y"], name="out")], [X], [Y]))
    save("bad_dup_output.onnx",
         model([helper.make_node("Relu", ["X"], ["Y"], name="relu_a"),
                helper.make_node("Neg", ["X"], ["Y"], name="neg_b")], [X], [Y]))
    save("bad_dup_input.onnx",
         model([helper.make_node("Relu", ["X"], ["Y"], name="relu")], [X, X], [Y]))
    save("bad_no_graph.onnx", onnx.ModelProto(ir_version=8))
    save("bad_graph_output_missing.onnx",
         model([helper.make_node("Relu", ["X"], ["S"], name="relu")], [X], [Y]))

    def const(name, arr):
        return numpy_helper.from_array(np.asarray(arr), name)

    save("bad_reshape.onnx",
         model([helper.make_node("Reshape", ["X", "shape"], ["Y"], name="reshape")],
               [X], [vi("Y", None)], [const("shape", np.array([3, 2], dtype=np.int64))]))
    save("bad_matmul.onnx",
         model([helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul")],
               [X], [vi("Y", None)], [const("W", np.ones((3, 2), dtype=np.float32))]))
    save("bad_gather.onnx",
         model([helper.make_node("Gather", ["X", "idx"], ["Y"], name="gather", axis=1)],
               [X], [vi("Y", None)], [const("idx", np.array([0, 9], dtype=np.int64))]))
    save("bad_gather_neg.onnx",
         model([helper.make_node("Gather", ["X", "idx"], ["Y"], name="gather", axis=1)],
               [X], [vi("Y", None)], [const("idx", np.array([-5], dtype=np.int64))]))
    save("bad_gather_axis.onnx",
         model([helper.make_node("Gather", ["X", "idx"], ["Y"], name="gather", axis=7)],
               [X], [vi("Y", None)], [const("idx", np.array([0], dtype=np.int64))]))

    op_cases()
    control_cases()

    # ---- hostile inputs for good.onnx ----
    write("in_wrong_dtype.pb", tensor_pb(X_VAL.astype(np.int64), "X"))
    write("in_wrong_shape.pb", tensor_pb(np.zeros((2, 4), dtype=np.float32), "X"))
    gi = tensor_pb(X_VAL, "X")
    write("in_truncated.pb", gi[:len(gi) - 3])
    t = numpy_helper.from_array(X_VAL, "X")
    t.raw_data = t.raw_data[:12]
    write("in_rawlen.pb", t.SerializeToString())
    np.save(path("in_f64.npy"), X_VAL.astype(np.float64))

    def npy(header, data):
        h = header.encode("latin1")
        pad = (64 - (10 + len(h) + 1) % 64) % 64
        h = h + b" " * pad + b"\n"
        return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + data

    write("in_fortran.npy",
          npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 4), }", X_VAL.tobytes()))
    write("in_badheader.npy", npy("{'descr': <f4 'fortran_order' 'shape': (1 4 }", X_VAL.tobytes()))
    write("in_bigendian.npy",
          npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1, 4), }",
              X_VAL.astype(">f4").tobytes()))
    write("in_npy_truncated.npy",
          npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }", X_VAL.tobytes()[:10]))
    write("in_npy_hugeshape.npy",
          npy("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 100000000000), }",
              b""))
    write("in_npy_hdrlen.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr'")


if __name__ == "__main__":
    main()
