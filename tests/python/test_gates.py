"""kiln.validate (kn_validate) and kiln.build's accuracy budgets (kn_model_build_budgeted)
on tinycnn: limits that pass and limits that fail, samples from memory against the CLI's
--data, labels, the budgeted search's steps kept in fp32 (checked by validating the Engine
it returns, and against `kiln build`'s choice), and the errors."""
import json
import pathlib
import re
import subprocess

import numpy as np
import pytest

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA0 = ROOT / "models" / "tinycnn" / "test_data_set_0"
SHAPES = {"input": (1, 3, 32, 32)}
QUICK = dict(runs=3, warmup=1)


def sample(seed):
    return {"input": np.random.default_rng(seed).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)}


def test_validate_passes_then_fails(tinycnn):
    e = kiln.build(tinycnn, shapes=SHAPES)
    r = kiln.validate(e, against=tinycnn, max_abs_error=1e-3, min_cosine=0.9999,
                      max_p99_ms=10000, max_rss="64G", **QUICK)
    assert r.passed and not r.failed
    assert list(r.gates) == ["max_p99_ms", "max_rss", "max_abs_error", "min_cosine"]
    assert all(g.passed and g.margin >= 0 for g in r.gates.values())
    assert r.gates["max_abs_error"].output == "logits" and r.gates["max_abs_error"].sample == 0
    assert r.gates["max_p99_ms"].output is None
    assert r.gates["max_rss"].limit == 64 << 30
    assert r.samples == 1 and r.inputs == "input=1x3x32x32" and r.runs == 3
    assert r.max_abs_error < 1e-3 and r.min_cosine > 0.9999
    lat = r.latency_runs_ms
    assert len(lat) == 3 and list(lat) == sorted(lat)
    assert r.latency_ms["min"] == lat[0] and r.latency_ms["max"] == lat[-1]
    assert r.peak_rss_bytes > 0 and r.top1 is None
    # an impossible p99: measured, then failed with a negative margin; not an exception
    r = kiln.validate(e, against=tinycnn, max_p99_ms=1e-9, max_abs_error=1e-3, **QUICK)
    assert not r.passed
    assert [g.name for g in r.failed] == ["max_p99_ms"]
    assert r.gates["max_p99_ms"].margin < 0 and r.gates["max_abs_error"].passed
    # no limits: measurements only, a pass
    assert kiln.validate(e, against=tinycnn, **QUICK).passed


def test_validate_bf16_fails_tight_error(tinycnn):
    e = kiln.build(tinycnn, shapes=SHAPES, precision="bf16")
    r = kiln.validate(e, against=tinycnn, max_abs_error=1e-6, min_cosine=0.99, **QUICK)
    assert not r.passed
    g = r.gates["max_abs_error"]
    assert not g.passed and g.measured > 1e-6 and g.margin < 0 and g.output == "logits"
    assert r.gates["min_cosine"].passed


def test_validate_matches_cli(tinycnn, kiln_bin, tmp_path):
    """An engine file validated from Python with the test data in memory, and by the CLI
    with --data: the same accuracy, and as_dict() shaped as the CLI's JSON."""
    path = tmp_path / "tiny.kiln"
    kiln.build(tinycnn, shapes=SHAPES).save(path)
    x = kiln.read_tensor(DATA0 / "input_0.pb")
    r = kiln.validate(path, against=tinycnn, data=[{"input": x}], max_abs_error=1e-3,
                      threads=1, **QUICK)
    cli = subprocess.run([str(kiln_bin), "validate", str(path), "--against", tinycnn,
                          "--data", str(DATA0), "--max-abs-error", "1e-3", "--threads", "1",
                          "--runs", "3", "--warmup", "1", "--json"],
                         capture_output=True, text=True, check=True)
    c = json.loads(cli.stdout)
    d = r.as_dict()
    assert set(d) == set(c)
    assert set(d["accuracy"]) == set(c["accuracy"])
    assert d["pass"] is c["pass"] is True
    assert d["accuracy"]["outputs"][0]["max_abs_error"] == pytest.approx(
        c["accuracy"]["outputs"][0]["max_abs_error"], rel=1e-6, abs=1e-12)
    assert d["accuracy"]["outputs"][0]["cosine"] == pytest.approx(
        c["accuracy"]["outputs"][0]["cosine"], abs=1e-9)
    assert [l["name"] for l in d["limits"]] == [l["name"] for l in c["limits"]]
    assert d["inputs"] == c["inputs"] and d["samples"] == c["samples"] == 1


