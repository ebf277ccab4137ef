"""Runs an ONNX model on an ONNX test-data folder and checks the outputs against the
folder's expected ones, written against ONNX Runtime's Python API.  Only the import
differs from the ONNX Runtime original: `import onnxruntime as ort`.

    python ort_style_script.py model.onnx test_data_set_0
"""
import glob
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

import kiln as ort  # was: import onnxruntime as ort


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def main():
    model_path, data_dir = sys.argv[1], sys.argv[2]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_path, sess_options=so,
                                providers=["CPUExecutionProvider"])
    print("providers:", sess.get_providers(), ort.get_device())
    for i in sess.get_inputs():
        print("input %s %s %s" % (i.name, i.type, i.shape))
    for o in sess.get_outputs():
        print("output %s %s %s" % (o.name, o.type, o.shape))

    inputs = sorted(glob.glob(os.path.join(data_dir, "input_*.pb")),
                    key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    feed = {}
    for meta, path in zip(sess.get_inputs(), inputs):
        x = load_pb(path)
        assert x.dtype == {"tensor(float)": np.float32, "tensor(int64)": np.int64,
                           "tensor(int32)": np.int32, "tensor(bool)": np.bool_,
                           "tensor(double)": np.float64}[meta.type], meta
        feed[meta.name] = x
    output_names = [o.name for o in sess.get_outputs()]
    results = sess.run(output_names, feed)
    # None gives every output too, in the same order
    again = sess.run(None, feed)
    for a, b in zip(results, again):
        np.testing.assert_array_equal(a, b)
    # a single named output
    first, = sess.run([output_names[-1]], feed)
    np.testing.assert_array_equal(first, results[-1])

    worst = 0.0
    for k, (name, got) in enumerate(zip(output_names, results)):
        ref = load_pb(os.path.join(data_dir, "output_%d.pb" % k))
        assert got.shape == ref.shape and got.dtype == ref.dtype, (name, got.shape, ref.shape)
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4, err_msg=name)
        if got.size:
            worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - ref))))
    print("%s: %d outputs match ONNX Runtime (max abs diff %.3g)" %
          (os.path.basename(os.path.dirname(model_path)), len(results), worst))


if __name__ == "__main__":
    main()
