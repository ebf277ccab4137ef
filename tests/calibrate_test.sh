#!/usr/bin/env bash
# kiln calibrate on the bundled tinycnn model.
#
# usage: calibrate_test.sh KILN_BIN SOURCE_DIR
#
# Samples: three folders of seeded inputs written by kiln bench
# --save-inputs (input_0.pb, uniform in [-1, 1)) and one .npy sample
# written here with printf, mostly 0.25 and -0.75 with two outliers (100
# and -50).  Checks: the cache's format (header, method, samples, one
# NAME AMAX MIN MAX line per tensor, end); every float tensor of the ONNX
# graph (its input and every node output, as kiln inspect --no-optimize
# --json lists them) appears, and nothing else; the methods differ as
# expected on the input (minmax keeps the outlier, percentile and entropy
# clip it far, mse a little) and none widens a range; --max-samples and the single-folder
# layout; usage errors exit 2; bad samples and files exit 1 with one line
# on stderr naming the sample; a failed run leaves an existing cache as it
# was; a reduced-precision build with --data alone checks its cosine and
# warns, naming the steps to blame, when a saturating calibration breaks
# it.  Prints "ok NAME" or "FAIL NAME: why" per case.
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
KILN=$1
SRC=$2
MODEL=$SRC/models/tinycnn/model.onnx
[ -x "$KILN" ] || { echo "FAIL: $KILN is not executable" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "FAIL: no $MODEL" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
ERR=$TMP/err
TIMEOUT=60
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
    if [ "$(wc -l <"$ERR")" -ne 1 ]; then echo "usage error not on one line"
    elif [ -n "$key" ] && ! grep -qF -- "$key" "$ERR"; then echo "message does not name '$key'"
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

# check NAME WHY COMMAND...: pass when COMMAND succeeds
check() {
  local name=$1 why=$2
  shift 2
  if "$@"; then pass "$name"; else fail "$name" "$why"; fi
}

# amax_of CALIB NAME: the AMAX field of tensor NAME (bare names only)
amax_of() { awk -v n="$2" '$1 == n { print $2 }' "$1"; }
# lt A B: A < B as numbers
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }

# a .npy file: npy FILE DESCR SHAPE COUNT, data from stdin (COUNT elements)
npy() {
  local hdr="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
  # magic, version 1.0, header length (little-endian u16), header padded
  # with spaces and a newline to 118 bytes: data starts at byte 128
  printf '\x93NUMPY\x01\x00\x76\x00' >"$1"
  printf '%-117s\n' "$hdr" >>"$1"
  cat >>"$1"
}

# ---- samples ----------------------------------------------------------------
DATA=$TMP/data
mkdir -p "$DATA"
for k in 1 2 3; do
  if ! timeout "$TIMEOUT" "$KILN" bench "$MODEL" --shape input=1x3x32x32 --runs 1 --warmup 0 \
      --seed "$k" --save-inputs "$DATA/sample_$k" >"$OUT" 2>"$ERR"; then
    fail setup_bench_inputs "kiln bench --save-inputs failed"
    exit 1
  fi
done
# 3072 floats: 100, -50, then 0.25 and -0.75 by turns
mkdir -p "$DATA/sample_10"
{
  printf '\x00\x00\xc8\x42\x00\x00\x48\xc2'
  printf '\x00\x00\x80\x3e\x00\x00\x40\xbf%.0s' $(seq 1535)
} | npy "$DATA/sample_10/input_0.npy" '<f4' '(1, 3, 32, 32)'
[ "$(wc -c <"$DATA/sample_10/input_0.npy")" -eq $((128 + 3072 * 4)) ] ||
  fail setup_npy "input_0.npy has the wrong size"
mkdir -p "$DATA/not_a_sample" # no input_0: not a sample

# ---- good runs ----------------------------------------------------------------
for m in minmax percentile entropy mse; do
  expect "calibrate_$m" 0 "" calibrate "$MODEL" --data "$DATA" -o "$TMP/$m.calib" --method "$m"
  cp "$OUT" "$TMP/$m.stdout"
done
C=$TMP/entropy.calib

# the summary
if grep -qE "^calibrated .* on 4 samples from .* \(input=1x3x32x32\): 18 float tensors, method entropy" \
    "$TMP/entropy.stdout" && grep -q "^widest ranges" "$TMP/entropy.stdout" &&
    [ "$(grep -c '^  .* amax .* min .* max ' "$TMP/entropy.stdout")" -eq 5 ] &&
    grep -qF "wrote $C" "$TMP/entropy.stdout"; then
  pass summary
