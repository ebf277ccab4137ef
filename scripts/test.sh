#!/usr/bin/env bash
# The whole test suite (README's second command; CI runs it too):
#  1. gcc build (Release: -O3, no debug information, which took a fifth of
#     the compile), warnings as errors: unit tests, CLI and hostile-input tests,
#     ONNX conformance (no listed case may regress), real models vs ONNX Runtime
#     then the Python binding and the CMake package installed into build/python/prefix
#     (tests/python/run.sh: pytest in a venv of Debian's Python, examples built)
#  2. clang build with AddressSanitizer + UndefinedBehaviorSanitizer (no
#     benchmarks: the gcc build compiles those): the same tests (less
#     conformance_optimized), and a bounded run of each libFuzzer target
#     (KILN_FUZZ_SECONDS each, default 10; longer runs: KILN_FUZZ_SECONDS=600)
#  3. clang build with ThreadSanitizer of what kiln serve's and kiln
#     loadgen's tests need (the CLI, validate_poke, the test_serve_* unit
#     tests of serve/tests; the micro-kernels uninstrumented, see
#     CMakeLists.txt): those tests (serve, loadgen, test_serve_*), the pool
#     on every call (KILN_POOL_MIN_US=0); the first race ends the server
#     (exit 66)
# A build without libmicrohttpd or libcurl leaves kiln serve or kiln loadgen
# out (README.md, "Optional components"): each configure prints what it left
# out, and stage 3 is skipped without kiln serve.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
jobs=$(nproc)
# configure's output, less all but its lines about components left out
left_out() { grep -E '^-- kiln: .* not built' || true; }
# Ninja for a new build folder when it is there (a folder keeps the
# generator it was first configured with)
generator() { if [ ! -f "$1/CMakeCache.txt" ] && command -v ninja >/dev/null; then echo "-GNinja"; fi; }
# each stage's wall time, printed as it ends and all together at the end
times=()
stage_start=$SECONDS
stage() {
  [ -n "${stage_name:-}" ] && times+=("$(printf '%5d s  %s' $((SECONDS - stage_start)) "$stage_name")")
  stage_name=$1
  stage_start=$SECONDS
  [ -n "$1" ] && echo "== $1"
  return 0
}

stage "gcc build"
cmake $(generator build) -S . -B build -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON | left_out
cmake --build build -j"$jobs" >/dev/null
stage "gcc tests"
ctest --test-dir build --output-on-failure -j"$jobs"
stage "Python binding and CMake package, from an installed prefix"
tests/python/run.sh build

stage "clang build with ASan + UBSan, and fuzzers"
CC=clang cmake $(generator build-asan) -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON \
  -DKILN_SANITIZE=ON -DKILN_FUZZ=ON -DKILN_BENCH=OFF -DKILN_FUZZ_SECONDS="${KILN_FUZZ_SECONDS:-10}" | left_out
cmake --build build-asan -j"$jobs" >/dev/null
stage "ASan + UBSan tests and fuzzers"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"

stage "clang build with ThreadSanitizer: kiln serve, kiln loadgen and their tests"
CC=clang cmake $(generator build-tsan) -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON \
  -DKILN_TSAN=ON -DKILN_BENCH=OFF | left_out
if grep -q '^KILN_HAVE_SERVE:INTERNAL=ON$' build-tsan/CMakeCache.txt; then
  tsan_targets=(kiln validate_poke)
  for f in serve/tests/test_serve_*.c; do [ -e "$f" ] && tsan_targets+=("$(basename "$f" .c)"); done
  cmake --build build-tsan -j"$jobs" --target "${tsan_targets[@]}" >/dev/null
  TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1" KILN_POOL_MIN_US=0 \
    ctest --test-dir build-tsan --output-on-failure -j"$jobs" -R '^(serve|loadgen|test_serve_.*)$'
else
  echo "kiln serve is not built (no libmicrohttpd): nothing for ThreadSanitizer to run"
fi
stage ""
echo "== all tests passed in $SECONDS s"
printf '%s\n' "${times[@]}"
