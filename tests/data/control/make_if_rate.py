#!/usr/bin/env python3
"""Writes if_rate.onnx: a network wrapped in an If on a sample-rate input, the
form voice-activity models ship in.  y = Relu(Conv1d(x, W16) + b) when
sr == 16000, else Sigmoid(Conv1d(x, W8)); x [1, 16] (as [1, 1, 16]), y
[1, 4, 14].  The pinning tests (test_exec: kiln build --fix sr=16000) fold
the If away and check that the engine refuses another rate.
Run with Debian's Python: /usr/bin/python3 make_if_rate.py"""
import os
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def branch(name, w, act):
    nodes = [helper.make_node("Unsqueeze", ["x", name + "_axes"], [name + "_x3"], name=name + "_unsq"),
             helper.make_node("Conv", [name + "_x3", name + "_w", name + "_b"], [name + "_c"],
                              name=name + "_conv", kernel_shape=[3]),
             helper.make_node(act, [name + "_c"], [name + "_y"], name=name + "_act")]
    inits = [numpy_helper.from_array(np.array([1], np.int64), name + "_axes"),
             numpy_helper.from_array(w, name + "_w"),
             numpy_helper.from_array(np.linspace(-0.2, 0.2, 4).astype(np.float32), name + "_b")]
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(
        name + "_y", TensorProto.FLOAT, [1, 4, 14])], inits)


w16 = (np.arange(12, dtype=np.float32).reshape(4, 1, 3) % 5 - 2) * 0.25
w8 = (np.arange(12, dtype=np.float32).reshape(4, 1, 3) % 7 - 3) * 0.2
graph = helper.make_graph(
    [helper.make_node("Equal", ["sr", "rate16k"], ["is16k"], name="is_16k"),
     helper.make_node("If", ["is16k"], ["y"], name="by_rate",
                      then_branch=branch("r16", w16, "Relu"),
                      else_branch=branch("r8", w8, "Sigmoid"))],
    "if_rate",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16]),
     helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 14])],
    [numpy_helper.from_array(np.array(16000, np.int64), "rate16k")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 7
onnx.checker.check_model(model)
onnx.save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), "if_rate.onnx"))
