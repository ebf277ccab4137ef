#!/usr/bin/env bash
# The whole test suite (README's second command; CI runs it too):
#  1. gcc build, warnings as errors: unit tests, CLI and hostile-input tests,
#     ONNX conformance (no listed case may regress), real models vs ONNX Runtime
#     then the Python binding and the CMake package installed into build/python/prefix
#     (tests/python/run.sh: pytest in a venv of Debian's Python, examples built)
#  2. clang build with AddressSanitizer + UndefinedBehaviorSanitizer (no
#     benchmarks: the gcc build compiles those): the same tests (less
#     conformance_optimized), and a bounded run of each libFuzzer target
#     (KILN_FUZZ_SECONDS each, default 10; longer runs: KILN_FUZZ_SECONDS=600)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
jobs=$(nproc)

echo "== gcc build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON >/dev/null
cmake --build build -j"$jobs" >/dev/null
ctest --test-dir build --output-on-failure -j"$jobs"
echo "== Python binding and CMake package, from an installed prefix"
tests/python/run.sh build

echo "== clang build with ASan + UBSan, and fuzzers"
CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON \
  -DKILN_SANITIZE=ON -DKILN_FUZZ=ON -DKILN_BENCH=OFF -DKILN_FUZZ_SECONDS="${KILN_FUZZ_SECONDS:-10}" >/dev/null
cmake --build build-asan -j"$jobs" >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
echo "== all tests passed"
