#!/usr/bin/env bash
# The kiln CLI on good and hostile input.
#
# usage: cli_test.sh KILN_BIN TESTS_DIR
#
# Uses only the committed fixtures in TESTS_DIR/bad (written by
# bad/make_bad.py) and coreutils.  For every case it checks the exit status
# (0 success, 1 bad input, 2 usage), that a status-1 failure prints exactly
# one line on stderr starting with "kiln: " and naming the thing at fault,
# that nothing crashes (status >= 128) or hangs (20 s), and that the outputs
# of the good models match the committed expected bytes.  Prints "ok NAME" or
# "FAIL NAME: why" per case and exits 1 when any case failed.
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN TESTS_DIR" >&2
  exit 2
fi
KILN=$1
TESTS=$2
B=$2/bad
[ -x "$KILN" ] || { echo "FAIL: $KILN is not executable" >&2; exit 1; }
[ -f "$B/good.onnx" ] || { echo "FAIL: no fixtures in $B" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
ERR=$TMP/err
TIMEOUT=20
n_ok=0
n_fail=0

pass() {
  echo "ok $1"
  n_ok=$((n_ok + 1))
}

fail() {
  echo "FAIL $1: $2"
  if [ -s "$ERR" ]; then head -n 5 "$ERR" | sed 's/^/    stderr: /'; fi
  n_fail=$((n_fail + 1))
}

# Run kiln with ARGS; sets rc.  stdout -> $OUT, stderr -> $ERR.
kiln() {
  timeout "$TIMEOUT" "$KILN" "$@" >"$OUT" 2>"$ERR"
  rc=$?
}

# Why the last run is not a clean exit WANT, or nothing when it is.
# KEY (may be empty) must appear in the message of a status-1 failure.
verdict() {
  local want=$1 key=$2
  if [ "$rc" -eq 124 ]; then echo "hung (killed after ${TIMEOUT}s)"; return; fi
  if [ "$rc" -ge 128 ]; then echo "crashed (status $rc, signal $((rc - 128)))"; return; fi
  if [ "$rc" -ne "$want" ]; then echo "exit $rc, expected $want"; return; fi
  case $want in
  0)
    if [ -s "$ERR" ]; then echo "exit 0 but stderr is not empty"; fi ;;
  1)
    local lines first
    lines=$(wc -l <"$ERR")
    first=$(head -n 1 "$ERR")
    if [ "$lines" -ne 1 ] || [ "$(wc -c <"$ERR")" -ne $((${#first} + 1)) ]; then
      echo "stderr has $lines lines, expected exactly one"
    elif [ "${first#kiln: }" = "$first" ]; then
      echo "stderr does not start with 'kiln: '"
    elif [ -n "$key" ] && ! grep -qF -- "$key" "$ERR"; then
      echo "message does not mention '$key'"
    fi ;;
  2)
    if [ ! -s "$ERR" ]; then echo "usage error but nothing on stderr"; fi ;;
  esac
}

# expect NAME WANT KEY ARGS...: one case.
expect() {
  local name=$1 want=$2 key=$3
  shift 3
  kiln "$@"
  local why
  why=$(verdict "$want" "$key")
  if [ -z "$why" ]; then pass "$name"; else fail "$name" "$why"; fi
}

# same_bytes NAME EXPECTED ACTUAL: the previous run succeeded and wrote ACTUAL.
same_bytes() {
  if [ ! -f "$3" ]; then
    fail "$1" "no output file $(basename "$3")"
  elif ! cmp -s "$2" "$3"; then
    fail "$1" "$(basename "$3") differs from $2"
  else
    pass "$1"
  fi
}

# ---------------------------------------------------------------- usage
expect usage_no_args 2 ""
expect usage_unknown_command 2 "" frobnicate
expect usage_unknown_option 2 "" run "$B/good.onnx" --frobnicate
expect usage_run_no_model 2 ""  run
expect usage_run_two_models 2 "" run "$B/good.onnx" "$B/dyn.onnx"
expect usage_run_missing_value 2 "" run "$B/good.onnx" --input-dir
expect usage_run_bad_format 2 "" run "$B/good.onnx" --output-format csv
expect usage_run_input_no_eq 2 "" run "$B/good.onnx" --input X
expect usage_inspect_no_model 2 "" inspect
expect usage_inspect_option 2 "" inspect --verbose "$B/good.onnx"
expect usage_ops_args 2 "" ops extra
expect help 0 "" --help
expect help_run 0 "" run --help
expect help_inspect 0 "" inspect --help
expect version 0 "" --version
expect ops 0 "" ops
if grep -q '^Relu ' "$OUT"; then pass ops_lists_relu; else fail ops_lists_relu "no Relu line"; fi

# ---------------------------------------------------------------- good models
G=$B/good_data
expect run_good 0 "" run "$B/good.onnx" --input-dir "$G" --output-dir "$TMP/o_pb"
same_bytes run_good_output "$G/output_0.pb" "$TMP/o_pb/output_0.pb"
expect run_good_npy 0 "" run "$B/good.onnx" --input-dir "$G" --output-dir "$TMP/o_npy" \
  --output-format npy
same_bytes run_good_npy_output "$G/output_0.npy" "$TMP/o_npy/output_0.npy"
expect run_named_npy_input 0 "" run "$B/good.onnx" --input "X=$G/x.npy" \
  --output-dir "$TMP/o_named"
same_bytes run_named_npy_input_output "$G/output_0.pb" "$TMP/o_named/output_0.pb"
expect run_named_pb_input 0 "" run "$B/good.onnx" --input "X=$G/input_0.pb" \
  --output-dir "$TMP/o_named_pb"
same_bytes run_named_pb_input_output "$G/output_0.pb" "$TMP/o_named_pb/output_0.pb"
expect run_summary 0 "" run "$B/good.onnx" --input-dir "$G"
if grep -q '^Y: float32 \[1x4\] = 0 0.5 0 2.25$' "$OUT"; then pass run_summary_text
else fail run_summary_text "stdout was: $(head -c 200 "$OUT")"; fi
expect run_dyn 0 "" run "$B/dyn.onnx" --input-dir "$B/dyn_data" --output-dir "$TMP/o_dyn"
same_bytes run_dyn_output "$B/dyn_data/output_0.pb" "$TMP/o_dyn/output_0.pb"
expect run_external_data 0 "" run "$B/ext.onnx" --input-dir "$G" --output-dir "$TMP/o_ext"
same_bytes run_external_data_output "$G/output_0.pb" "$TMP/o_ext/output_0.pb"
expect run_sparse_initializer 0 "" run "$B/sparse.onnx" --input-dir "$G" \
  --output-dir "$TMP/o_sparse"
same_bytes run_sparse_output "$G/sparse_output_0.pb" "$TMP/o_sparse/output_0.pb"
expect inspect_good 0 "" inspect "$B/good.onnx"
if grep -q 'X .*float32 *\[1, 4\]' "$OUT"; then pass inspect_good_text
else fail inspect_good_text "no 'X float32 [1, 4]' line"; fi
expect inspect_dyn 0 "" inspect "$B/dyn.onnx"
if grep -q 'X .*float32 *\[N, 4\]' "$OUT"; then pass inspect_dyn_text
else fail inspect_dyn_text "no 'X float32 [N, 4]' line"; fi
expect inspect_external_data 0 "" inspect "$B/ext.onnx"

# external data reached through a symlink that stays inside the folder
mkdir -p "$TMP/symin/sub"
cp "$B/ext.onnx" "$TMP/symin/"
cp "$B/weights.bin" "$TMP/symin/sub/real.bin"
ln -s sub/real.bin "$TMP/symin/weights.bin"
expect run_external_symlink_inside 0 "" run "$TMP/symin/ext.onnx" --input-dir "$G"

# ---------------------------------------------------------------- CLI errors
expect run_model_missing 1 "no_such_model.onnx" run "$TMP/no_such_model.onnx"
expect run_model_empty_path 1 "cannot open" run ""
expect run_model_is_dir 1 "not a regular file" run "$B/good_data"
expect inspect_model_missing 1 "no_such_model.onnx" inspect "$TMP/no_such_model.onnx"
expect run_no_inputs 1 "'X'" run "$B/good.onnx"
mkdir -p "$TMP/empty_dir"
expect run_input_dir_empty 1 "input_0.pb" run "$B/good.onnx" --input-dir "$TMP/empty_dir"
expect run_input_unknown_name 1 "Nope" run "$B/good.onnx" --input "Nope=$G/x.npy"
expect run_input_file_missing 1 "missing.pb" run "$B/good.onnx" --input "X=$TMP/missing.pb"
expect run_input_is_dir 1 "not a regular file" run "$B/good.onnx" --input "X=$TMP/empty_dir"
expect run_output_dir_under_file 1 "good.onnx/sub" run "$B/good.onnx" --input-dir "$G" \
  --output-dir "$B/good.onnx/sub"
expect run_output_dir_no_parent 1 "no/such" run "$B/good.onnx" --input-dir "$G" \
  --output-dir "$TMP/no/such"
mkdir -p "$TMP/o_blocked/output_0.pb"
expect run_output_file_blocked 1 "output_0.pb" run "$B/good.onnx" --input-dir "$G" \
  --output-dir "$TMP/o_blocked"

# ---------------------------------------------------------------- hostile inputs
I=$B
expect input_wrong_dtype 1 "int64" run "$B/good.onnx" --input "X=$I/in_wrong_dtype.pb"
expect input_wrong_shape 1 "2x4" run "$B/good.onnx" --input "X=$I/in_wrong_shape.pb"
expect input_truncated_pb 1 "in_truncated.pb" run "$B/good.onnx" --input "X=$I/in_truncated.pb"
expect input_rawlen_pb 1 "raw_data" run "$B/good.onnx" --input "X=$I/in_rawlen.pb"
expect input_npy_f64 1 "float64" run "$B/good.onnx" --input "X=$I/in_f64.npy"
expect input_npy_fortran 1 "Fortran" run "$B/good.onnx" --input "X=$I/in_fortran.npy"
expect input_npy_bad_header 1 "in_badheader.npy" run "$B/good.onnx" --input "X=$I/in_badheader.npy"
expect input_npy_big_endian 1 ">f4" run "$B/good.onnx" --input "X=$I/in_bigendian.npy"
expect input_npy_truncated 1 "truncated" run "$B/good.onnx" --input "X=$I/in_npy_truncated.npy"
expect input_npy_huge_shape 1 "in_npy_hugeshape.npy" run "$B/good.onnx" \
  --input "X=$I/in_npy_hugeshape.npy"
expect input_npy_header_length 1 "in_npy_hdrlen.npy" run "$B/good.onnx" \
  --input "X=$I/in_npy_hdrlen.npy"
expect input_dyn_wrong_dtype 1 "'X'" run "$B/dyn.onnx" --input "X=$I/in_wrong_dtype.pb"

# ---------------------------------------------------------------- hostile models
# hostile NAME KEY: MODEL=bad/NAME.onnx fails to load, for run and inspect.
hostile() {
  expect "run_$1" 1 "$2" run "$B/$1.onnx" --input-dir "$G" --output-dir "$TMP/o_bad"
  expect "inspect_$1" 1 "$2" inspect "$B/$1.onnx"
}
# hostile_run NAME KEY: MODEL loads but running it must fail.
hostile_run() {
  expect "run_$1" 1 "$2" run "$B/$1.onnx" --input-dir "$G" --output-dir "$TMP/o_bad"
}

for f in "$B"/bad_trunc_*.onnx; do
  hostile "$(basename "$f" .onnx)" "truncated or corrupt"
done
for f in "$B"/bad_bitflip_*.onnx; do
  hostile "$(basename "$f" .onnx)" "$(basename "$f")"
done
hostile bad_random "truncated or corrupt"
hostile bad_empty "no graph"
hostile bad_no_graph "no graph"
hostile bad_nested70 "nested"
if command -v gzip >/dev/null; then
  gzip -dc "$B/nested1000.onnx.gz" >"$TMP/nested1000.onnx"
  expect run_nested1000 1 "nested" run "$TMP/nested1000.onnx"
  expect inspect_nested1000 1 "nested" inspect "$TMP/nested1000.onnx"
else
  echo "skip nested1000 (no gzip)"
fi

hostile bad_huge_init "'B'"
hostile bad_overflow_init "'B'"
hostile bad_rawlen "raw_data"
hostile bad_rawlen_big "raw_data"
hostile bad_floatdata_count "float_data"
hostile bad_negdim "negative"
hostile bad_rank100_init "100"
hostile bad_rank100_input "'X'"
hostile bad_dtype_init "99"
hostile bad_sparse_index "'B'"
hostile bad_sparse_huge "'B'"
hostile bad_unknown_op "FrobnicateTensor"
hostile bad_unknown_domain "com.example.kiln"
hostile bad_unimported_domain "com.example.kiln"
hostile bad_opset99 "99"
hostile bad_dangling "ghost"
hostile bad_name_newline 'gh\x0aost\x1b[2J'
hostile bad_cycle "cycle"
hostile bad_dup_output "'Y'"
hostile bad_dup_input "'X'"
hostile bad_graph_output_missing "'Y'"
hostile bad_reshape "reshape"
hostile bad_matmul "matmul"
hostile bad_gather_axis "gather"
hostile_run bad_gather "gather"
hostile_run bad_gather_neg "gather"
hostile_run bad_huge_constantofshape "cos"
hostile_run bad_huge_expand "expand"

# one op each, all inputs initializers: fails at load or at run, naming the node
for f in "$B"/bad_op_*.onnx; do
  name=$(basename "$f" .onnx)
  hostile_run "$name" "'${name#bad_op_}'"
done
# integer corners that src/ops/binary.c defines: they run
edge() {
  expect "run_$1" 0 "" run "$B/$1.onnx"
  if grep -qxF -- "$2" "$OUT"; then pass "run_$1_value"
  else fail "run_$1_value" "stdout was '$(head -c 200 "$OUT")', expected '$2'"; fi
}
edge edge_op_div_int_zero "out0: int64 [2] = 0 0"
edge edge_op_div_int32_zero "out0: int32 [1] = 0"
edge edge_op_div_int_min_neg1 "out0: int64 [1] = -9223372036854775808"
edge edge_op_mod_int_zero "out0: int64 [2] = 0 0"
edge edge_op_mod_fmod_int_zero "out0: int64 [2] = 0 0"
edge edge_op_mod_int_min_neg1 "out0: int64 [1] = 0"
edge edge_op_bitshift_64 "out0: uint64 [1] = 0"

# control flow
expect run_nested_if10 0 "" run "$B/nested_if10.onnx"
if grep -qxF "Y: float32 [1] = 1.5" "$OUT"; then pass run_nested_if10_value
else fail run_nested_if10_value "stdout was '$(head -c 200 "$OUT")'"; fi
hostile bad_if_outputs "'if'"
hostile bad_if_missing_else "else_branch"
hostile bad_if_outer_ghost "ghost"
hostile bad_loop_body_arity "'loop'"
hostile bad_if_branch_shapes "else_branch"
hostile bad_if_cond_float "bool"

hostile bad_ext_missing "no_such_weights.bin"
hostile bad_ext_dotdot "../../etc/passwd"
hostile bad_ext_dotdot_inside "../bad/weights.bin"
hostile bad_ext_abs "/etc/passwd"
hostile bad_ext_offset "weights.bin"
hostile bad_ext_short "weights.bin"
hostile bad_ext_length "length"
hostile bad_ext_neg_offset "offset"
hostile bad_ext_noloc "location"
hostile bad_ext_dir "good_data"

# external data through a symlink that leaves the folder
mkdir -p "$TMP/symout"
cp "$B/ext.onnx" "$TMP/symout/"
cp "$B/weights.bin" "$TMP/outside.bin"
ln -s ../outside.bin "$TMP/symout/weights.bin"
expect run_external_symlink_outside 1 "outside" run "$TMP/symout/ext.onnx" --input-dir "$G"

# FIFOs must be refused, not waited on
if command -v mkfifo >/dev/null; then
  mkdir -p "$TMP/fifo"
  mkfifo "$TMP/fifo/model.onnx" "$TMP/fifo/weights.bin" "$TMP/fifo/x.pb"
  cp "$B/ext.onnx" "$TMP/fifo/"
  expect run_model_fifo 1 "model.onnx" run "$TMP/fifo/model.onnx"
  expect run_external_fifo 1 "weights.bin" run "$TMP/fifo/ext.onnx" --input-dir "$G"
  expect run_input_fifo 1 "x.pb" run "$B/good.onnx" --input "X=$TMP/fifo/x.pb"
else
  echo "skip fifo cases (no mkfifo)"
fi

# ---------------------------------------------------------------- sweeps
# Prefixes of a good file, and bits flipped (one at a time): exit 0 or a
# clean exit 1, never a crash, a hang or a messy message.  Models are
# mutated in a folder that holds weights.bin; inputs are fed to good.onnx.
# The exhaustive sweep (every prefix, every bit of every byte) runs in one
# process in tests/unit/test_cli_sweep.c: one ASan process per mutant made
# this test take most of the suite's time.  Here a sample of 3 prefixes and
# 3 flips per file checks the CLI's side (exit codes, one-line messages);
# KILN_LONG_TESTS=1 runs every prefix and two bits at every byte through
# the CLI as well.
mkdir -p "$TMP/sw"
cp "$B/weights.bin" "$TMP/sw/"
LONG=${KILN_LONG_TESTS:-0}
# sweep_one LABEL KIND FILE: one mutated file; returns 1 on failure.
sweep_one() {
  if [ "$2" = model ]; then
    kiln run "$3" --input-dir "$G" --output-dir "$TMP/o_sweep"
  else
    kiln run "$B/good.onnx" --input "X=$3" --output-dir "$TMP/o_sweep"
  fi
  local why
  if [ "$rc" -eq 0 ]; then why=$(verdict 0 ""); else why=$(verdict 1 ""); fi
  if [ -n "$why" ]; then
    fail "$1" "$why"
    return 1
  fi
}
# flip SRC DST POS BIT: DST is SRC with one bit flipped.
flip() {
  local byte
  byte=$(od -An -tu1 -j "$3" -N 1 "$1" | tr -d ' ')
  cp "$1" "$2"
  printf '%b' "\\0$(printf %03o $((byte ^ (1 << $4))))" |
    dd of="$2" bs=1 seek="$3" conv=notrunc status=none
}
# sweep LABEL KIND FILE
sweep() {
  local label=$1 kind=$2 src=$3 size cut pos bit k bad=0 n_cut=0 n_flip=0
  local f=$TMP/sw/mutant.${src##*.}
  local -a cuts=() flips=()
  size=$(wc -c <"$src")
  if [ "$LONG" = 1 ]; then
    for ((cut = 0; cut < size; cut++)); do cuts+=("$cut"); done
    for ((pos = 0; pos < size; pos++)); do
      flips+=("$pos:$((pos % 8))" "$pos:$(((pos + 3) % 8))")
    done
  else
    # spread over the file: the header, the middle and the tail
    for ((k = 0; k < 3; k++)); do
      cuts+=("$((k * size / 3))")
      pos=$(((2 * k + 1) * size / 6))
      flips+=("$pos:$(((pos + k) % 8))")
    done
  fi
  for cut in "${cuts[@]}"; do
    head -c "$cut" "$src" >"$f"
    sweep_one "sweep_${label}_truncate_at_$cut" "$kind" "$f" || bad=1
    n_cut=$((n_cut + 1))
  done
  for k in "${flips[@]}"; do
    pos=${k%:*}
    bit=${k#*:}
    flip "$src" "$f" "$pos" "$bit"
    sweep_one "sweep_${label}_flip_bit_${bit}_at_$pos" "$kind" "$f" || bad=1
    n_flip=$((n_flip + 1))
  done
  [ $bad -eq 0 ] && pass "sweep_$label ($n_cut prefixes, $n_flip bit flips of $size bytes)"
}
# ---- engines: build, run, inspect, compare; broken engines refused ----------
M=$TESTS/../models/tinycnn
expect build_good 0 "" build "$B/good.onnx" -o "$TMP/good.kiln"
expect run_engine 0 "" run "$TMP/good.kiln" --input-dir "$G" --output-dir "$TMP/o_eng"
same_bytes run_engine_output "$G/output_0.pb" "$TMP/o_eng/output_0.pb"
expect build_good_again 0 "" build "$B/good.onnx" -o "$TMP/good2.kiln"
if cmp -s "$TMP/good.kiln" "$TMP/good2.kiln"; then pass build_deterministic
else fail build_deterministic "two builds of one model differ"; fi
expect inspect_engine 0 "" inspect "$TMP/good.kiln"
expect inspect_engine_json 0 "" inspect "$TMP/good.kiln" --json
if grep -q '"format_version": 3' "$OUT" && grep -q '"step_list"' "$OUT"; then pass inspect_engine_json_keys
else fail inspect_engine_json_keys "format_version/step_list missing"; fi
expect compare_engine 0 "" compare "$B/good.onnx" "$TMP/good.kiln" --per-layer
expect compare_model 0 "" compare "$M/model.onnx" --per-layer
# every fused conv leaves only channels-last values: they are compared with
# the NCHW reference too, and a bf16 step in an fp32 graph is where error enters
expect compare_per_layer_nhwc 0 "" compare "$M/model.onnx" --per-layer --shape input=1x3x32x32
if [ "$(grep -c '^  ok   #[0-9]* .*_nhwc ' "$OUT")" -ge 6 ]; then pass compare_per_layer_nhwc_steps
else fail compare_per_layer_nhwc_steps "fewer than 6 channels-last steps compared"; fi
expect compare_per_layer_enters 0 "" compare "$M/model.onnx" --per-layer --shape input=1x3x32x32 \
  --layer-precision /c3/Conv=bf16 --atol 1 --rtol 1
if grep -q "^error enters at step #[0-9]* '/c3/Conv' (bf16)" "$OUT"; then pass compare_per_layer_enters_step
else fail compare_per_layer_enters_step "error not traced to /c3/Conv"; fi
expect build_tinycnn 0 "" build "$M/model.onnx" -o "$TMP/tiny.kiln" --shape input=1x3x32x32
expect run_tinycnn_engine 0 "" run "$TMP/tiny.kiln" --input-dir "$M/test_data_set_0"
expect run_tinycnn_engine_wrong_shape 1 "input" run "$TMP/tiny.kiln" --input "input=$G/input_0.pb"
# precisions: int8 needs a calibration; overrides must match a step
expect build_int8_no_calibration 1 "--calibration" build "$M/model.onnx" -o "$TMP/x.kiln" --precision int8
expect build_bad_precision 2 "" build "$M/model.onnx" -o "$TMP/x.kiln" --precision fp8
expect build_layer_precision_nomatch 1 "matches no step" build "$M/model.onnx" -o "$TMP/x.kiln" --layer-precision "nosuch*=bf16"
expect build_layer_precision_bad 1 "PATTERN=PRECISION" build "$M/model.onnx" -o "$TMP/x.kiln" --layer-precision "x=fp64"
expect build_calibration_missing 1 "nosuch.calib" build "$M/model.onnx" -o "$TMP/x.kiln" --precision int8 --calibration "$TMP/nosuch.calib"
expect build_tinycnn_bf16 0 "" build "$M/model.onnx" -o "$TMP/tiny_bf16.kiln" --shape input=1x3x32x32 --precision bf16
# timed: each bf16 step is timed against fp32 too (ctest's builds are
# heuristic, KILN_TACTICS; this path once leaked its scratch)
expect build_tinycnn_bf16_timed 0 "" build "$M/model.onnx" -o "$TMP/tiny_bf16t.kiln" \
  --shape input=1x3x32x32 --precision bf16 --tactics timed
expect inspect_tinycnn_bf16 0 "" inspect "$TMP/tiny_bf16.kiln" --json
if grep -q '"precision": "bf16"' "$OUT"; then pass inspect_shows_bf16
else fail inspect_shows_bf16 "no step with precision bf16 in kiln inspect --json"; fi
expect run_tinycnn_bf16 0 "" run "$TMP/tiny_bf16.kiln" --input-dir "$M/test_data_set_0"
expect build_workspace_small 1 "workspace" build "$M/model.onnx" -o "$TMP/ws.kiln" --shape input=1x3x32x32 --workspace 1K
if grep -q 'smallest plan found needs [0-9]* bytes ([0-9]* short' "$ERR"; then pass build_workspace_small_says_short
else fail build_workspace_small_says_short "the message does not name the smallest plan and the shortfall"; fi
# --workspace at 60% of the unconstrained arena: the early layers run in bands
expect build_workspace_full 0 "" build "$M/model.onnx" -o "$TMP/ws100.kiln" --shape input=1x3x32x32
expect inspect_workspace_full 0 "" inspect "$TMP/ws100.kiln" --json
ARENA=$(grep -o '"arena_bytes": [0-9]*' "$OUT" | grep -o '[0-9]*$')
expect build_workspace_60 0 "" build "$M/model.onnx" -o "$TMP/ws60.kiln" --shape input=1x3x32x32 --workspace $((${ARENA:-0} * 6 / 10))
if grep -q '^memory: steps .* bands of output rows' "$OUT"; then pass build_workspace_60_decision
else fail build_workspace_60_decision "kiln build printed no memory decision"; fi
expect inspect_workspace_60 0 "" inspect "$TMP/ws60.kiln"
if grep -q ' band0/[0-9]* ' "$OUT" && grep -q 'memory: steps ' "$OUT"; then pass inspect_shows_bands
else fail inspect_shows_bands "kiln inspect shows no band step or no memory decision"; fi
expect run_workspace_60 0 "" run "$TMP/ws60.kiln" --input-dir "$M/test_data_set_0" --output-dir "$TMP/o_ws60"
expect compare_workspace_60 0 "" compare "$M/model.onnx" "$TMP/ws60.kiln" --shape input=1x3x32x32
expect build_bad_shape 1 "declared" build "$B/good.onnx" -o "$TMP/x.kiln" --shape X=1x5
expect build_unknown_input 1 "no input" build "$B/good.onnx" -o "$TMP/x.kiln" --shape Nope=1x4
expect build_unknown_pass 1 "nosuch" build "$B/good.onnx" -o "$TMP/x.kiln" --disable-pass nosuch
expect build_bad_profile 1 "MIN" build "$B/dyn.onnx" -o "$TMP/x.kiln" --profile "X=4x4:2x4:8x4"
expect build_dyn_profile 0 "" build "$B/dyn.onnx" -o "$TMP/dyn.kiln" --profile "X=1x4:2x4:8x4"
expect run_dyn_profile 0 "" run "$TMP/dyn.kiln" --input-dir "$B/dyn_data" --output-dir "$TMP/o_dynp"
same_bytes run_dyn_profile_output "$B/dyn_data/output_0.pb" "$TMP/o_dynp/output_0.pb"
expect build_dyn_profile_narrow 0 "" build "$B/dyn.onnx" -o "$TMP/dyn1.kiln" --profile "X=1x4:1x4:2x4"
expect run_outside_profile 1 "profile" run "$TMP/dyn1.kiln" --input-dir "$B/dyn_data"
expect build_no_output 2 "" build "$B/good.onnx"
head -c 500 "$TMP/good.kiln" >"$TMP/trunc.kiln"
expect run_engine_truncated 1 "trunc.kiln" run "$TMP/trunc.kiln" --input-dir "$G"
head -c 8 "$TMP/good.kiln" >"$TMP/magic.kiln"
expect run_engine_magic_only 1 "magic.kiln" run "$TMP/magic.kiln" --input-dir "$G"
sweep good_engine model "$TMP/good.kiln"

# ---- options: --name=value, --threads, KILN_NUM_THREADS ---------------------
# expect_usage NAME ARGS...: exit 2 with exactly one line on stderr naming
# the command ("kiln CMD: ...").
expect_usage() {
  local name=$1
  shift
  kiln "$@"
  local why
  why=$(verdict 2 "")
  if [ -z "$why" ] && { [ "$(wc -l <"$ERR")" -ne 1 ] || ! grep -q "^kiln $1: " "$ERR"; }; then
    why="stderr is not one line starting with 'kiln $1: ': $(head -c 300 "$ERR")"
  fi
  if [ -z "$why" ]; then pass "$name"; else fail "$name" "$why"; fi
}
# has NAME FIXED-STRING...: the last run's stdout holds every string.
has() {
  local name=$1 s
  shift
  for s in "$@"; do
    if ! grep -qF -- "$s" "$OUT"; then
      fail "$name" "stdout lacks '$s': $(head -c 300 "$OUT")"
      return
    fi
  done
  pass "$name"
}
expect run_eq_forms 0 "" run "$B/good.onnx" --input-dir="$G" --output-dir="$TMP/o_eq" \
  --output-format=npy --threads=1
same_bytes run_eq_forms_output "$G/output_0.npy" "$TMP/o_eq/output_0.npy"
expect run_eq_input 0 "" run "$B/good.onnx" --input="X=$G/x.npy" --output-dir "$TMP/o_eq2"
same_bytes run_eq_input_output "$G/output_0.pb" "$TMP/o_eq2/output_0.pb"
expect run_threads_2 0 "" run "$B/good.onnx" --input-dir "$G" --output-dir "$TMP/o_t2" --threads 2
same_bytes run_threads_2_output "$G/output_0.pb" "$TMP/o_t2/output_0.pb"
expect run_double_dash 0 "" run --input-dir "$G" --output-dir "$TMP/o_dd" -- "$B/good.onnx"
same_bytes run_double_dash_output "$G/output_0.pb" "$TMP/o_dd/output_0.pb"
KILN_NUM_THREADS=2 expect run_env_threads 0 "" run "$B/good.onnx" --input-dir "$G"
expect_usage run_threads_zero run "$B/good.onnx" --threads 0
expect_usage run_threads_word run "$B/good.onnx" --threads=many
expect_usage run_flag_with_value run "$B/good.onnx" --no-optimize=1
expect_usage run_eq_unknown run "$B/good.onnx" --frobnicate=1
expect_usage run_eq_bad_format run "$B/good.onnx" --output-format=csv
expect_usage run_missing_value_one_line run "$B/good.onnx" --input-dir
KILN_NUM_THREADS=abc expect_usage run_env_threads_bad run "$B/good.onnx" --input-dir "$G"
expect build_eq_forms 0 "" build "$M/model.onnx" --output="$TMP/tiny_eq.kiln" \
  --shape=input=1x3x32x32 --disable-pass=cse --workspace=64M
# (heuristic tactics: an engine keeps the times it measured, which differ
# from one build to the next)
expect build_short_apart 0 "" build "$M/model.onnx" -o "$TMP/tiny_apart.kiln" \
  --shape input=1x3x32x32 --tactics heuristic
expect build_short_glued 0 "" build "$M/model.onnx" "-o$TMP/tiny_glued.kiln" \
  --shape input=1x3x32x32 --tactics heuristic
if cmp -s "$TMP/tiny_apart.kiln" "$TMP/tiny_glued.kiln"; then pass build_short_glued_same
else fail build_short_glued_same "-oFILE wrote a different engine than -o FILE"; fi
expect build_eq_profile 0 "" build "$B/dyn.onnx" --output "$TMP/dyn_eq.kiln" \
  --profile="X=1x4:2x4:8x4"
if cmp -s "$TMP/dyn.kiln" "$TMP/dyn_eq.kiln"; then pass build_eq_profile_same
else fail build_eq_profile_same "--profile=SPEC wrote a different engine than --profile SPEC"; fi
expect_usage build_eq_workspace_bad build "$M/model.onnx" -o "$TMP/x.kiln" --workspace=lots
expect inspect_eq_forms 0 "" inspect "$M/model.onnx" --shape=input=2x3x32x32 --json
has inspect_eq_forms_shape '"shape": [2, 3, 32, 32]'
expect_usage inspect_json_value inspect "$M/model.onnx" --json=yes
expect compare_eq_forms 0 "" compare "$M/model.onnx" --atol=1e-4 --rtol=1e-3 --seed=7 \
  --shape=input=1x3x32x32 --disable-pass=cse --threads=2
expect compare_threads_1 0 "" compare "$B/good.onnx" "$TMP/good.kiln" --threads 1 \
  --input="X=$G/x.npy"
expect_usage compare_eq_bad_atol compare "$M/model.onnx" --atol=-1
expect_usage compare_eq_bad_seed compare "$M/model.onnx" --seed=x
expect_usage ops_eq ops --json=1

# ---- kiln bench ------------------------------------------------------------
TM=$M/model.onnx
TS=input=1x3x32x32
expect bench_text 0 "" bench "$TM" --runs 3 --warmup 1 --shape "$TS" --threads 1
has bench_text_fields "latency (ms): min" " mean " " median " " p90 " " p99 " " max " \
  "throughput:" "runs/s" "startup:" "peak RSS:" "1 thread, 3 runs after 1 warm-up"
expect bench_json 0 "" bench "$TM" --runs 3 --shape "$TS" --threads 1 --json
has bench_json_keys '"p50_ms": ' '"p90_ms": ' '"p99_ms": ' '"mean_ms": ' '"min_ms": ' \
  '"max_ms": ' '"throughput_qps": ' '"threads": 1,' '"runs": 3,' '"peak_rss_bytes": ' \
  '"load_ms": '
if [ "$(wc -l <"$OUT")" -eq 1 ] && head -c 1 "$OUT" | grep -q '{'; then pass bench_json_one_object
else fail bench_json_one_object "stdout is not one line holding an object"; fi
if command -v /usr/bin/python3 >/dev/null && /usr/bin/python3 -c 'import json,sys; json.load(sys.stdin)' \
    <"$OUT" 2>/dev/null; then pass bench_json_parses
elif command -v /usr/bin/python3 >/dev/null; then fail bench_json_parses "not valid JSON"
else echo "skip bench_json_parses (no /usr/bin/python3)"; fi
expect bench_eq_forms 0 "" bench "$TM" --runs=2 --warmup=0 --threads=2 --shape="$TS" --json \
  --seed=3
has bench_eq_forms_values '"runs": 2,' '"threads": 2,' '"warmup": 0,'
expect bench_duration 0 "" bench "$TM" --duration 0.2 --warmup 1 --shape "$TS" --json
has bench_duration_runs '"runs": '
if grep -q '"runs": 0,' "$OUT"; then fail bench_duration_nonzero "no run timed"
else pass bench_duration_nonzero; fi
expect bench_duration_eq 0 "" bench "$TM" --duration=0.05 --shape="$TS"
expect bench_engine 0 "" bench "$TMP/tiny.kiln" --runs 2 --json
has bench_engine_json '"engine": true' '"inputs": "input=1x3x32x32"'
expect bench_input 0 "" bench "$TM" --input "input=$M/test_data_set_0/input_0.pb" --runs 2
expect bench_input_dir 0 "" bench "$TMP/tiny.kiln" --input-dir "$M/test_data_set_0" --runs 2
expect bench_save_inputs 0 "" bench "$TM" --shape "$TS" --runs 1 --save-inputs "$TMP/bench_in"
# --per-step: every step's median beside its prediction, kept for inspect
expect bench_per_step 0 "" bench "$TMP/tiny.kiln" --runs 3 --threads 1 --per-step
has bench_per_step_table "steps (median over their own runs" "pred us" "conv_"
if [ -s "$TMP/tiny.kiln.steps.json" ]; then pass bench_per_step_kept
else fail bench_per_step_kept "no $TMP/tiny.kiln.steps.json"; fi
expect inspect_measured 0 "" inspect "$TMP/tiny.kiln"
has inspect_measured_table "measured by kiln bench --per-step" "meas us"
expect inspect_measured_json 0 "" inspect "$TMP/tiny.kiln" --json
has inspect_measured_json_keys '"measured_us":' '"predicted_us":' '"bound":' '"diagram":' \
  '"fused":' '"unfused":' '"fusion_saves_bytes":' '"repetitions":'
expect bench_per_step_json 0 "" bench "$TMP/tiny.kiln" --runs 3 --per-step --json
has bench_per_step_json_keys '"step_list": [' '"median_us":' '"predicted_us":'
expect bench_saved_inputs_run 0 "" run "$TMP/tiny.kiln" --input-dir "$TMP/bench_in"
expect bench_dyn_profile 0 "" bench "$TMP/dyn.kiln" --shape X=3x4 --runs 2 --json
has bench_dyn_profile_shape '"inputs": "X=3x4"'
# dynamic dims without --shape: a note on stderr, the batch taken as 1
kiln bench "$TM" --runs 1 --json
if [ "$rc" -eq 0 ] && grep -q "dynamic dims: using 1x3x32x32" "$ERR"; then pass bench_dynamic_note
else fail bench_dynamic_note "exit $rc, stderr: $(head -c 200 "$ERR")"; fi
# past 2 s a progress line goes to stderr
kiln bench "$TM" --duration 2.5 --warmup 0 --shape "$TS" --threads 1
if [ "$rc" -eq 0 ] && grep -q "^kiln bench: [0-9]* runs, [0-9.]* of 2.5 s, last run " "$ERR"; then pass bench_progress
else fail bench_progress "exit $rc, stderr: $(head -c 200 "$ERR")"; fi
KILN_NUM_THREADS=1 expect bench_env_threads 0 "" bench "$TM" --runs 1 --shape "$TS" --json
has bench_env_threads_value '"threads": 1,'
expect_usage bench_no_model bench
expect_usage bench_runs_zero bench "$TM" --runs 0
expect_usage bench_runs_word bench "$TM" --runs=lots
expect_usage bench_runs_negative bench "$TM" --runs=-1
expect_usage bench_threads_zero bench "$TM" --threads 0
expect_usage bench_threads_huge bench "$TM" --threads=100000
expect_usage bench_duration_negative bench "$TM" --duration -1
expect_usage bench_duration_word bench "$TM" --duration=soon
expect_usage bench_warmup_negative bench "$TM" --warmup=-2
expect_usage bench_runs_and_duration bench "$TM" --runs 5 --duration 1
expect_usage bench_bad_shape bench "$TM" --shape input=1xQ
expect_usage bench_shape_no_eq bench "$TM" --shape 1x3x32x32
expect_usage bench_json_value bench "$TM" --json=1
expect_usage bench_unknown_option bench "$TM" --iterations 5
expect_usage bench_missing_value bench "$TM" --runs
expect_usage bench_two_models bench "$TM" "$TM"
KILN_NUM_THREADS=0 expect_usage bench_env_threads_bad bench "$TM" --runs 1
expect bench_model_missing 1 "no_such_model.onnx" bench "$TMP/no_such_model.onnx"
expect bench_input_missing 1 "missing.pb" bench "$TM" --input "input=$TMP/missing.pb" --runs 1
expect bench_input_unknown 1 "Nope" bench "$TM" --input "Nope=$G/x.npy" --runs 1
expect bench_shape_unknown 1 "Nope" bench "$TM" --shape Nope=1x4 --runs 1
expect bench_engine_build_option 1 "tiny.kiln" bench "$TMP/tiny.kiln" --no-optimize --runs 1
expect bench_wrong_input 1 "input" bench "$TMP/tiny.kiln" --input "input=$G/input_0.pb" --runs 1
expect bench_hostile_model 1 "truncated or corrupt" bench "$B/bad_random.onnx"
expect help_bench 0 "" bench --help

# ---------------------------------------------------------------- probe / --machine
# One real probe (a few seconds; longer under ASan with the other tests
# running): every figure in its table, a description that loads back.
# Sanitized (KILN_SANITIZED=1, set by the build): the rates only, without the
# factors' calibration runs, which would time kernels running 10-50x slow.
if [ "${KILN_SANITIZED:-0}" = 1 ]; then
  TIMEOUT=90 kiln probe --output "$TMP/machine.json" --no-factors
  if [ "$rc" -eq 0 ] && [ "$(cat "$ERR")" = "probing this machine (a few seconds) ..." ]; then
    has probe_table "fp32 FMA" "GFLOP/s" "L1" "L2" "DRAM" "saved to $TMP/machine.json"
  else fail probe "exit $rc"; fi
else
  TIMEOUT=90 kiln probe --output "$TMP/machine.json"
  if [ "$rc" -eq 0 ] && [ "$(cat "$ERR")" = "probing this machine (a few seconds) ..." ]; then
    has probe_table "fp32 FMA" "GFLOP/s" "L1" "L2" "DRAM" "saved to $TMP/machine.json" \
      "IO model factors" "winograd" "eltwise"
  else fail probe "exit $rc"; fi
fi
expect probe_show 0 "" probe --show "$TMP/machine.json"
has probe_show_table "fp32 FMA" "numbers from probe"
expect probe_show_json 0 "" probe --show "$TMP/machine.json" --json
has probe_show_json_fields '"format":' '"kiln-machine"' '"levels":' '"read_gbs":'
[ "${KILN_SANITIZED:-0}" = 1 ] ||
  has probe_show_json_factors '"factors":' '"families":' '"gemm":' '"measured":'
expect probe_fallback 0 "" probe --fallback --output "$TMP/fallback.json"
has probe_fallback_table "numbers from fallback"
expect build_machine_probed 0 "" build "$B/good.onnx" -o "$TMP/m1.kiln" --machine "$TMP/machine.json"
expect build_machine_fallback 0 "" build "$B/good.onnx" -o "$TMP/m2.kiln" --machine fallback
expect build_machine_missing 1 "no_such_machine.json" build "$B/good.onnx" -o "$TMP/m3.kiln" \
  --machine "$TMP/no_such_machine.json"
printf '{"format": "kiln-machine", "version": 1' >"$TMP/trunc.json"
expect build_machine_truncated 1 "not valid JSON" build "$B/good.onnx" -o "$TMP/m3.kiln" \
  --machine "$TMP/trunc.json"
sed 's/^\([[:space:]]*\)"bytes":[[:space:]]*[0-9]*/\1"bytes": -5/' "$TMP/fallback.json" \
  >"$TMP/negative.json"
expect build_machine_bad_field 1 "levels[0].bytes" build "$B/good.onnx" -o "$TMP/m3.kiln" \
  --machine "$TMP/negative.json"
sed 's/^\([[:space:]]*\)"version":[[:space:]]*1/\1"version": 99/' "$TMP/fallback.json" \
  >"$TMP/newer.json"
expect build_machine_newer 1 "newer than this kiln" build "$B/good.onnx" -o "$TMP/m3.kiln" \
  --machine "$TMP/newer.json"
KILN_MACHINE=$TMP/trunc.json expect build_machine_env_bad 1 "KILN_MACHINE" \
  build "$B/good.onnx" -o "$TMP/m3.kiln"
expect probe_show_bad 1 "levels[0].bytes" probe --show "$TMP/negative.json"
# Tactics timed (the suite builds heuristic otherwise), with a timing cache:
# the first build times the 3x3 convolutions and writes the cache, the next
# takes every choice from it; a cache holding garbage is read past.
TINY=$TESTS/../models/tinycnn/model.onnx
expect build_timed 0 "" build "$TINY" --shape input=1x3x32x32 \
  -o "$TMP/timed.kiln" --tactics timed --timing-cache "$TMP/timing.txt" --threads 2
has build_timed_report "tactics: 3 steps with a choice, 3 shapes timed"
if head -n 1 "$TMP/timing.txt" | grep -q "^# kiln timing cache 1" &&
  [ "$(grep -c "NhwcFusedConv.*threads=2.*	conv_[a-z_]*	[0-9.]*	; conv_" "$TMP/timing.txt")" -eq 3 ]
then pass timing_cache_written; else fail timing_cache_written "$(head -c 300 "$TMP/timing.txt")"; fi
expect build_timed_cached 0 "" build "$TINY" --shape input=1x3x32x32 -o "$TMP/timed2.kiln" \
  --tactics timed --timing-cache "$TMP/timing.txt" --threads 2
has build_timed_cached_report "0 shapes timed" "3 steps from the timing cache"
same_bytes build_timed_cached_same "$TMP/timed.kiln" "$TMP/timed2.kiln"
{ printf 'garbage\n\tno key\t\nkey\tno_such_tactic\t1\n'; head -c 3000 /dev/urandom | tr -d '\0'; } \
  >"$TMP/garbage.txt"
expect build_timing_cache_garbage 0 "" build "$TINY" --shape input=1x3x32x32 \
  -o "$TMP/timed3.kiln" --tactics timed --timing-cache "$TMP/garbage.txt"
expect build_timing_cache_unwritable 1 "timing cache" build "$TINY" --shape input=1x3x32x32 \
  -o "$TMP/timed4.kiln" --tactics timed --timing-cache "$TMP/no_such_dir/timing.txt"
expect_usage build_tactics_bad build "$TINY" -o "$TMP/x.kiln" --tactics fastest
expect_usage build_candidates_zero build "$TINY" -o "$TMP/x.kiln" --tactic-candidates 0
expect_usage build_threads_zero build "$TINY" -o "$TMP/x.kiln" --threads 0
# Half the L2 in the description: the GEMM steps' blocking changes with it,
# and the engine keeps it (inspect reads the tiling back from the file).
VIT=$TESTS/data/attention/torch_vit_qkv.onnx
L2=$(awk '/"name":[[:space:]]*"L2"/ {f = 1} f && /"bytes"/ {gsub(/[^0-9]/, ""); print; exit}' \
  "$TMP/fallback.json")
awk -v l2="$L2" '/"name":[[:space:]]*"L2"/ {f = 1}
  f && /"bytes"/ {sub(l2, int(l2 / 2)); f = 0} {print}' "$TMP/fallback.json" >"$TMP/half_l2.json"
expect build_full_l2 0 "" build "$VIT" -o "$TMP/vit_full.kiln" --machine "$TMP/fallback.json"
expect build_half_l2 0 "" build "$VIT" -o "$TMP/vit_half.kiln" --machine "$TMP/half_l2.json"
kiln inspect "$TMP/vit_full.kiln" --json
grep -o '"tiling": "[^"]*"' "$OUT" | sort -u >"$TMP/tiles_full"
kiln inspect "$TMP/vit_half.kiln" --json
grep -o '"tiling": "[^"]*"' "$OUT" | sort -u >"$TMP/tiles_half"
if [ -n "$L2" ] && grep -q '"tiling": "kc' "$TMP/tiles_full" &&
  ! cmp -s "$TMP/tiles_full" "$TMP/tiles_half"; then pass half_l2_changes_tiles
else fail half_l2_changes_tiles "L2 '$L2'; tilings $(tr '\n' ' ' <"$TMP/tiles_full") vs $(tr '\n' ' ' <"$TMP/tiles_half")"; fi
# ... and so do the channels-last convolutions' (igemm: pixels a task and depth
# blocks; Winograd: its GEMMs' mc)
expect build_cnn_full_l2 0 "" build "$TINY" --shape input=1x3x32x32 -o "$TMP/cnn_full.kiln" \
  --machine "$TMP/fallback.json"
expect build_cnn_half_l2 0 "" build "$TINY" --shape input=1x3x32x32 -o "$TMP/cnn_half.kiln" \
  --machine "$TMP/half_l2.json"
kiln inspect "$TMP/cnn_full.kiln" --json
grep -oE '"tiling": "(blk|[0-9]+ tiles)[^"]*"' "$OUT" >"$TMP/cnn_tiles_full"
kiln inspect "$TMP/cnn_half.kiln" --json
grep -oE '"tiling": "(blk|[0-9]+ tiles)[^"]*"' "$OUT" >"$TMP/cnn_tiles_half"
if [ -s "$TMP/cnn_tiles_full" ] && ! cmp -s "$TMP/cnn_tiles_full" "$TMP/cnn_tiles_half"; then
  pass half_l2_changes_conv_tiles
else fail half_l2_changes_conv_tiles "$(tr '\n' ' ' <"$TMP/cnn_tiles_full") vs $(tr '\n' ' ' <"$TMP/cnn_tiles_half")"; fi
expect_usage probe_positional probe extra
expect_usage probe_threads_zero probe --threads 0
expect_usage probe_show_and_output probe --show "$TMP/machine.json" --output "$TMP/x.json"
expect help_probe 0 "" probe --help

sweep good_onnx model "$B/good.onnx"
sweep ext_onnx model "$B/ext.onnx"
sweep sparse_onnx model "$B/sparse.onnx"
sweep nested_if2_onnx model "$B/nested_if2.onnx"
sweep input_pb input "$G/input_0.pb"
sweep input_npy input "$G/x.npy"

echo "cli: $n_ok ok, $n_fail failed"
[ "$n_fail" -eq 0 ]
