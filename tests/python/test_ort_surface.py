"""kiln.InferenceSession's ONNX Runtime surface: metadata, run's output selection, and
clear errors for what kiln does not support."""
import numpy as np
import pytest

import kiln
import kiln as ort


def test_session_metadata_and_run(tinycnn, tmp_path):
    sess = ort.InferenceSession(tinycnn, providers=["CPUExecutionProvider"])
    (i,) = sess.get_inputs()
    (o,) = sess.get_outputs()
    assert (i.name, i.type) == ("input", "tensor(float)")
    assert i.shape[1:] == [3, 32, 32] and (i.shape[0] is None or isinstance(i.shape[0], str))
    assert (o.name, o.type) == ("logits", "tensor(float)")
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert ort.get_available_providers() == ["CPUExecutionProvider"]
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32)
    res = sess.run(None, {"input": x})
    assert isinstance(res, list) and len(res) == 1 and res[0].shape == (2, 10)
    np.testing.assert_array_equal(sess.run(["logits"], {"input": x})[0], res[0])
    np.testing.assert_array_equal(sess.run([], {"input": x}, ort.RunOptions())[0], res[0])
    with pytest.raises(kiln.InvalidArgumentError, match="no output named 'probs'"):
        sess.run(["probs"], {"input": x})
    # serialized bytes, and an engine file, load too
    with open(tinycnn, "rb") as f:
        sb = ort.InferenceSession(f.read())
    np.testing.assert_allclose(sb.run(None, {"input": x})[0], res[0], rtol=1e-6, atol=1e-6)
    kiln.build(tinycnn, shapes={"input": (2, 3, 32, 32)}).save(tmp_path / "t.kiln")
    se = ort.InferenceSession(str(tmp_path / "t.kiln"))
    assert se.get_inputs()[0].shape == [2, 3, 32, 32]
    np.testing.assert_allclose(se.run(None, {"input": x})[0], res[0], rtol=1e-5, atol=1e-5)
    # ORT_DISABLE_ALL runs the graph as imported
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    s0 = ort.InferenceSession(tinycnn, so)
    assert s0.engine.threads == 1
    np.testing.assert_allclose(s0.run(None, {"input": x})[0], res[0], rtol=1e-4, atol=1e-5)


def test_unsupported_options_raise(tinycnn):
    with pytest.raises(kiln.UnsupportedError, match="'CUDAExecutionProvider' is not supported"):
        ort.InferenceSession(tinycnn, providers=["CUDAExecutionProvider",
                                                 "CPUExecutionProvider"])
    with pytest.raises(kiln.UnsupportedError, match="options"):
        ort.InferenceSession(tinycnn, providers=[("CPUExecutionProvider",
                                                  {"arena_extend_strategy": "x"})])
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    with pytest.raises(kiln.UnsupportedError, match="ORT_PARALLEL"):
        ort.InferenceSession(tinycnn, so)
    so = ort.SessionOptions()
    so.enable_profiling = True
    with pytest.raises(kiln.UnsupportedError, match="enable_profiling"):
        ort.InferenceSession(tinycnn, so)
    so = ort.SessionOptions()
    so.optimized_model_filepath = "/tmp/x.onnx"
    with pytest.raises(kiln.UnsupportedError, match="optimized_model_filepath"):
        ort.InferenceSession(tinycnn, so)
    with pytest.raises(kiln.UnsupportedError, match="add_session_config_entry"):
        ort.SessionOptions().add_session_config_entry("session.use_env_allocators", "1")
    with pytest.raises(AttributeError):
        ort.SessionOptions().no_such_option = 1
    with pytest.raises(kiln.UnsupportedError, match="disabled_optimizers"):
        ort.InferenceSession(tinycnn, disabled_optimizers=["x"])
    sess = ort.InferenceSession(tinycnn)
    with pytest.raises(kiln.UnsupportedError):
        sess.io_binding()
    ro = ort.RunOptions()
    ro.terminate = True
    x = np.zeros((1, 3, 32, 32), np.float32)
    with pytest.raises(kiln.UnsupportedError, match="terminate"):
        sess.run(None, {"input": x}, ro)
    with pytest.raises(kiln.DtypeError, match="expected float32"):
        sess.run(None, {"input": x.astype(np.float64)})
