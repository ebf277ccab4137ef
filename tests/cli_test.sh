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
# Every prefix of a good file, and two bits flipped (one at a time) at every
# byte: exit 0 or a clean exit 1, never a crash, a hang or a messy message.
# Models are mutated in a folder that holds weights.bin; inputs are fed to
# good.onnx.
mkdir -p "$TMP/sw"
cp "$B/weights.bin" "$TMP/sw/"
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
# sweep LABEL KIND FILE
sweep() {
  local label=$1 kind=$2 src=$3 size cut pos bit byte bad=0
  local f=$TMP/sw/mutant.${src##*.}
  local -a bytes
  read -r -a bytes <<<"$(od -An -tu1 -v "$src" | tr '\n' ' ')"
  size=${#bytes[@]}
  for ((cut = 0; cut < size; cut++)); do
    head -c "$cut" "$src" >"$f"
    sweep_one "sweep_${label}_truncate_at_$cut" "$kind" "$f" || bad=1
  done
  for ((pos = 0; pos < size; pos++)); do
    byte=${bytes[pos]}
    for bit in $((pos % 8)) $(((pos + 3) % 8)); do
      cp "$src" "$f"
      printf '%b' "\\0$(printf %03o $((byte ^ (1 << bit))))" |
        dd of="$f" bs=1 seek="$pos" conv=notrunc status=none
      sweep_one "sweep_${label}_flip_bit_${bit}_at_$pos" "$kind" "$f" || bad=1
    done
  done
  [ $bad -eq 0 ] && pass "sweep_$label ($size prefixes, $((2 * size)) bit flips)"
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
if grep -q '"format_version": 1' "$OUT" && grep -q '"step_list"' "$OUT"; then pass inspect_engine_json_keys
else fail inspect_engine_json_keys "format_version/step_list missing"; fi
expect compare_engine 0 "" compare "$B/good.onnx" "$TMP/good.kiln" --per-layer
expect compare_model 0 "" compare "$M/model.onnx" --per-layer
expect build_tinycnn 0 "" build "$M/model.onnx" -o "$TMP/tiny.kiln" --shape input=1x3x32x32
expect run_tinycnn_engine 0 "" run "$TMP/tiny.kiln" --input-dir "$M/test_data_set_0"
expect run_tinycnn_engine_wrong_shape 1 "input" run "$TMP/tiny.kiln" --input "input=$G/input_0.pb"
expect build_workspace_small 1 "workspace" build "$M/model.onnx" -o "$TMP/ws.kiln" --shape input=1x3x32x32 --workspace 1K
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

sweep good_onnx model "$B/good.onnx"
sweep ext_onnx model "$B/ext.onnx"
sweep sparse_onnx model "$B/sparse.onnx"
sweep nested_if2_onnx model "$B/nested_if2.onnx"
sweep input_pb input "$G/input_0.pb"
sweep input_npy input "$G/x.npy"

echo "cli: $n_ok ok, $n_fail failed"
[ "$n_fail" -eq 0 ]
