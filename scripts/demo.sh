#!/usr/bin/env bash
# The first thing to run on a fresh Debian 12 machine: installs what is
# missing, builds kiln, inspects the bundled model (models/tinycnn, a small
# CNN exported from PyTorch), builds it into an engine, runs that, and checks
# the result against ONNX Runtime's output.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
gen=()
[ ! -f build/CMakeCache.txt ] && command -v ninja >/dev/null && gen=(-GNinja)
cmake "${gen[@]}" -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
model=models/tinycnn/model.onnx
data=models/tinycnn/test_data_set_0
build/kiln inspect "$model" --shape input=1x3x32x32
echo
out=$(mktemp -d)
build/kiln build "$model" -o "$out/tinycnn.kiln" --shape input=1x3x32x32
build/kiln run "$out/tinycnn.kiln" --input-dir "$data" --output-dir "$out"
echo "kiln ran the engine $out/tinycnn.kiln and wrote $out/output_0.pb:"
build/kiln run "$out/tinycnn.kiln" --input-dir "$data"
echo "the engine's output against ONNX Runtime's ($data/output_0.pb, rtol 1e-3, atol 1e-4):"
build/tests/kiln_conformance --engine --cases models --rtol 1e-3 --atol 1e-4