else
  OUT=$TMP/entropy.stdout fail summary "no samples/tensors/method line, 5 widest ranges, wrote line"
fi
check summary_percentile "the percentile is not named" \
  grep -q "method percentile 99.99" "$TMP/percentile.stdout"

# the file: header, then one line per tensor, then end
fmt_ok=true
[ "$(head -n 1 "$C")" = "kiln-calibration 1" ] || fmt_ok=false
grep -qx "method entropy" "$C" || fmt_ok=false
grep -qx "samples 4" "$C" || fmt_ok=false
[ "$(tail -n 1 "$C")" = "end" ] || fmt_ok=false
# every other line: a comment, or NAME and three numbers
bad_lines=$(grep -vE '^(kiln-calibration 1|#.*|method entropy|samples 4|end)$' "$C" |
  grep -cvE '^[^ ]+ [-+0-9.e]+ [-+0-9.e]+ [-+0-9.e]+$')
[ "$bad_lines" -eq 0 ] || fmt_ok=false
if $fmt_ok; then pass file_format; else fail file_format "header, tensor lines or end malformed"; fi
check file_method_param "no 'method percentile 99.9899979' line" \
  grep -qx "method percentile 99.9899979" "$TMP/percentile.calib"
check file_no_tmp_left "$C.tmp left behind" [ ! -e "$C.tmp" ]

# every float tensor of the graph as imported, and nothing else
tensors() { grep -vE '^(kiln-calibration |#|method |samples |end$)' "$1" | awk '{print $1}' | sort; }
if command -v /usr/bin/python3 >/dev/null; then
  if timeout "$TIMEOUT" "$KILN" inspect "$MODEL" --no-optimize --json >"$TMP/inspect.json" 2>"$ERR" &&
      /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
names = [i["name"] for i in d["inputs"] if i["dtype"] == "float32"]
for s in d["step_list"]:
    names += [o["name"] for o in s["outputs"] if o["dtype"] == "float32"]
print("\n".join(sorted(names)))' "$TMP/inspect.json" >"$TMP/expected" 2>"$ERR"; then
    tensors "$C" >"$TMP/got"
    if [ "$(wc -l <"$TMP/expected")" -eq 18 ] && diff "$TMP/expected" "$TMP/got" >"$OUT"; then
      pass every_float_tensor
    else
      fail every_float_tensor "the cache's tensors differ from the graph's float tensors"
    fi
  else
    fail every_float_tensor "kiln inspect --no-optimize --json failed"
  fi
else
  echo "skip every_float_tensor (no /usr/bin/python3)"
fi
for m in minmax percentile mse; do
  if [ "$(tensors "$TMP/$m.calib")" = "$(tensors "$C")" ]; then pass "same_tensors_$m"
  else fail "same_tensors_$m" "the $m cache lists other tensors than the entropy one"; fi
done

# methods: min-max keeps the input's outlier (100); percentile and entropy
# clip it well below.  MSE clips too, but only a little: two outliers in
# 12288 values carry most of the squared error, so its optimum stays near
# them (test_calibration.c shows it clipping an outlier of 1 in 300000)
mm=$(amax_of "$TMP/minmax.calib" input)
if [ "$mm" = "100" ]; then pass minmax_is_max; else fail minmax_is_max "input amax '$mm', expected 100"; fi
for m in percentile entropy; do
  a=$(amax_of "$TMP/$m.calib" input)
  if [ -n "$a" ] && lt "$a" 50; then pass "${m}_clips_outlier"
  else fail "${m}_clips_outlier" "input amax '$a', expected well below the outlier 100"; fi
