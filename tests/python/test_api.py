"""kiln.build / load / save, Engine.inputs / outputs, run's input handling, bench and
profile against the CLI's JSON, and the errors."""
import json
import subprocess
import threading

import numpy as np
import pytest

import kiln


def x_tiny(batch=1, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (batch, 3, 32, 32)).astype(np.float32)


def test_info_and_roundtrip(tinycnn, tmp_path):
    e = kiln.build(tinycnn, shapes={"input": (2, 3, 32, 32)})
    assert [(i.name, i.dtype, i.shape) for i in e.inputs] == [("input", np.float32, (2, 3, 32, 32))]
    assert [(o.name, o.dtype, o.shape) for o in e.outputs] == [("logits", np.float32, (2, 10))]
    x = x_tiny(2)
    y = e.run({"input": x})["logits"]
    path = tmp_path / "tiny.kiln"
    e.save(path)
    e2 = kiln.load(path)
    assert e2.is_engine and not e.is_engine
    np.testing.assert_array_equal(e2.run({"input": x})["logits"], y)
    # the ONNX model loaded as such keeps its dynamic batch
    d = kiln.load(tinycnn)
    assert d.inputs[0].shape == (None, 3, 32, 32)
    assert d.inputs[0].dim_params[0] is not None or d.inputs[0].shape[0] is None
    np.testing.assert_allclose(d.run({"input": x})["logits"], y, rtol=1e-5, atol=1e-5)


def test_build_options(tinycnn):
    x = x_tiny(4)
    base = kiln.build(tinycnn, shapes=["input=4x3x32x32"]).run({"input": x})["logits"]
    prof = kiln.build(tinycnn, profiles={"input": ((1, 3, 32, 32), (2, 3, 32, 32),
                                                   (8, 3, 32, 32))})
    assert prof.inputs[0].shape == (None, 3, 32, 32)
    np.testing.assert_allclose(prof.run({"input": x})["logits"], base, rtol=1e-5, atol=1e-5)
    with pytest.raises(kiln.ShapeError, match="outside the engine's profile"):
        prof.run({"input": x_tiny(9)})
    ref = kiln.build(tinycnn, shapes={"input": (4, 3, 32, 32)}, optimize=False)
    np.testing.assert_allclose(ref.run({"input": x})["logits"], base, rtol=1e-4, atol=1e-5)
    ws = kiln.build(tinycnn, shapes={"input": (4, 3, 32, 32)}, workspace="64M",
                    disable_passes=["cse"])
    np.testing.assert_allclose(ws.run({"input": x})["logits"], base, rtol=1e-5, atol=1e-5)
    bf = kiln.build(tinycnn, shapes={"input": (4, 3, 32, 32)}, precision="bf16")
    np.testing.assert_allclose(bf.run({"input": x})["logits"], base, rtol=0.1, atol=0.1)
    with pytest.raises(kiln.InvalidArgumentError, match="precision 'fp8'"):
        kiln.build(tinycnn, precision="fp8")
    with pytest.raises(kiln.InvalidArgumentError, match="no input named 'nope'"):
        kiln.build(tinycnn, shapes={"nope": (1, 2)})
    with pytest.raises(kiln.Error, match="no_such_pass"):
        kiln.build(tinycnn, disable_passes=["no_such_pass"])


def test_input_conversion(tinycnn):
    e = kiln.load(tinycnn, threads=1)
    x = x_tiny(3)
    y = e.run({"input": x})["logits"]
    # strided, Fortran-ordered, byte-swapped and float16 inputs are converted once
    big = np.zeros((3, 3, 32, 64), np.float32)
    big[..., ::2] = x
    np.testing.assert_array_equal(e.run({"input": big[..., ::2]})["logits"], y)
    np.testing.assert_array_equal(e.run({"input": np.asfortranarray(x)})["logits"], y)
    np.testing.assert_array_equal(e.run({"input": x.astype(">f4")})["logits"], y)
    h = x.astype(np.float16)
    np.testing.assert_array_equal(e.run({"input": h})["logits"],
                                  e.run({"input": h.astype(np.float32)})["logits"])
    # the input is not written to, and outputs are fresh arrays
    x0 = x.copy()
    a = e.run({"input": x})["logits"]
    b = e.run({"input": x})["logits"]
    np.testing.assert_array_equal(x, x0)
    assert a is not b and not np.shares_memory(a, b) and a.flags.owndata


