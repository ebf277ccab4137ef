"""The examples against an installed prefix: examples/c configured with
find_package(kiln) (CMAKE_PREFIX_PATH=KILN_PREFIX), built and run, and
examples/python/classify.py with the installed binding; both print the same top-5.
Also find_package's version check: 0.1 is found, 0.2 and 1.0 are not."""
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import ROOT

PREFIX = os.environ.get("KILN_PREFIX")
pytestmark = pytest.mark.skipif(not PREFIX, reason="KILN_PREFIX (an installed kiln) not set")
SQUEEZE = pathlib.Path(os.path.expanduser(os.environ.get(
    "KILN_CACHE", "~/.cache/kiln/models"))) / "squeezenet1_1"


@pytest.fixture(scope="module")
def classify(tmp_path_factory):
    b = tmp_path_factory.mktemp("example-build")
    subprocess.run(["cmake", "-S", str(ROOT / "examples" / "c"), "-B", str(b),
                    "-DCMAKE_PREFIX_PATH=" + PREFIX, "-DCMAKE_BUILD_TYPE=Release",
                    "-DCMAKE_C_FLAGS=-Werror"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(b)], check=True, capture_output=True)
    return b / "classify"


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("which", ["tinycnn", "squeezenet1_1"])
def test_c_and_python_examples_agree(classify, which, tmp_path):
    if which == "tinycnn":
        model, data = ROOT / "models" / "tinycnn" / "model.onnx", None
        inp = ROOT / "models" / "tinycnn" / "test_data_set_0" / "input_0.pb"
    else:
        if not (SQUEEZE / "model.onnx").is_file():
            pytest.skip("squeezenet1_1 not exported")
        model, inp = SQUEEZE / "model.onnx", SQUEEZE / "test_data_set_0" / "input_0.pb"
    c = run([classify, model, inp, "--threads", "1"])
    py = run([sys.executable, ROOT / "examples" / "python" / "classify.py", model, inp,
              "--threads", "1"])
    assert c.splitlines()[0].endswith("classes") and len(c.splitlines()) == 6, c
    assert c == py
    # an engine file, built by the CLI installed in the prefix, classifies the same
    eng = tmp_path / "m.kiln"
    subprocess.run([os.path.join(PREFIX, "bin", "kiln"), "build", str(model), "-o", str(eng)],
                   check=True, capture_output=True)
    assert run([classify, eng, inp, "--threads", "1"]).splitlines()[1:] == c.splitlines()[1:]
    # a random input of the model's shape
    assert len(run([classify, model]).splitlines()) == 6


def test_c_example_reports_errors(classify, tmp_path):
    r = subprocess.run([str(classify), str(tmp_path / "missing.onnx")], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "missing.onnx" in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.parametrize("version,found", [("0.1", True), ("0.1.0", True), ("0.2", False),
                                           ("1.0", False)])
def test_find_package_version(version, found, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(v LANGUAGES C)\n"
        "find_package(kiln %s)\nif(NOT kiln_FOUND)\n  message(FATAL_ERROR \"not found\")\n"
        "endif()\nget_target_property(inc kiln::kiln INTERFACE_INCLUDE_DIRECTORIES)\n"
        "message(STATUS \"kiln ${kiln_VERSION} include ${inc}\")\n" % version)
    r = subprocess.run(["cmake", "-S", str(src), "-B", str(tmp_path / "b"),
                        "-DCMAKE_PREFIX_PATH=" + PREFIX], capture_output=True, text=True)
    assert (r.returncode == 0) == found, r.stdout + r.stderr
    if found:
        assert "kiln 0.1.0 include " in r.stdout
