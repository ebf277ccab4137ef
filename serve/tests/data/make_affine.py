#!/usr/bin/env python3
"""Writes affine.onnx: y = 2 x + 1 with x FLOAT [batch, 4], the batch dim
dynamic, so that the kiln serve batcher tests (test_serve_batcher) can check
that each request gets back its own rows of a concatenated batch; and
affine_neg.onnx, y = -2 x + 1: the same inputs and outputs with other
values, a new version that validation must reject (test_serve_repo).
Run with Debian's Python: /usr/bin/python3 make_affine.py"""
import os
import onnx
from onnx import TensorProto, helper

def write(name, scale):
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t"], name="double"),
         helper.make_node("Add", ["t", "one"], ["y"], name="plus_one")],
        "affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [scale]),
         helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), name))


write("affine.onnx", 2.0)
write("affine_neg.onnx", -2.0)
