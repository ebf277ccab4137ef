#!/usr/bin/env python3
"""Writes loop_endless.onnx: a Loop with no trip count whose condition stays
true, so it never ends by itself (v = x; while true: v = v + 1).  The
cancellation tests (test_exec) stop it with a deadline and a cancel hook.
Run with Debian's Python: /usr/bin/python3 make_loop_endless.py"""
import os
import onnx
from onnx import TensorProto, helper

body = helper.make_graph(
    [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
     helper.make_node("Add", ["v_in", "one"], ["v_out"], name="add_one")],
    "endless_body",
    [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
     helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
     helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [4])],
    [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
     helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [4])],
    [helper.make_tensor("one", TensorProto.FLOAT, [4], [1.0] * 4)])
graph = helper.make_graph(
    [helper.make_node("Constant", [], ["cond"], name="cond_true",
                      value=helper.make_tensor("c", TensorProto.BOOL, [], [True])),
     helper.make_node("Loop", ["", "cond", "x"], ["y"], name="endless", body=body)],
    "loop_endless",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), "loop_endless.onnx"))
