#!/usr/bin/env bash
# The trained models of scripts/train_models.py: kiln's fp32 accuracy and
# outputs against PyTorch's.
#   tests/trained_models.sh KILN_BIN PROJECT_DIR
# For each of digits_cnn, seq_gru, seq_attn in the cache ($KILN_CACHE,
# default ~/.cache/kiln/models):
#  1. held-out top-1 accuracy (scripts/eval_accuracy.py) within 0.2 points
#     of PyTorch's (info.json): 64 samples a run through an engine with a
#     dynamic batch profile; with KILN_LONG_TESTS=1 also one kiln run per
#     sample through an engine built for batch 1 (1,600 processes: the
#     batch-1 engine is checked in 3 below on every test run);
#  2. test_data_set_0 (16 held-out samples in one batch) through an engine
#     built with a dynamic batch profile, and through the unoptimized
#     reference path, against PyTorch's outputs at rtol 1e-3 / atol 1e-4;
#  3. kiln validate on the calibration samples (--data calib, one sample per
#     folder): the batch-1 engine against the model, max abs error 1e-4.
# Exit 77 (skipped) when no trained model is in the cache or /usr/bin/python3
# lacks numpy, unless KILN_REQUIRE_MODELS=1 (CI), where every model named in
# KILN_REQUIRED_TRAINED (default: all three) must be there.
set -u
kiln=$1
project=$2
PY=${KILN_PYTHON:-/usr/bin/python3}
cache="${KILN_CACHE:-$HOME/.cache/kiln/models}"
models="digits_cnn seq_gru seq_attn"
required="${KILN_REQUIRED_TRAINED:-$models}"
require="${KILN_REQUIRE_MODELS:-0}"

prepared() { [ -f "$cache/$1/info.json" ] && [ -f "$cache/$1/heldout/labels.txt" ]; }

if ! "$PY" -c 'import numpy' 2>/dev/null; then
  if [ "$require" = 1 ]; then
    echo "trained_models: $PY cannot import numpy (scripts/install_deps.sh --models)" >&2
    exit 1
  fi
  echo "trained_models: $PY has no numpy; skipped"
  exit 77
fi
have=()
for m in $models; do prepared "$m" && have+=("$m"); done
if [ "$require" = 1 ]; then
  for m in $required; do
    if ! prepared "$m"; then
      echo "trained_models: $m is missing from $cache (run scripts/train_models.py)" >&2
      exit 1
    fi
  done
fi
if [ ${#have[@]} = 0 ]; then
  echo "trained_models: no trained models in $cache; skipped (scripts/train_models.py makes them)"
  exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln_trained.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
failed() { echo "FAIL $1: $2"; fail=1; }

for m in "${have[@]}"; do
  mdir="$cache/$m"
  echo "== $m"
  # input name and per-sample dims from info.json: "tokens" and "20"
  read -r name dims < <("$PY" -c 'import json, sys
i = json.load(open(sys.argv[1]))["input"]
print(i["name"], "x".join(str(d) for d in i["shape"][1:]))' "$mdir/info.json")

  # 1. held-out accuracy
  batches=(64)
  [ "${KILN_LONG_TESTS:-0}" = 1 ] && batches+=(1)
  for b in "${batches[@]}"; do
    eval_args=(--batch "$b")
    [ "$b" = 1 ] && eval_args=()
    if ! "$PY" "$project/scripts/eval_accuracy.py" "$kiln" "$mdir/model.onnx" "$mdir/heldout" \
        --max-diff 0.2 "${eval_args[@]}"; then
      failed "$m" "held-out accuracy (batch $b) differs from PyTorch's by more than 0.2 points"
    fi
  done

  # 2. test_data_set_0 against PyTorch's outputs
  if ! "$kiln" build "$mdir/model.onnx" -o "$tmp/$m.dyn.kiln" \
      --profile "$name=1x$dims:16x$dims:64x$dims" >"$tmp/build.log" 2>&1; then
    cat "$tmp/build.log"
    failed "$m" "kiln build --profile $name=1x$dims:16x$dims:64x$dims"
  else
    for variant in engine reference; do
      out="$tmp/$m.$variant"
      if [ $variant = engine ]; then
        cmd=("$kiln" run "$tmp/$m.dyn.kiln")
      else
        cmd=("$kiln" run "$mdir/model.onnx" --no-optimize)
      fi
      if ! "${cmd[@]}" --input-dir "$mdir/test_data_set_0" --output-dir "$out"; then
        failed "$m" "kiln run ($variant) on test_data_set_0"
        continue
      fi
      echo "test_data_set_0, $variant vs PyTorch:"
      if ! "$PY" "$project/scripts/compare_outputs.py" "$out" \
          "$mdir/torch_outputs/test_data_set_0" --rtol 1e-3 --atol 1e-4; then
        failed "$m" "$variant outputs on test_data_set_0 differ from PyTorch's"
      fi
    done
  fi

  # 3. kiln validate over the calibration samples
  if ! "$kiln" build "$mdir/model.onnx" -o "$tmp/$m.kiln" --shape "$name=1x$dims" \
      >"$tmp/build.log" 2>&1; then
    cat "$tmp/build.log"
    failed "$m" "kiln build --shape $name=1x$dims"
  elif ! "$kiln" validate "$tmp/$m.kiln" --against "$mdir/model.onnx" --data "$mdir/calib" \
      --max-abs-error 1e-4 --runs 1 --warmup 0 >"$tmp/validate.log" 2>&1; then
    cat "$tmp/validate.log"
    failed "$m" "kiln validate --data calib --max-abs-error 1e-4"
  else
    grep -E '^(.* against |PASS)' "$tmp/validate.log"
  fi
done

if [ "$fail" = 1 ]; then
  echo "trained_models: FAILED"
  exit 1
fi
echo "trained_models: ${#have[@]} models match PyTorch (accuracy within 0.2 points, outputs rtol 1e-3 atol 1e-4)"
