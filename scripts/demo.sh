#!/usr/bin/env bash
# The first thing to run on a fresh Debian 12 machine: installs what is
# missing, builds kiln, and runs the bundled model (models/tinycnn, a small
# CNN exported from PyTorch) with ONNX Runtime's output beside kiln's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
model=models/tinycnn/model.onnx
data=models/tinycnn/test_data_set_0
build/kiln inspect "$model"
echo
out=$(mktemp -d)
build/kiln run "$model" --input-dir "$data" --output-dir "$out"
echo "kiln wrote $out/output_0.pb:"
build/kiln run "$model" --input-dir "$data"
echo "compared with ONNX Runtime's output ($data/output_0.pb, rtol 1e-3, atol 1e-4):"
build/tests/kiln_conformance --cases models --rtol 1e-3 --atol 1e-4
