"""The binding's outputs equal the CLI's (`kiln run`) on the exported models, and an
ONNX Runtime-style script gives ONNX Runtime's outputs."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import kiln
from conftest import CACHE, model_params

HERE = pathlib.Path(__file__).resolve().parent


def inputs_of(engine, data_dir):
    return {info.name: kiln.read_tensor(data_dir / ("input_%d.pb" % i))
            for i, info in enumerate(engine.inputs)}


@pytest.mark.parametrize("model", model_params())
def test_binding_equals_cli(model, kiln_bin, tmp_path, monkeypatch):
    # the first-choice tactics in both builds: timed ones let the machine's load
    # pick a step's kernel, and two builds could then round differently
    monkeypatch.setenv("KILN_TACTICS", "heuristic")
    d = CACHE / model
    data = d / "test_data_set_0"
    subprocess.run([str(kiln_bin), "run", str(d / "model.onnx"), "--input-dir", str(data),
                    "--output-dir", str(tmp_path), "--threads", "2"], check=True)
    engine = kiln.load(d / "model.onnx", threads=2)
    out = engine.run(inputs_of(engine, data))
    assert list(out) == [o.name for o in engine.outputs]
    for i, info in enumerate(engine.outputs):
        cli = kiln.read_tensor(tmp_path / ("output_%d.pb" % i))
        got = out[info.name]
        assert got.dtype == cli.dtype and got.shape == cli.shape, info.name
        # same build, same kernels, same thread count: bit-identical
        assert np.array_equal(got, cli, equal_nan=True), (
            "%s: output %s differs from kiln run's by %g" %
            (model, info.name, np.max(np.abs(got.astype(np.float64) - cli))))
        assert got.flags.owndata and got.flags.c_contiguous


@pytest.mark.parametrize("model", model_params(with_reference=True))
def test_ort_style_script(model):
    """tests/python/ort_style_script.py is written for onnxruntime; only its import
    differs.  It compares its outputs with ONNX Runtime's (output_*.pb, made by
    scripts/make_reference.sh) at real_models.sh's tolerances."""
    pytest.importorskip("onnx")  # the script reads the test data the way ORT users do
    d = CACHE / model
    r = subprocess.run([sys.executable, str(HERE / "ort_style_script.py"), str(d / "model.onnx"),
                        str(d / "test_data_set_0")], capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "match ONNX Runtime" in r.stdout