def test_validate_samples_and_labels(tinycnn):
    e = kiln.build(tinycnn, shapes=SHAPES)
    data = [sample(k) for k in range(3)]
    preds = [int(np.argmax(e.run(s)["logits"])) for s in data]
    r = kiln.validate(e, against=tinycnn, data=data, labels=preds, max_accuracy_drop=0,
                      **QUICK)
    assert r.passed and r.samples == 3
    assert r.top1 == r.reference_top1 == 100.0
    wrong = [(p + 1) % 10 for p in preds]
    r = kiln.validate(e, against=tinycnn, data=data, labels=wrong, **QUICK)
    assert r.top1 == r.reference_top1 == 0.0
    # the worst sample is named by its index
    data[1] = {"input": data[1]["input"] * 4}
    r = kiln.validate(e, against=tinycnn, data=data, max_abs_error=1e-3, **QUICK)
    assert r.gates["max_abs_error"].sample == r.outputs[0]["worst_abs_sample"]
    # one dict is one sample
    assert kiln.validate(e, against=tinycnn, data=data[0], **QUICK).samples == 1


def test_validate_errors(tinycnn, tmp_path):
    e = kiln.build(tinycnn, shapes=SHAPES)
    path = tmp_path / "tiny.kiln"
    e.save(path)
    with pytest.raises(kiln.InvalidArgumentError, match="--against takes the ONNX model"):
        kiln.validate(e, against=path, **QUICK)
    with pytest.raises(kiln.FileError, match="cannot open"):
        kiln.validate(e, against=tmp_path / "nope.onnx", **QUICK)
    with pytest.raises(kiln.MissingError, match=r"data\[0\]: input 'input' \(0\) was not given"):
        kiln.validate(e, against=tinycnn, data=[{}], **QUICK)
    with pytest.raises(kiln.InvalidArgumentError, match="data\\[0\\] names an input"):
        kiln.validate(e, against=tinycnn, data=[dict(sample(0), extra=np.zeros(1))], **QUICK)
    with pytest.raises(kiln.ShapeError):
        kiln.validate(e, against=tinycnn, data=[{"input": np.zeros((1, 3, 16, 16), np.float32)}],
                      **QUICK)
    with pytest.raises(kiln.InvalidArgumentError, match="1 label"):
        kiln.validate(e, against=tinycnn, data=[sample(0), sample(1)], labels=[1], **QUICK)
    with pytest.raises(kiln.MissingError, match="labelled samples"):
        kiln.validate(e, against=tinycnn, max_accuracy_drop=1, **QUICK)
    with pytest.raises(kiln.InvalidArgumentError, match="min_cosine"):
        kiln.validate(e, against=tinycnn, min_cosine=2, **QUICK)
    with pytest.raises(kiln.InvalidArgumentError, match="max_rss"):
        kiln.validate(e, against=tinycnn, max_rss="lots", **QUICK)


