"""Shared fixtures of the Python binding's tests (tests/python/run.sh runs them).

Environment: KILN_BIN (the CLI, default build/kiln), KILN_PREFIX (the install prefix the
binding was built against; the CMake example is built against it), KILN_CACHE (the
exported models, default ~/.cache/kiln/models), KILN_REQUIRE_MODELS=1 (CI: the models
named in KILN_REQUIRED_MODELS, default squeezenet1_1 bert_tiny, must be there),
KILN_LONG_TESTS=1 (also models over 25 MB)."""
import os
import pathlib

import pytest

# Deterministic builds: the binding and the CLI must choose the same kernels to
# give bit-identical outputs, and timed tactic choice can differ between builds.
os.environ["KILN_TACTICS"] = "heuristic"

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("KILN_CACHE", os.path.expanduser("~/.cache/kiln/models")))
REQUIRE = os.environ.get("KILN_REQUIRE_MODELS", "0") == "1"
REQUIRED = os.environ.get("KILN_REQUIRED_MODELS", "squeezenet1_1 bert_tiny").split()
MAX_BYTES = None if os.environ.get("KILN_LONG_TESTS") == "1" else 25 << 20
TINYCNN = ROOT / "models" / "tinycnn" / "model.onnx"


def exported_models(with_reference=False):
    """Names of the cached models with test_data_set_0 inputs (and ONNX Runtime's
    outputs when with_reference), small enough for the suite."""
    names = []
    if CACHE.is_dir():
        for d in sorted(CACHE.iterdir()):
            m = d / "model.onnx"
            t = d / "test_data_set_0"
            if not m.is_file() or not (t / "input_0.pb").is_file():
                continue
            if with_reference and not (t / "output_0.pb").is_file():
                continue
            if MAX_BYTES is not None and m.stat().st_size > MAX_BYTES:
                continue
            names.append(d.name)
    return names


def model_params(with_reference=False):
    names = exported_models(with_reference)
    if REQUIRE:
        missing = [m for m in REQUIRED if m not in names]
        if missing:
            raise RuntimeError("KILN_REQUIRE_MODELS=1 but %s missing from %s (run "
                               "scripts/make_reference.sh)" % (", ".join(missing), CACHE))
    if not names:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason="no exported models in %s (scripts/make_reference.sh)" % CACHE))]
    return names


@pytest.fixture(scope="session")
def kiln_bin():
    b = pathlib.Path(os.environ.get("KILN_BIN", ROOT / "build" / "kiln"))
    if not b.is_file():
        pytest.skip("no kiln CLI at %s (set KILN_BIN)" % b)
    return b


@pytest.fixture(scope="session")
def tinycnn():
    return str(TINYCNN)
