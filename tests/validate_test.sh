#!/usr/bin/env bash
# kiln validate and kiln build's limits on the bundled tinycnn model.
#
# usage: validate_test.sh KILN_BIN SOURCE_DIR POKE_BIN
#
# POKE_BIN (tests/validate_poke.c) writes a copy of the model with one
# weight changed.  Checks: a good engine passes sensible limits (exit 0,
# valid JSON); the engine of the changed model fails --max-abs-error and
# --min-cosine against the original (exit 1, both named); an impossible
# --max-p99-ms fails; kiln build refuses to write an engine that fails a
# limit and writes one that passes; usage errors exit 2, bad files exit 1
# with one line on stderr.  Prints "ok NAME" or "FAIL NAME: why" per case.
set -u

if [ $# -ne 3 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR POKE_BIN" >&2
  exit 2
fi
KILN=$1
SRC=$2
POKE=$3
MODEL=$SRC/models/tinycnn/model.onnx
[ -x "$KILN" ] || { echo "FAIL: $KILN is not executable" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "FAIL: no $MODEL" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
ERR=$TMP/err
TIMEOUT=60
RUNS="--runs 5 --warmup 1"
n_ok=0
n_fail=0

pass() {
  echo "ok $1"
  n_ok=$((n_ok + 1))
}

fail() {
  echo "FAIL $1: $2"
  for f in "$OUT" "$ERR"; do
    if [ -s "$f" ]; then head -n 12 "$f" | sed "s|^|    $(basename "$f"): |"; fi
  done
  n_fail=$((n_fail + 1))
}

kiln() {
  timeout "$TIMEOUT" "$KILN" "$@" >"$OUT" 2>"$ERR"
  rc=$?
}

# Why the last run is not a clean exit WANT, or nothing.  A status-1 exit
# must print exactly one line on stderr, starting "kiln: " and holding KEY.
verdict() {
  local want=$1 key=$2
  if [ "$rc" -eq 124 ]; then echo "hung (killed after ${TIMEOUT}s)"; return; fi
  if [ "$rc" -ge 128 ]; then echo "crashed (status $rc)"; return; fi
  if [ "$rc" -ne "$want" ]; then echo "exit $rc, expected $want"; return; fi
  case $want in
  0) if [ -s "$ERR" ]; then echo "exit 0 but stderr is not empty"; fi ;;
  1)
    if [ "$(wc -l <"$ERR")" -ne 1 ]; then echo "stderr has $(wc -l <"$ERR") lines, expected one"
    elif ! head -n 1 "$ERR" | grep -q '^kiln: '; then echo "stderr does not start with 'kiln: '"
    elif [ -n "$key" ] && ! grep -qF -- "$key" "$ERR"; then echo "message does not name '$key'"
    fi ;;
  2)
    if [ ! -s "$ERR" ]; then echo "usage error but nothing on stderr"
    elif [ "$(wc -l <"$ERR")" -ne 1 ]; then echo "usage error not on one line"
    fi ;;
  esac
}

# expect NAME WANT KEY ARGS...
expect() {
  local name=$1 want=$2 key=$3
  shift 3
  kiln "$@"
  local why
  why=$(verdict "$want" "$key")
  if [ -n "$why" ]; then fail "$name" "$why"; else pass "$name"; fi
}

# stdout_has NAME PATTERN...: every extended regex appears in the last stdout.
stdout_has() {
  local name=$1
  shift
  for p in "$@"; do
    if ! grep -qE -- "$p" "$OUT"; then
      fail "$name" "stdout has no line matching '$p'"
      return
    fi
  done
  pass "$name"
}

# check NAME WHY COMMAND...: passes when COMMAND succeeds.
check() {
  local name=$1 why=$2
  shift 2
  if "$@"; then pass "$name"; else fail "$name" "$why"; fi
}

json_ok() {
  local name=$1 file=$2
  if [ -x /usr/bin/python3 ]; then
    if /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "kiln-validate" and d["version"] == 1, "format"
assert isinstance(d["pass"], bool)
for l in d["limits"]:
    assert set(("name", "measured", "limit", "margin", "pass")) <= set(l), l
for o in d["accuracy"]["outputs"]:
    assert "name" in o and "cosine" in o and "max_abs_error" in o, o
for k in ("p50", "p90", "p99"):
    assert d["latency_ms"][k] >= 0
assert d["peak_rss_bytes"] > 0
' "$file" 2>"$TMP/json_err"; then pass "$name"
    else fail "$name" "not the expected JSON: $(tail -n 1 "$TMP/json_err")"; fi
  elif grep -q '"format": "kiln-validate"' "$file" && grep -q '"limits": \[' "$file" &&
    grep -q '"peak_rss_bytes": [0-9]' "$file"; then pass "$name"
  else fail "$name" "not the expected JSON"; fi
}

