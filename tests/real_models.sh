#!/usr/bin/env bash
# Real exported models against ONNX Runtime's outputs.
#   tests/real_models.sh KILN_BIN PROJECT_DIR
# Runs every model in the cache ($KILN_CACHE, default ~/.cache/kiln/models)
# that scripts/make_reference.sh prepared (model.onnx + test_data_set_*/ with
# ORT's output_*.pb), through the conformance runner with rtol 1e-3 /
# atol 1e-4.  Exit 77 (skipped) when the cache holds no model, unless
# KILN_REQUIRE_MODELS=1 (CI), where the models named in
# KILN_REQUIRED_MODELS (default: squeezenet1_1 bert_tiny) must be present.
set -u
kiln_bin=$1
runner="$(dirname "$kiln_bin")/tests/kiln_conformance"
cache="${KILN_CACHE:-$HOME/.cache/kiln/models}"
required="${KILN_REQUIRED_MODELS:-squeezenet1_1 bert_tiny}"

have=0
for d in "$cache"/*/; do
  [ -f "$d/model.onnx" ] && [ -f "$d/test_data_set_0/output_0.pb" ] && have=$((have + 1))
done
if [ "${KILN_REQUIRE_MODELS:-0}" = 1 ]; then
  for m in $required; do
    if [ ! -f "$cache/$m/test_data_set_0/output_0.pb" ]; then
      echo "real_models: $m is missing from $cache (run scripts/make_reference.sh)" >&2
      exit 1
    fi
  done
elif [ "$have" = 0 ]; then
  echo "real_models: no prepared models in $cache; skipped (scripts/make_reference.sh prepares them)"
  exit 77
fi
"$runner" --cases "$cache" --rtol 1e-3 --atol 1e-4 --timeout 600 || exit 1
echo "== optimized"
"$runner" --optimize --cases "$cache" --rtol 1e-3 --atol 1e-4 --timeout 600 || exit 1
echo "== built into engine files, loaded and run with their memory plans"
exec "$runner" --engine --cases "$cache" --rtol 1e-3 --atol 1e-4 --timeout 600