def kept_by_cli(kiln_bin, tinycnn, tmp_path, bound):
    """The steps `kiln build --precision bf16 --min-cosine bound` keeps in fp32."""
    out = subprocess.run([str(kiln_bin), "build", tinycnn, "-o", str(tmp_path / "cli.kiln"),
                          "--shape", "input=1x3x32x32", "--tactics", "heuristic", "--precision",
                          "bf16", "--min-cosine", repr(bound), "--runs", "2", "--warmup", "0"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"^kept in fp32 \(\d+ of \d+ steps\): (.*)$", out, re.M)
    assert m, out
    return re.findall(r"'([^']*)'", m.group(1)), out


def test_budget_build(tinycnn, kiln_bin, tmp_path):
    # a loose bound holds as requested: nothing kept in fp32
    e = kiln.build(tinycnn, shapes=SHAPES, precision="bf16", tactics="heuristic",
                   min_cosine=0.99)
    b = e.budget
    assert b.passed and b.kept_fp32 == [] and len(b.trials) == 1 and b.builds == 1
    steps = [s["name"] for s in b.steps]
    assert len(steps) >= 2 and all(s["precision"] == "bf16" for s in b.steps)
    c_req = b.trials[0]["cosine"]
    assert c_req < 1 - 1e-9
    assert kiln.build(tinycnn, shapes=SHAPES).budget is None
    # halfway (in 1 - cosine) to exactness: the requested build breaks it, some steps
    # go back to fp32, and the Engine meets the bound when validated on its own
    bound = 1 - (1 - c_req) / 2
    e = kiln.build(tinycnn, shapes=SHAPES, precision="bf16", tactics="heuristic",
                   min_cosine=bound)
    b = e.budget
    assert b.passed and not b.trials[0]["pass"]
    assert b.trials[1]["phase"] == "all_fp32" and b.trials[1]["pass"]
    assert sorted(b.order) == sorted(steps)
    assert 1 <= len(b.kept_fp32) <= len(steps)
    assert b.kept_fp32 == [s for s in steps if s in b.order[:len(b.kept_fp32)]]
    prec = {e._step_info(i, 1)["name"]: e._step_info(i, 1)["precision"]
            for i in range(e.step_count)}
    assert all(prec[s] == ("fp32" if s in b.kept_fp32 else "bf16") for s in steps)
    assert kiln.validate(e, against=tinycnn, min_cosine=bound, **QUICK).passed
    # the same search as the CLI's
    cli_kept, out = kept_by_cli(kiln_bin, tinycnn, tmp_path, bound)
    assert sorted(cli_kept) == sorted(b.kept_fp32), out
    # the overrides rebuild the same engine
    again = kiln.build(tinycnn, shapes=SHAPES, precision="bf16", tactics="heuristic",
                       layer_precisions=b.layer_precisions)
    x = sample(1)
    np.testing.assert_array_equal(again.run(x)["logits"], e.run(x)["logits"])
    # the bisection, on samples given in memory
    e = kiln.build(tinycnn, shapes=SHAPES, precision="bf16", tactics="heuristic",
                   min_cosine=bound, search="bisect", data=[sample(1)])
    assert e.budget.passed and e.budget.order == []
    assert {t["phase"] for t in e.budget.trials} <= {"requested", "all_fp32", "bisect", "refine"}
    assert kiln.validate(e, against=tinycnn, min_cosine=bound, data=[sample(1)], **QUICK).passed


def test_budget_int8_with_labels(tinycnn, kiln_bin, tmp_path):
    calib = tmp_path / "tiny.calib"
    subprocess.run([str(kiln_bin), "calibrate", tinycnn, "--data", str(DATA0), "-o", str(calib)],
                   capture_output=True, check=True)
    data = [sample(k) for k in range(4)]
    ref = kiln.build(tinycnn, shapes=SHAPES, optimize=False)
    labels = [int(np.argmax(ref.run(s)["logits"])) for s in data]
    e = kiln.build(tinycnn, shapes=SHAPES, precision="int8", calibration=calib,
                   tactics="heuristic", max_accuracy_drop=50, data=data, labels=labels)
    b = e.budget
    assert b.passed and b.reference_top1 == 100.0
    assert all(s["precision"] == "int8" for s in b.steps)
    assert b.trials[-1]["top1_drop"] <= 50


def test_budget_errors(tinycnn, tmp_path):
    with pytest.raises(kiln.LimitError, match="breaks even with every step in fp32") as ex:
        kiln.build(tinycnn, shapes=SHAPES, precision="bf16", tactics="heuristic",
                   max_abs_error=0)
    rep = ex.value.report
    assert rep["trials"][-1]["phase"] == "all_fp32" and not rep["trials"][-1]["pass"]
    assert not rep["pass"] and rep["kept_fp32"] == []
    with pytest.raises(kiln.LimitError, match="no step runs in reduced precision"):
        kiln.build(tinycnn, shapes=SHAPES, tactics="heuristic", max_abs_error=0)
    with pytest.raises(kiln.InvalidArgumentError, match="are for an accuracy budget"):
        kiln.build(tinycnn, data=[sample(0)])
    with pytest.raises(kiln.MissingError, match="needs a calibration"):
        kiln.build(tinycnn, precision="int8")
    with pytest.raises(kiln.InvalidArgumentError, match="search"):
        kiln.build(tinycnn, precision="bf16", min_cosine=0.9, search="random")
    with pytest.raises(kiln.MissingError, match="labelled samples"):
        kiln.build(tinycnn, precision="bf16", max_accuracy_drop=1)
    path = tmp_path / "tiny.kiln"
    kiln.build(tinycnn, shapes=SHAPES).save(path)
    with pytest.raises(kiln.InvalidArgumentError, match="is an engine: kiln.build takes"):
        kiln.build(path, precision="bf16", min_cosine=0.9)