# ---- engines: the model's, and one from a copy with one weight changed -----
expect build_good 0 "" build "$MODEL" -o "$TMP/good.kiln"
# the Gemm's bias of the first logit: the change reaches the output whatever the input
if "$POKE" "$MODEL" "$TMP/poked.onnx" fc.bias 0 1.0 >"$TMP/poke.txt" 2>&1; then
  pass "poke_one_weight"
else
  fail "poke_one_weight" "$(cat "$TMP/poke.txt")"
fi
expect build_poked 0 "" build "$TMP/poked.onnx" -o "$TMP/poked.kiln"

# ---- (1) a good engine passes sensible limits ------------------------------
LIMITS="--max-p99-ms 1000 --max-rss 2G --max-abs-error 1e-3 --min-cosine 0.9999"
# shellcheck disable=SC2086
expect good_passes 0 "" validate "$TMP/good.kiln" --against "$MODEL" $LIMITS $RUNS
stdout_has good_lines '^PASS max-p99-ms .* limit 1000 ms +margin \+' '^PASS max-rss ' \
  '^PASS max-abs-error ' '^PASS min-cosine ' '^PASS: 4 limits met'
# shellcheck disable=SC2086
expect good_json 0 "" validate "$TMP/good.kiln" --against "$MODEL" $LIMITS $RUNS --json
cp "$OUT" "$TMP/good.json"
json_ok good_json_valid "$TMP/good.json"
check good_json_pass 'no "pass": true' grep -q '"pass": true' "$TMP/good.json"
# the model's own test data, as one folder and as one sub-folder per sample
# shellcheck disable=SC2086
expect good_data_dir 0 "" validate "$TMP/good.kiln" --against "$MODEL" --data \
  "$SRC/models/tinycnn/test_data_set_0" --max-abs-error 1e-3 $RUNS
# shellcheck disable=SC2086
expect good_data_sets 0 "" validate "$TMP/good.kiln" --against "$MODEL" --data \
  "$SRC/models/tinycnn" --min-cosine 0.9999 $RUNS
stdout_has good_data_sets_sample '1 sample \(from .*models/tinycnn\)'
# sub-folders in natural order: test_data_set_2 before test_data_set_10
for k in 0 2 10; do
  mkdir -p "$TMP/sets/test_data_set_$k"
  cp "$SRC/models/tinycnn/test_data_set_0/input_0.pb" "$TMP/sets/test_data_set_$k/"
done
mkdir -p "$TMP/sets/not_a_sample"
# shellcheck disable=SC2086
expect good_three_sets 0 "" validate "$TMP/good.kiln" --against "$MODEL" --data "$TMP/sets" \
  --json $RUNS
check good_three_sets_count 'not 3 samples' grep -q '"samples": 3' "$OUT"
# an engine built with --profile: generated inputs within its range
expect build_profile 0 "" build "$MODEL" -o "$TMP/profile.kiln" \
  --profile input=2x3x32x32:4x3x32x32:8x3x32x32
# shellcheck disable=SC2086
expect profile_passes 0 "" validate "$TMP/profile.kiln" --against "$MODEL" \
  --max-abs-error 1e-3 $RUNS
stdout_has profile_dims 'input=2x3x32x32'
# no limits: measurements, and a pass
# shellcheck disable=SC2086
expect no_limits 0 "" validate "$TMP/good.kiln" --against "$MODEL" $RUNS --threads 1
stdout_has no_limits_says 'no limits given' '^latency \(ms\): ' '^peak RSS: ' "^output 'logits' "

# ---- (2) one weight changed: the accuracy limits fail ----------------------
# shellcheck disable=SC2086
expect poked_fails 1 "--max-abs-error" validate "$TMP/poked.kiln" --against "$MODEL" \
  --max-abs-error 1e-3 --min-cosine 0.9999 --max-rss 2G $RUNS
check poked_names_cosine "stderr does not name --min-cosine" grep -qF -- "--min-cosine" "$ERR"
stdout_has poked_lines '^FAIL max-abs-error .* margin -' '^FAIL min-cosine .* margin -' \
  '^PASS max-rss ' '^FAIL: 2 of 3 limits failed \(max-abs-error, min-cosine\)'
# shellcheck disable=SC2086
expect poked_json 1 "--max-abs-error" validate "$TMP/poked.kiln" --against "$MODEL" \
  --max-abs-error 1e-3 $RUNS --json
cp "$OUT" "$TMP/poked.json"
json_ok poked_json_valid "$TMP/poked.json"
check poked_json_fail 'no "pass": false' grep -q '"pass": false' "$TMP/poked.json"

# shellcheck disable=SC2086
expect poked_sets_fails 1 "--max-abs-error" validate "$TMP/poked.kiln" --against "$MODEL" \
  --data "$TMP/sets" --max-abs-error 1e-3 $RUNS
stdout_has poked_sets_sample "^FAIL max-abs-error .*\\(output 'logits', sample .*/test_data_set_0\\)"