def test_bad_inputs(tinycnn):
    e = kiln.load(tinycnn)
    label = tinycnn
    x = x_tiny()
    with pytest.raises(kiln.DtypeError) as ei:
        e.run({"input": x.astype(np.float64)})
    assert str(ei.value) == ("%s: input 'input': expected float32 ?x3x32x32, got float64 "
                             "1x3x32x32" % label)
    assert ei.value.status == 6 and isinstance(ei.value, ValueError)
    with pytest.raises(kiln.ShapeError) as ei:
        e.run({"input": x[:, :2]})
    assert str(ei.value) == ("%s: input 'input': expected float32 ?x3x32x32, got float32 "
                             "1x2x32x32" % label)
    with pytest.raises(kiln.ShapeError, match="expected float32 .*got float32 3x32x32"):
        e.run({"input": x[0]})
    with pytest.raises(kiln.MissingError) as ei:
        e.run({})
    assert str(ei.value) == "%s: input 'input' (0) was not given" % label
    for bad in ([[1.0, 2.0]], None, 3.0, "x"):
        with pytest.raises(kiln.InvalidArgumentError,
                           match="input 'input': expected a numpy.ndarray, got "):
            e.run({"input": bad})
    with pytest.raises(kiln.InvalidArgumentError, match="no input named 'other'"):
        e.run({"input": x, "other": x})
    with pytest.raises(kiln.InvalidArgumentError, match="must be a dict"):
        e.run([x])
    with pytest.raises(kiln.DtypeError, match="got a numpy array of dtype numpy.complex64"):
        e.run({"input": x.astype(np.complex64)})
    # the engine still runs after every error
    np.testing.assert_array_equal(e.run({"input": x})["logits"],
                                  kiln.load(tinycnn).run({"input": x})["logits"])


def test_file_errors(tmp_path):
    with pytest.raises(kiln.FileError, match="nope.onnx"):
        kiln.load(tmp_path / "nope.onnx")
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"\x08\x07\x12\x03junk" * 5)
    with pytest.raises(kiln.Error, match="junk.onnx"):
        kiln.load(p)


def test_bench_matches_cli_keys(tinycnn, kiln_bin):
    e = kiln.load(tinycnn, threads=1)
    b = e.bench({"input": x_tiny()}, runs=30, warmup=2)
    cli = json.loads(subprocess.run([str(kiln_bin), "bench", tinycnn, "--threads", "1",
                                     "--runs", "30", "--warmup", "2", "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    assert set(b) == set(cli)
    assert b["runs"] == cli["runs"] == 30 and b["threads"] == cli["threads"] == 1
    assert b["inputs"] == cli["inputs"] == "input=1x3x32x32"
    assert b["min_ms"] <= b["p50_ms"] <= b["p90_ms"] <= b["p99_ms"] <= b["max_ms"]
    assert b["min_ms"] <= b["mean_ms"] <= b["max_ms"]
    assert b["throughput_qps"] == pytest.approx(1e3 / b["mean_ms"])
    # same model, same thread, a quiet enough machine: the same order of magnitude
    assert cli["p50_ms"] / 10 < b["p50_ms"] < cli["p50_ms"] * 10
    # the default stop rule: at least 10 runs and 1 s
    d = e.bench(duration=0.2)
    assert d["runs"] >= 1 and d["wall_s"] >= 0.2


def test_profile_matches_cli(tinycnn, kiln_bin):
    # the CLI builds an ONNX model for the dims it runs: so does this engine
    e = kiln.build(tinycnn, shapes={"input": (1, 3, 32, 32)})
    e.threads = 1
    p = e.profile({"input": x_tiny()}, runs=5, warmup=1)
    cli = json.loads(subprocess.run([str(kiln_bin), "profile", tinycnn, "--threads", "1",
                                     "--runs", "5", "--warmup", "1", "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    for k in ("format", "version", "threads", "runs", "warmup", "inputs"):
        assert p[k] == cli[k], k
    assert set(p["latency_ms"]) == set(cli["latency_ms"])
    assert [s["name"] for s in p["steps"]] == [s["name"] for s in cli["steps"]]
    assert [s["tactic"] for s in p["steps"]] == [s["tactic"] for s in cli["steps"]]
    for mine, theirs in zip(p["steps"], cli["steps"]):
        for k in ("flops", "bytes_read", "bytes_written", "predicted_us", "bound",
                  "arena_live_bytes"):
            assert mine[k] == pytest.approx(theirs[k]), k
        assert set(theirs) - set(mine) <= {"inputs", "outputs", "io_bytes"}
    assert sum(s["share"] for s in p["steps"]) == pytest.approx(1.0)
    assert 0 < p["steps_cover"] <= 1.0
    assert p["memory"]["weights_bytes"] == cli["memory"]["weights_bytes"]
    assert p["steps_total_us"] <= p["latency_ms"]["mean"] * 1e3 * 1.05


def test_threads_property(tinycnn):
    e = kiln.load(tinycnn)
    assert e.threads is None
    e.threads = 1
    assert e.threads == 1
    with pytest.raises(kiln.InvalidArgumentError):
        e.threads = 0
    e.threads = None
    assert e.bench({"input": x_tiny()}, runs=3, threads=1)["threads"] == 1