done
a=$(amax_of "$TMP/mse.calib" input)
e=$(amax_of "$TMP/entropy.calib" input)
if [ -n "$a" ] && lt "$a" "$mm" && lt "$e" "$a"; then pass mse_between
else fail mse_between "mse input amax '$a', expected below min-max $mm and above entropy $e"; fi
# no method widens any range; min and max are the same for all
widen=$(awk 'FNR == NR && NF == 4 && $1 != "samples" { amax[$1] = $2; lo[$1] = $3; hi[$1] = $4; next }
  NF == 4 && $1 != "samples" && ($1 in amax) && ($2 > amax[$1] * 1.0000001 || $3 != lo[$1] || $4 != hi[$1]) { print $1 }' \
  "$TMP/minmax.calib" "$TMP/percentile.calib" "$TMP/entropy.calib" "$TMP/mse.calib")
if [ -z "$widen" ]; then pass never_wider_than_minmax
else fail never_wider_than_minmax "wider than min-max or other min/max: $widen"; fi
# a lower percentile clips more
expect percentile_50 0 "" calibrate "$MODEL" --data "$DATA" -o "$TMP/p50.calib" --percentile 50
p50=$(amax_of "$TMP/p50.calib" input)
p9999=$(amax_of "$TMP/percentile.calib" input)
if lt "$p50" "$p9999" && grep -qx "method percentile 50" "$TMP/p50.calib"; then pass percentile_orders
else fail percentile_orders "percentile 50 gives $p50, 99.99 gives $p9999"; fi

# --max-samples, one sample folder, threads, bins
expect max_samples 0 "" calibrate "$MODEL" --data "$DATA" -o "$TMP/two.calib" --method minmax \
  --max-samples 2 --threads 2
check max_samples_file "no 'samples 2'" grep -qx "samples 2" "$TMP/two.calib"
expect one_folder 0 "" calibrate "$MODEL" --data "$DATA/sample_10" --output="$TMP/one.calib" \
  --bins 4096 --shape input=1x3x32x32
check one_folder_file "no 'samples 1'" grep -qx "samples 1" "$TMP/one.calib"

# ---- usage errors: exit 2 -----------------------------------------------------------
expect usage_no_model 2 "MODEL is required" calibrate --data "$DATA" -o "$TMP/x.calib"
expect usage_no_data 2 "--data DIR is required" calibrate "$MODEL" -o "$TMP/x.calib"
expect usage_no_output 2 "-o CALIB is required" calibrate "$MODEL" --data "$DATA"
expect usage_bad_method 2 "--method takes minmax, percentile, entropy or mse" calibrate "$MODEL" \
  --data "$DATA" -o "$TMP/x.calib" --method kl
expect usage_percentile_method 2 "--percentile applies to --method percentile" calibrate "$MODEL" \
  --data "$DATA" -o "$TMP/x.calib" --method mse --percentile 99
expect usage_percentile_zero 2 "--percentile" calibrate "$MODEL" --data "$DATA" -o "$TMP/x.calib" \
  --percentile 0
expect usage_percentile_range 2 "--percentile" calibrate "$MODEL" --data "$DATA" -o "$TMP/x.calib" \
  --percentile 101
expect usage_bins 2 "--bins" calibrate "$MODEL" --data "$DATA" -o "$TMP/x.calib" --bins 64
expect usage_max_samples 2 "--max-samples" calibrate "$MODEL" --data "$DATA" -o "$TMP/x.calib" \
  --max-samples 0
expect usage_unknown_option 2 "--bogus" calibrate "$MODEL" --data "$DATA" -o "$TMP/x.calib" --bogus
expect usage_two_models 2 "unexpected argument" calibrate "$MODEL" "$MODEL" --data "$DATA" \
  -o "$TMP/x.calib"
expect usage_bad_shape 2 "--shape takes NAME=DIMS" calibrate "$MODEL" --data "$DATA" \
  -o "$TMP/x.calib" --shape input
kiln calibrate --help
if [ "$rc" -eq 0 ] && grep -q "usage: kiln calibrate MODEL --data DIR -o CALIB" "$OUT"; then pass help
else fail help "exit $rc or no usage line"; fi
kiln --help
check listed_in_help "not in kiln --help" grep -q "^  calibrate " "$OUT"

# ---- input errors: exit 1, one line ----------------------------------------------
expect no_such_model 1 "nope.onnx" calibrate "$TMP/nope.onnx" --data "$DATA" -o "$TMP/x.calib"
expect no_such_data 1 "--data $TMP/nope" calibrate "$MODEL" --data "$TMP/nope" -o "$TMP/x.calib"
mkdir -p "$TMP/empty"
expect no_samples 1 "no input_0.pb (or .npy) in it nor in a sub-folder" calibrate "$MODEL" \
  --data "$TMP/empty" -o "$TMP/x.calib"
# a wrong shape, a wrong dtype, an unreadable file, an input too many: named by sample
make_bad() { # make_bad NAME: a copy of the good samples plus DATA_BAD/NAME
  rm -rf "$TMP/bad"
  mkdir -p "$TMP/bad"
  cp -r "$DATA/sample_1" "$DATA/sample_2" "$TMP/bad/"
  mkdir -p "$TMP/bad/$1"
}
make_bad sample_3_shape
printf '\x00\x00\x80\x3e%.0s' $(seq 768) | npy "$TMP/bad/sample_3_shape/input_0.npy" '<f4' '(1, 3, 16, 16)'
expect bad_shape 1 "sample_3_shape" calibrate "$MODEL" --data "$TMP/bad" -o "$TMP/x.calib"
make_bad sample_3_dtype
printf '\x01\x00\x00\x00%.0s' $(seq 3072) | npy "$TMP/bad/sample_3_dtype/input_0.npy" '<i4' '(1, 3, 32, 32)'
expect bad_dtype 1 "sample_3_dtype" calibrate "$MODEL" --data "$TMP/bad" -o "$TMP/x.calib"
make_bad sample_3_garbage
printf 'not a tensor' >"$TMP/bad/sample_3_garbage/input_0.pb"
expect unreadable_input 1 "sample_3_garbage/input_0.pb" calibrate "$MODEL" --data "$TMP/bad" \
  -o "$TMP/x.calib"
make_bad sample_3_extra
cp "$DATA/sample_1/input_0.pb" "$TMP/bad/sample_3_extra/"
cp "$DATA/sample_1/input_0.pb" "$TMP/bad/sample_3_extra/input_1.pb"
expect input_too_many 1 "one input file more" calibrate "$MODEL" --data "$TMP/bad" -o "$TMP/x.calib"
# an engine is refused: its tensors are not the ONNX file's
expect build_engine 0 "" build "$MODEL" -o "$TMP/tiny.kiln" --shape input=1x3x32x32
expect engine_refused 1 "is an engine" calibrate "$TMP/tiny.kiln" --data "$DATA" -o "$TMP/x.calib"
expect unwritable_output 1 "cannot write" calibrate "$MODEL" --data "$DATA" \
  -o "$TMP/no/such/dir/x.calib"
# a failed run leaves an existing cache untouched
cp "$C" "$TMP/keep.calib"
cp "$C" "$TMP/keep.orig"
expect failed_run_keeps_cache 1 "sample_3_extra" calibrate "$MODEL" --data "$TMP/bad" \
  -o "$TMP/keep.calib"
check cache_untouched "the cache changed after a failed run" \
  cmp -s "$TMP/keep.calib" "$TMP/keep.orig"

# the accuracy check of a reduced-precision build given --data alone: a good
# calibration says the cosine and warns of nothing; one whose ranges are
# 1/20 of the measured ones saturates the int8 steps: a warning names the
# steps to blame and the flags that restore the cosine, and the engine asked
# for is still written
# (the three seeded samples: sample_10's outliers are no data to judge int8 by)
mkdir -p "$TMP/plain"
for k in 1 2 3; do cp -r "$DATA/sample_$k" "$TMP/plain/"; done
kiln calibrate "$MODEL" --data "$TMP/plain" -o "$TMP/plain.calib" --method minmax
kiln build "$MODEL" -o "$TMP/i8.kiln" --precision int8 --calibration "$TMP/plain.calib" \
  --data "$TMP/plain" --tactics heuristic
if [ "$rc" -ne 0 ] || ! grep -q "against the reference path on .* cosine" "$OUT" ||
  grep -q "warning" "$ERR" || [ ! -f "$TMP/i8.kiln" ]; then
  fail int8_check_clean "exit $rc, or no cosine line, or a warning, or no engine"
else pass int8_check_clean; fi
awk '$1 == "kiln-calibration" || $1 == "method" || $1 == "samples" || $1 == "end" || /^#/ { print; next }
     NF == 4 { printf "%s %.9g %.9g %.9g\n", $1, $2 / 20, $3 / 20, $4 / 20; next } { print }' \
  "$TMP/plain.calib" >"$TMP/bad.calib"
kiln build "$MODEL" -o "$TMP/i8bad.kiln" --precision int8 --calibration "$TMP/bad.calib" \
  --data "$TMP/plain" --tactics heuristic
if [ "$rc" -ne 0 ] || ! grep -q "warning: the int8 engine's cosine to fp32 on .* below 0.99" "$ERR" ||
  ! grep -q "the steps to blame" "$ERR" || ! grep -q -- "--layer-precision" "$ERR" ||
  [ ! -f "$TMP/i8bad.kiln" ]; then
  fail int8_check_warns "exit $rc, or the warning, the steps or the flags missing, or no engine: $(head -c 400 "$ERR")"
else pass int8_check_warns; fi

echo "calibrate: $n_ok passed, $n_fail failed"
[ "$n_fail" -eq 0 ]