# ---- (3) an impossible latency ---------------------------------------------
# shellcheck disable=SC2086
expect p99_fails 1 "--max-p99-ms" validate "$TMP/good.kiln" --against "$MODEL" \
  --max-p99-ms 0.000001 $RUNS
stdout_has p99_line '^FAIL max-p99-ms .* margin -'
# shellcheck disable=SC2086
expect rss_fails 1 "--max-rss" validate "$TMP/good.kiln" --against "$MODEL" --max-rss 1K $RUNS

# ---- (4) kiln build with limits ---------------------------------------------
# an engine is checked against the model it is built from: a limit it
# cannot meet makes the build refuse
# shellcheck disable=SC2086
expect build_fails_p99 1 "--max-p99-ms" build "$MODEL" -o "$TMP/refused.kiln" \
  --max-p99-ms 0.000001 --max-abs-error 1e-3 $RUNS
check build_no_file "refused.kiln or a temporary beside it was left" \
  test -z "$(compgen -G "$TMP/refused.kiln*")"
check build_says_not_written "the message does not say the engine was not written" \
  grep -qF "refused.kiln not written" "$ERR"
# shellcheck disable=SC2086
expect build_passes 0 "" build "$MODEL" -o "$TMP/gated.kiln" --max-p99-ms 1000 \
  --max-rss 2G --max-abs-error 1e-3 --min-cosine 0.9999 --data "$SRC/models/tinycnn" $RUNS
check build_wrote "gated.kiln missing" test -f "$TMP/gated.kiln"
check build_no_temporary "a temporary left beside gated.kiln" \
  test -z "$(compgen -G "$TMP/gated.kiln.*")"
stdout_has build_passes_lines '-> .*gated\.kiln: ' '^PASS max-p99-ms ' '^PASS: 4 limits met'
expect gated_engine_runs 0 "" validate "$TMP/gated.kiln" --against "$MODEL" --runs 1
expect build_usage_data_alone 2 "" build "$MODEL" -o "$TMP/x.kiln" --data "$SRC/models/tinycnn"
expect build_usage_bad_rss 2 "" build "$MODEL" -o "$TMP/x.kiln" --max-rss 12Q
check build_usage_no_file "x.kiln written" test ! -e "$TMP/x.kiln"

# ---- (5) usage and input errors ---------------------------------------------
expect help 0 "" validate --help
check help_text "no --against in --help" grep -q -- '--against MODEL' "$OUT"
expect usage_unknown 2 "" validate "$TMP/good.kiln" --against "$MODEL" --bogus
expect usage_no_against 2 "" validate "$TMP/good.kiln"
expect usage_no_engine 2 "" validate --against "$MODEL"
expect usage_bad_cosine 2 "" validate "$TMP/good.kiln" --against "$MODEL" --min-cosine 2
expect usage_bad_rss 2 "" validate "$TMP/good.kiln" --against "$MODEL" --max-rss -5M
expect usage_bad_runs 2 "" validate "$TMP/good.kiln" --against "$MODEL" --runs 0
expect usage_bad_shape 2 "" validate "$TMP/good.kiln" --against "$MODEL" --shape input=1xx3
expect usage_json_value 2 "" validate "$TMP/good.kiln" --against "$MODEL" --json=out.json
expect missing_engine 1 "$TMP/nope.kiln" validate "$TMP/nope.kiln" --against "$MODEL"
expect missing_model 1 "$TMP/nope.onnx" validate "$TMP/good.kiln" --against "$TMP/nope.onnx" \
  --runs 1
expect missing_data 1 "$TMP/nodata" validate "$TMP/good.kiln" --against "$MODEL" \
  --data "$TMP/nodata"
mkdir -p "$TMP/empty"
expect empty_data 1 "input_0.pb" validate "$TMP/good.kiln" --against "$MODEL" --data "$TMP/empty"
mkdir -p "$TMP/extra/test_data_set_0"
cp "$SRC/models/tinycnn/test_data_set_0/input_0.pb" "$TMP/extra/test_data_set_0/input_0.pb"
cp "$SRC/models/tinycnn/test_data_set_0/input_0.pb" "$TMP/extra/test_data_set_0/input_1.pb"
expect extra_input_file 1 "input_1.pb" validate "$TMP/good.kiln" --against "$MODEL" \
  --data "$TMP/extra"
expect onnx_as_engine 1 "not an engine" validate "$MODEL" --against "$MODEL"
expect engine_as_model 1 "--against takes the ONNX model" validate "$TMP/good.kiln" \
  --against "$TMP/good.kiln" --runs 1
expect mismatch 1 "does not match" validate "$TMP/good.kiln" --against "$SRC/tests/bad/good.onnx" \
  --runs 1

echo "validate: $n_ok ok, $n_fail failed"
[ "$n_fail" -eq 0 ]
