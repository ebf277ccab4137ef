#!/usr/bin/env bash
# kiln quantize: Q/DQ ONNX models from a model and its calibration cache.
#
# usage: quantize_test.sh KILN_BIN SOURCE_DIR
#
# On the bundled tinycnn (calibrated here on seeded inputs from kiln bench
# --save-inputs):
#  (a) the Q/DQ model on kiln's reference path against the fp32 model on a
#      sample not calibrated on (cosine, max abs error within int8's), and
#      kiln compare on the Q/DQ model (its optimized engine against its
#      reference path);
#  (b) with /usr/bin/python3 and onnx: onnx.checker (full check), one
#      QuantizeLinear per quantized input and one DequantizeLinear more per
#      weight, int8 weights W_quantized equal to round half to even of
#      w / scale with scale max|w| / 127 per output channel (the DQ's axis),
#      activation scale and zero point as docs/CALIBRATION.md derives them
#      from the cache, the original weights gone and every other node,
#      initializer, opset and metadata entry kept;
#  (c) when scripts/node_modules/onnxruntime-node is installed
#      (scripts/make_reference.sh installs it), ONNX Runtime (scripts/ort_run.js)
#      runs the Q/DQ model and its outputs match kiln's on the same model;
#  variants: a cache without one input's entry (that op left fp32 with one
#  note), opset 12 (per-tensor weights and a note), a model whose names
#  collide with the ones kiln adds, external data refused;
#  hostile input: missing, truncated and corrupt models, missing, empty,
#  corrupt and unrelated caches, an engine given as the model, usage errors.
# On the trained models digits_cnn, seq_gru and seq_attn
# (scripts/train_models.py, each when in the cache $KILN_CACHE, default
# ~/.cache/kiln/models), calibrated on their calib split (entropy, minmax):
#  (d) held-out top-1 accuracy of the Q/DQ model, in kiln and in ONNX
#      Runtime, within 1 point of fp32's; ORT and kiln agree on at least 99%
#      of the predictions; and, when `kiln build` has --precision int8 and
#      makes int8 steps, kiln's int8 engine too, ORT's Q/DQ model agreeing
#      with it on at least 99% (issue 9's bar).
# Python, numpy and ORT parts are skipped (with a line saying so) when they
# are missing.  Prints "ok NAME", "skip NAME: why" or "FAIL NAME: why".
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
KILN=$1
SRC=$2
MODEL=$SRC/models/tinycnn/model.onnx
PY=${KILN_PYTHON:-/usr/bin/python3}
CACHE=${KILN_CACHE:-$HOME/.cache/kiln/models}
ORT_JS=$SRC/scripts/ort_run.js
[ -x "$KILN" ] || { echo "FAIL: $KILN is not executable" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "FAIL: no $MODEL" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
ERR=$TMP/err
TIMEOUT=120
n_ok=0
n_fail=0
n_skip=0

pass() {
  echo "ok $1"
  n_ok=$((n_ok + 1))
}
skip() {
  echo "skip $1: $2"
  n_skip=$((n_skip + 1))
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

# Why the last run is not a clean exit WANT, or nothing.  Status 0 may leave
# only notes on stderr; status 1 exactly one line starting "kiln: " holding
# KEY; status 2 one line.
verdict() {
  local want=$1 key=$2
  if [ "$rc" -eq 124 ]; then echo "hung (killed after ${TIMEOUT}s)"; return; fi
  if [ "$rc" -ge 128 ]; then echo "crashed (status $rc)"; return; fi
  if [ "$rc" -ne "$want" ]; then echo "exit $rc, expected $want"; return; fi
  case $want in
  0) if grep -qv '^kiln quantize: note: ' "$ERR"; then echo "stderr holds more than notes"; fi ;;
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

have_py=0
"$PY" -c 'import onnx, numpy' 2>/dev/null && have_py=1
have_np=0
"$PY" -c 'import numpy' 2>/dev/null && have_np=1
have_ort=0
[ -d "$SRC/scripts/node_modules/onnxruntime-node" ] && command -v node >/dev/null && have_ort=1

# ---- tinycnn: samples, cache, Q/DQ model -------------------------------------
DATA=$TMP/data
mkdir -p "$DATA"
for k in 1 2 3 4 5 6; do
  if ! timeout "$TIMEOUT" "$KILN" bench "$MODEL" --shape input=1x3x32x32 --runs 1 --warmup 0 \
      --seed "$k" --save-inputs "$DATA/sample_$k" >"$OUT" 2>"$ERR"; then
    fail setup_inputs "kiln bench --save-inputs failed"
    exit 1
  fi
done
EVAL=$TMP/eval # a sample not calibrated on
timeout "$TIMEOUT" "$KILN" bench "$MODEL" --shape input=1x3x32x32 --runs 1 --warmup 0 \
  --seed 99 --save-inputs "$EVAL" >"$OUT" 2>"$ERR" || { fail setup_eval "kiln bench"; exit 1; }
CALIB=$TMP/tiny.calib
expect calibrate 0 "" calibrate "$MODEL" --data "$DATA" -o "$CALIB" --method minmax \
  --shape input=1x3x32x32
QDQ=$TMP/tiny.qdq.onnx
expect quantize 0 "" quantize "$MODEL" --calibration "$CALIB" -o "$QDQ"
if grep -qF '5 of 5 Conv/ConvTranspose/Gemm/MatMul ops, 5 activation Q/DQ pairs' "$OUT" &&
   grep -qF '5 int8 weights (per output channel)' "$OUT" && [ ! -s "$ERR" ]; then
  pass quantize_summary
else
  fail quantize_summary "expected 5 of 5 ops, 5 pairs, 5 per-channel weights and no notes"
fi
[ -f "$QDQ.tmp" ] && fail quantize_tmp "left $QDQ.tmp behind"

# (a) against the fp32 model, on kiln's reference path
kiln run "$MODEL" --input-dir "$EVAL" --output-dir "$TMP/fp32" --output-format npy --no-optimize
[ "$rc" -eq 0 ] || fail run_fp32 "kiln run on the fp32 model: exit $rc"
kiln run "$QDQ" --input-dir "$EVAL" --output-dir "$TMP/qdq" --output-format npy --no-optimize
if [ "$rc" -ne 0 ]; then
  fail run_qdq "kiln run --no-optimize on the Q/DQ model: exit $rc"
elif [ "$have_np" = 1 ]; then
  if "$PY" - "$TMP/fp32/output_0.npy" "$TMP/qdq/output_0.npy" >"$OUT" 2>"$ERR" <<'EOF'
import sys
import numpy as np
a = np.load(sys.argv[1]).astype(np.float64).ravel()
b = np.load(sys.argv[2]).astype(np.float64).ravel()
cos = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
err = np.abs(a - b).max()
span = np.abs(a).max()
print("fp32 vs Q/DQ (kiln reference path): cosine %.6f, max abs error %.3g (max |fp32| %.3g)"
      % (cos, err, span))
sys.exit(0 if cos >= 0.999 and err <= 0.05 * span else 1)
EOF
  then pass "qdq_vs_fp32 ($(cat "$OUT"))"; else fail qdq_vs_fp32 "$(cat "$OUT")"; fi
else
  skip qdq_vs_fp32 "$PY has no numpy"
fi
# the optimized engine of the Q/DQ model against its reference path, within
# int8's error: where the builder runs an op in fp32 it reads the input
# before its Q/DQ pair (src/passes/qdq.c), without the pair's rounding
expect compare_qdq 0 "" compare "$QDQ" --input "input=$EVAL/input_0.pb" --atol 1e-2 --rtol 1e-2

# (b) the file's structure
check_structure() { # FP32_MODEL QDQ_MODEL CALIB N_QUANT PER_CHANNEL [ORIGINAL_WEIGHTS_KEPT...]
  "$PY" - "$@" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import numpy_helper

src, qdq, calib, n_quant, per_channel = sys.argv[1:6]
import re
n_quant, per_channel = int(n_quant), per_channel == "1"
fail = []
a = onnx.load(src)
m = onnx.load(qdq)
try:
    onnx.checker.check_model(m, full_check=True)
except Exception as e:  # noqa: BLE001
    fail.append("onnx.checker: %s" % str(e).splitlines()[0])

ranges = {}
for line in open(calib):
    f = line.split()
    if len(f) == 4 and not line.startswith("#"):
        try:
            ranges[f[0]] = tuple(np.float32(v) for v in f[1:])
        except ValueError:
            pass

def u8_params(amax, lo, hi):  # docs/CALIBRATION.md, kn_calib_u8_params
    lo, hi = max(lo, -amax), min(hi, amax)
    lo, hi = min(lo, np.float32(0)), max(hi, np.float32(0))
    if not hi - lo > 0:
        return np.float32(1), 0
    s = np.float32((hi - lo) / np.float32(255))
    return s, int(min(255, max(0, np.rint(-lo / s))))

inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
src_inits = {t.name: numpy_helper.to_array(t) for t in a.graph.initializer}
producers = {o: n for n in m.graph.node for o in n.output}
qs = [n for n in m.graph.node if n.op_type == "QuantizeLinear"]
dqs = [n for n in m.graph.node if n.op_type == "DequantizeLinear"]
ops = [n for n in m.graph.node if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul")]
quantized = [n for n in ops if n.input[0] in producers
             and producers[n.input[0]].op_type == "DequantizeLinear"]
if len(quantized) != n_quant:
    fail.append("%d ops read a DequantizeLinear, expected %d" % (len(quantized), n_quant))
act = {producers[n.input[0]].input[0] for n in quantized}
if len(qs) != len(act):
    fail.append("%d QuantizeLinear for %d quantized inputs" % (len(qs), len(act)))
wdq = {n.input[1] for n in quantized}
if len(dqs) != len(act) + len(wdq):
    fail.append("%d DequantizeLinear, expected %d (inputs) + %d (weights)"
                % (len(dqs), len(act), len(wdq)))
for q in qs:
    x, s, z = q.input
    if x not in ranges:
        fail.append("Q/DQ on %s, which the cache does not have" % x)
        continue
    want_s, want_z = u8_params(*ranges[x])
    got_s, got_z = inits[s], inits[z]
    if got_z.dtype != np.uint8 or got_s.shape != () or got_z.shape != ():
        fail.append("%s: zero point %s %s, scale %s: expected uint8 and float scalars"
                    % (x, got_z.dtype, got_z.shape, got_s.shape))
    elif abs(float(got_s) - float(want_s)) > 1e-6 * float(want_s) or int(got_z) != want_z:
        fail.append("%s: scale %r zero %d, expected %r %d" % (x, float(got_s), int(got_z),
                                                            float(want_s), want_z))
for n in quantized:
    d = producers[n.input[1]]
    wq, ws, wz = d.input
    axis = {t.name: t.i for t in d.attribute}.get("axis")
    # NAME_quantized, or NAME_quantized_K when the model has that name already
    wname = re.sub(r"_quantized(_[0-9]+)?$", "", wq) if re.search(r"_quantized(_[0-9]+)?$", wq) else None
    if wname not in src_inits:
        fail.append("%s: weight %s is not an original weight's NAME_quantized" % (n.name, wq))
        continue
    w = src_inits[wname].astype(np.float32)
    q, s, z = inits[wq], inits[ws], inits[wz]
    if q.dtype != np.int8 or z.dtype != np.int8 or q.shape != w.shape or np.any(z != 0):
        fail.append("%s: weight %s %s, zero point %s: expected int8 %s and int8 zeros"
                    % (n.name, q.dtype, q.shape, z.dtype, w.shape))
        continue
    if per_channel:
        if axis is None or s.shape != (w.shape[axis],):
            fail.append("%s: scale %s axis %s: expected one per output channel"
                        % (n.name, s.shape, axis))
            continue
        red = tuple(i for i in range(w.ndim) if i != axis)
        amax = np.abs(w).max(axis=red)
        shape = [1] * w.ndim
        shape[axis] = -1
    else:
        if axis is not None or s.shape != ():
            fail.append("%s: per-tensor weights expected, got scale %s axis %s"
                        % (n.name, s.shape, axis))
            continue
        amax = np.abs(w).max()
        shape = []
    want = np.where(amax > 0, (amax / np.float32(127)).astype(np.float32), np.float32(1))
    if not np.array_equal(s, want.astype(np.float32)):
        fail.append("%s: scales differ from max|w| / 127 (max diff %g)"
                    % (n.name, np.abs(s - want).max()))
    want_q = np.clip(np.rint(w / s.reshape(shape)), -127, 127).astype(np.int8)
    if not np.array_equal(q, want_q):
        fail.append("%s: %d int8 weights differ from round(w / scale)"
                    % (n.name, int((q != want_q).sum())))
    if n.op_type == "Conv" and per_channel and axis != 0:
        fail.append("%s: Conv weight axis %s, expected 0" % (n.name, axis))
    if n.op_type == "ConvTranspose" and per_channel and axis != 1:
        fail.append("%s: ConvTranspose weight axis %s, expected 1" % (n.name, axis))
    if n.op_type == "MatMul" and per_channel and axis != w.ndim - 1:
        fail.append("%s: MatMul weight axis %s, expected %d" % (n.name, axis, w.ndim - 1))
    if n.op_type == "Gemm" and per_channel:
        tb = {t.name: t.i for t in n.attribute}.get("transB", 0)
        if axis != (0 if tb else 1):
            fail.append("%s: Gemm weight axis %s with transB %d" % (n.name, axis, tb))
# the rest kept
added = {o for n in m.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")
         for o in n.output}
old_nodes = [(n.name, n.op_type) for n in a.graph.node]
new_nodes = [(n.name, n.op_type) for n in m.graph.node
             if n.op_type not in ("QuantizeLinear", "DequantizeLinear")
             or n.name in {x.name for x in a.graph.node}]
if old_nodes != new_nodes:
    fail.append("the original nodes are not all kept in order")
for n_old, n_new in zip([n for n in a.graph.node], [n for n in m.graph.node
                                                       if (n.name, n.op_type) in old_nodes]):
    if list(n_old.attribute) != list(n_new.attribute) or list(n_old.output) != list(n_new.output):
        fail.append("node %s: attributes or outputs changed" % n_old.name)
used = {i for n in m.graph.node for i in n.input} | {o.name for o in m.graph.output}
weights = {re.sub(r"_quantized(_[0-9]+)?$", "", producers[n.input[1]].input[0])
           for n in quantized}
for name in src_inits:
    replaced = name in weights
    if replaced and name in inits and name not in used:
        fail.append("%s: kept though nothing reads it" % name)
    if not replaced and name not in inits:
        fail.append("initializer %s was dropped" % name)
    if not replaced and name in inits and not np.array_equal(inits[name], src_inits[name]):
        fail.append("initializer %s changed" % name)
for f in ("ir_version", "producer_name", "producer_version", "model_version", "doc_string"):
    if getattr(a, f) != getattr(m, f):
        fail.append("model %s changed" % f)
if list(a.opset_import) != list(m.opset_import) or list(a.metadata_props) != list(m.metadata_props):
    fail.append("opsets or metadata changed")
# a weight dropped leaves the graph inputs too (initializers listed as inputs)
kept_inputs = [i for i in a.graph.input if not (i.name in weights and i.name not in inits)]
if kept_inputs != list(m.graph.input) or list(a.graph.output) != list(m.graph.output) \
        or list(a.graph.value_info) != list(m.graph.value_info):
    fail.append("graph inputs, outputs or value_info changed")
names = [o for n in m.graph.node for o in n.output] + list(inits)
if len(names) != len(set(names)):
    fail.append("names defined twice: %s" % sorted({x for x in names if names.count(x) > 1})[:3])
node_names = [n.name for n in m.graph.node if n.name]
if len(node_names) != len(set(node_names)):
    fail.append("node names used twice")
if fail:
    print("; ".join(fail[:4]))
    sys.exit(1)
print("%d Q, %d DQ, %d int8 weights" % (len(qs), len(dqs), len(wdq)))
EOF
}

if [ "$have_py" = 1 ]; then
  if check_structure "$MODEL" "$QDQ" "$CALIB" 5 1 >"$OUT" 2>"$ERR"; then
    pass "structure ($(cat "$OUT"))"
  else
    fail structure "$(tail -n 1 "$OUT")"
  fi
else
  skip structure "$PY lacks onnx or numpy"
fi

# (c) ONNX Runtime runs it, with kiln's results
# ort_vs_kiln NAME QDQ_MODEL INPUT_DIR KILN_NPY
ort_vs_kiln() {
  rm -rf "$TMP/ort"
  if ! timeout "$TIMEOUT" node "$ORT_JS" "$2" --input-dir "$3" --output-dir "$TMP/ort" \
      --quiet >"$OUT" 2>"$ERR"; then
    fail "$1" "ONNX Runtime failed on the Q/DQ model"
    return
  fi
  if "$PY" - "$TMP/ort/output_0.pb" "$4" >"$OUT" 2>"$ERR" <<'EOF'; then
import sys
import numpy as np
import onnx
from onnx import numpy_helper
t = onnx.TensorProto()
t.ParseFromString(open(sys.argv[1], "rb").read())
o = numpy_helper.to_array(t).astype(np.float64)
k = np.load(sys.argv[2]).astype(np.float64)
d = np.abs(o - k).max()
span = np.abs(k).max()
print("ONNX Runtime vs kiln on the Q/DQ model: max abs difference %.3g (max |output| %.3g)"
      % (d, span))
# the same arithmetic but for the order of fp32 sums: a value on a rounding
# edge of a QuantizeLinear may land one step apart, hence 1% of the range
sys.exit(0 if o.shape == k.shape and d <= 1e-4 + 1e-2 * span else 1)
EOF
    pass "$1 ($(cat "$OUT"))"
  else
    fail "$1" "$(cat "$OUT")"
  fi
}
if [ "$have_ort" = 1 ] && [ "$have_py" = 1 ]; then
  ort_vs_kiln ort_runs_qdq "$QDQ" "$EVAL" "$TMP/qdq/output_0.npy"
else
  skip ort_runs_qdq "no onnxruntime-node in $SRC/scripts/node_modules (scripts/make_reference.sh), node or onnx"
fi

# ---- variants ----------------------------------------------------------------
# a cache without the graph input's entry: /c1/Conv stays fp32, one note
grep -v '^input ' "$CALIB" >"$TMP/partial.calib"
expect partial_calibration 0 "" quantize "$MODEL" --calibration "$TMP/partial.calib" \
  -o "$TMP/partial.qdq.onnx"
if [ "$(wc -l <"$ERR")" -eq 1 ] && grep -qF "node '/c1/Conv' (Conv): left in fp32: its input 'input' has no calibration entry" "$ERR" &&
   grep -qF '4 of 5' "$OUT"; then
  pass partial_calibration_note
else
  fail partial_calibration_note "expected one note naming /c1/Conv and 'input', and 4 of 5 ops"
fi
if [ "$have_py" = 1 ]; then
  if check_structure "$MODEL" "$TMP/partial.qdq.onnx" "$TMP/partial.calib" 4 1 >"$OUT" 2>"$ERR"; then
    pass "partial_structure ($(cat "$OUT"))"
  else
    fail partial_structure "$(tail -n 1 "$OUT")"
  fi

  # opset 12: per-tensor weights, a note, the opset kept
  "$PY" - "$MODEL" "$TMP/op12.onnx" <<'EOF'
import sys
import onnx
m = onnx.load(sys.argv[1])
for o in m.opset_import:
    if o.domain in ("", "ai.onnx"):
        o.version = 12
onnx.save(m, sys.argv[2])
EOF
  expect opset12 0 "" quantize "$TMP/op12.onnx" --calibration "$CALIB" -o "$TMP/op12.qdq.onnx"
  if grep -qF 'per tensor' "$ERR" && [ "$(wc -l <"$ERR")" -eq 1 ] && grep -qF '(per tensor), opset 12' "$OUT"; then
    pass opset12_note
  else
    fail opset12_note "expected one note on per-tensor weights and 'opset 12' in the summary"
  fi
  if check_structure "$TMP/op12.onnx" "$TMP/op12.qdq.onnx" "$CALIB" 5 0 >"$OUT" 2>"$ERR"; then
    pass "opset12_structure ($(cat "$OUT"))"
  else
    fail opset12_structure "$(tail -n 1 "$OUT")"
  fi
  kiln run "$TMP/op12.qdq.onnx" --input-dir "$EVAL" --no-optimize
  [ "$rc" -eq 0 ] && pass opset12_runs || fail opset12_runs "kiln run: exit $rc"

  # names that collide with those kiln adds (kept, unused initializers and a
  # value_info), doc strings and metadata to keep
  "$PY" - "$MODEL" "$TMP/names.onnx" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper
m = onnx.load(sys.argv[1])
for n in ("c1.weight_quantized", "input_scale", "input_DequantizeLinear_Output",
          "fc.weight_DequantizeLinear"):
    m.graph.initializer.append(numpy_helper.from_array(np.ones(3, np.float32), n))
m.graph.value_info.append(helper.make_tensor_value_info("/c1/Conv_output_0", onnx.TensorProto.FLOAT, None))
m.doc_string = "a doc string"
helper.set_model_props(m, {"author": "quantize_test", "note": "kept"})
onnx.save(m, sys.argv[2])
EOF
  expect name_collisions 0 "" quantize "$TMP/names.onnx" --calibration "$CALIB" -o "$TMP/names.qdq.onnx"
  if check_structure "$TMP/names.onnx" "$TMP/names.qdq.onnx" "$CALIB" 5 1 >"$OUT" 2>"$ERR"; then
    pass "name_collisions_structure ($(cat "$OUT"))"
  else
    fail name_collisions_structure "$(tail -n 1 "$OUT")"
  fi
  kiln run "$TMP/names.qdq.onnx" --input-dir "$EVAL" --output-dir "$TMP/names_out" \
    --output-format npy --no-optimize
  if [ "$rc" -eq 0 ] && cmp -s "$TMP/names_out/output_0.npy" "$TMP/qdq/output_0.npy"; then
    pass name_collisions_same_result
  else
    fail name_collisions_same_result "exit $rc, or outputs differ from the plain Q/DQ model's"
  fi

  # every op kind, an input shared by two convolutions (one pair), a weight
  # shared by two Gemms (one DequantizeLinear, the float weight dropped) and
  # a weight also read by an Identity (kept)
  "$PY" - "$TMP/ops.onnx" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(7)
def w(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.5, name)
inits = [w("Wc", 8, 4, 3, 3), w("Wc2", 8, 4, 1, 1), w("Wt", 8, 4, 2, 2), w("Wm", 4, 5),
         w("Wg", 5, 3), w("bg", 3)]
nodes = [
    helper.make_node("Conv", ["x", "Wc"], ["c1"], "conv_a", pads=[1, 1, 1, 1]),
    helper.make_node("Conv", ["x", "Wc2"], ["c2"], "conv_b"),
    helper.make_node("Add", ["c1", "c2"], ["s"], "add"),
    helper.make_node("Relu", ["s"], ["r"], "relu"),
    helper.make_node("ConvTranspose", ["r", "Wt"], ["t"], "convt", strides=[2, 2]),
    helper.make_node("ReduceMean", ["t"], ["v"], "mean", axes=[2, 3], keepdims=0),
    helper.make_node("MatMul", ["v", "Wm"], ["m"], "matmul"),
    helper.make_node("Relu", ["m"], ["m2"], "relu_m"),
    helper.make_node("Gemm", ["m", "Wg", "bg"], ["g1"], "gemm_1"),
    helper.make_node("Gemm", ["m2", "Wg", "bg"], ["g2"], "gemm_2"),
    helper.make_node("Identity", ["Wm"], ["wm_out"], "identity"),
]
g = helper.make_graph(nodes, "ops",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                      [helper.make_tensor_value_info(n, TensorProto.FLOAT, d)
                       for n, d in (("g1", [1, 3]), ("g2", [1, 3]), ("wm_out", [4, 5]))],
                      inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                      producer_name="quantize_test")
m.ir_version = 7
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
EOF
  mkdir -p "$TMP/ops_data"
  for k in 1 2 3 4 99; do
    timeout "$TIMEOUT" "$KILN" bench "$TMP/ops.onnx" --runs 1 --warmup 0 --seed "$k" \
      --save-inputs "$TMP/ops_data/sample_$k" >"$OUT" 2>"$ERR" || fail ops_inputs "kiln bench"
  done
  mv "$TMP/ops_data/sample_99" "$TMP/ops_eval"
  expect ops_calibrate 0 "" calibrate "$TMP/ops.onnx" --data "$TMP/ops_data" \
    -o "$TMP/ops.calib" --method minmax
  expect ops_quantize 0 "" quantize "$TMP/ops.onnx" --calibration "$TMP/ops.calib" \
    -o "$TMP/ops.qdq.onnx"
  if grep -qF '6 of 6 Conv/ConvTranspose/Gemm/MatMul ops, 5 activation Q/DQ pairs' "$OUT" &&
     grep -qF '5 int8 weights' "$OUT"; then
    pass ops_summary
  else
    fail ops_summary "expected 6 of 6 ops, 5 pairs (x shared) and 5 weights (Wg shared)"
  fi
  if check_structure "$TMP/ops.onnx" "$TMP/ops.qdq.onnx" "$TMP/ops.calib" 6 1 >"$OUT" 2>"$ERR"; then
    pass "ops_structure ($(cat "$OUT"))"
  else
    fail ops_structure "$(tail -n 1 "$OUT")"
  fi
  kiln run "$TMP/ops.onnx" --input-dir "$TMP/ops_eval" --output-dir "$TMP/ops_fp32" \
    --output-format npy --no-optimize
  kiln run "$TMP/ops.qdq.onnx" --input-dir "$TMP/ops_eval" --output-dir "$TMP/ops_qdq" \
    --output-format npy --no-optimize
  if [ "$rc" -eq 0 ] && "$PY" - "$TMP/ops_fp32" "$TMP/ops_qdq" >"$OUT" 2>"$ERR" <<'EOF'; then
import sys
import numpy as np
worst = 1.0
for i in range(3):
    a = np.load("%s/output_%d.npy" % (sys.argv[1], i)).astype(np.float64).ravel()
    b = np.load("%s/output_%d.npy" % (sys.argv[2], i)).astype(np.float64).ravel()
    worst = min(worst, a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    if i == 2 and not np.array_equal(a, b):
        print("wm_out (an Identity of a kept float weight) changed")
        sys.exit(1)
print("fp32 vs Q/DQ: least cosine %.6f over the 3 outputs" % worst)
sys.exit(0 if worst >= 0.999 else 1)
EOF
    pass "ops_vs_fp32 ($(cat "$OUT"))"
  else
    fail ops_vs_fp32 "exit $rc: $(cat "$OUT" "$ERR")"
  fi
  if [ "$have_ort" = 1 ]; then
    ort_vs_kiln ops_ort_output_0 "$TMP/ops.qdq.onnx" "$TMP/ops_eval" "$TMP/ops_qdq/output_0.npy"
  fi

  # every initializer also a graph input (older exporters' way): the weights
  # are quantized and leave the inputs with a note; the other inputs stay
  "$PY" - "$MODEL" "$TMP/inputs.onnx" <<'EOF'
import sys
import onnx
from onnx import helper
m = onnx.load(sys.argv[1])
for t in m.graph.initializer:
    m.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
onnx.save(m, sys.argv[2])
EOF
  expect initializer_inputs 0 "" quantize "$TMP/inputs.onnx" --calibration "$CALIB" \
    -o "$TMP/inputs.qdq.onnx"
  if grep -qF '5 of 5' "$OUT" && [ "$(wc -l <"$ERR")" -eq 1 ] &&
     grep -qF '5 quantized weights were also listed as graph inputs' "$ERR"; then
    pass initializer_inputs_note
  else
    fail initializer_inputs_note "expected 5 of 5 ops and one note on the 5 weight inputs"
  fi
  if check_structure "$TMP/inputs.onnx" "$TMP/inputs.qdq.onnx" "$CALIB" 5 1 >"$OUT" 2>"$ERR"; then
    pass "initializer_inputs_structure ($(cat "$OUT"))"
  else
    fail initializer_inputs_structure "$(tail -n 1 "$OUT")"
  fi
  kiln run "$TMP/inputs.qdq.onnx" --input-dir "$EVAL" --output-dir "$TMP/inputs_out" \
    --output-format npy --no-optimize
  if [ "$rc" -eq 0 ] && cmp -s "$TMP/inputs_out/output_0.npy" "$TMP/qdq/output_0.npy"; then
    pass initializer_inputs_same_result
  else
    fail initializer_inputs_same_result "exit $rc, or outputs differ from the plain Q/DQ model's"
  fi

  # external data is refused
  mkdir -p "$TMP/ext"
  "$PY" - "$MODEL" "$TMP/ext/model.onnx" <<'EOF'
import sys
import onnx
m = onnx.load(sys.argv[1])
onnx.save(m, sys.argv[2], save_as_external_data=True, all_tensors_to_one_file=True,
          location="weights.bin", size_threshold=0)
EOF
  expect external_data 1 "external" quantize "$TMP/ext/model.onnx" --calibration "$CALIB" \
    -o "$TMP/ext.qdq.onnx"
else
  skip variants "$PY lacks onnx or numpy"
fi

# ---- hostile input -------------------------------------------------------------
head -c 5000 "$MODEL" >"$TMP/truncated.onnx"
head -c 4096 /dev/urandom >"$TMP/random.onnx"
: >"$TMP/empty.calib"
printf 'kiln-calibration 1\nmethod minmax\nsamples 1\nend\n' >"$TMP/none.calib"
printf 'kiln-calibration 1\nmethod minmax\nsamples 1\nx 1 -1 1\n' >"$TMP/cut.calib"
printf 'kiln-calibration 1\nmethod minmax\nsamples 1\nother_tensor 1 -1 1\nend\n' >"$TMP/other.calib"
expect missing_model 1 "nope.onnx" quantize "$TMP/nope.onnx" --calibration "$CALIB" -o "$TMP/x.onnx"
expect truncated_model 1 "truncated.onnx" quantize "$TMP/truncated.onnx" --calibration "$CALIB" \
  -o "$TMP/x.onnx"
expect corrupt_model 1 "random.onnx" quantize "$TMP/random.onnx" --calibration "$CALIB" \
  -o "$TMP/x.onnx"
expect missing_calibration 1 "nope.calib" quantize "$MODEL" --calibration "$TMP/nope.calib" \
  -o "$TMP/x.onnx"
expect empty_calibration 1 "empty.calib" quantize "$MODEL" --calibration "$TMP/empty.calib" \
  -o "$TMP/x.onnx"
expect cut_calibration 1 "cut.calib" quantize "$MODEL" --calibration "$TMP/cut.calib" \
  -o "$TMP/x.onnx"
expect no_entries_calibration 1 "none of its 5" quantize "$MODEL" \
  --calibration "$TMP/none.calib" -o "$TMP/x.onnx"
expect unrelated_calibration 1 "is it this model's" quantize "$MODEL" \
  --calibration "$TMP/other.calib" -o "$TMP/x.onnx"
expect bad_output_dir 1 "no_such_dir" quantize "$MODEL" --calibration "$CALIB" \
  -o "$TMP/no_such_dir/x.onnx"
[ -e "$TMP/x.onnx" ] && fail nothing_written "a failed run wrote $TMP/x.onnx"
timeout "$TIMEOUT" "$KILN" build "$MODEL" -o "$TMP/tiny.kiln" --shape input=1x3x32x32 \
  >/dev/null 2>&1 && expect engine_as_model 1 "engine" quantize "$TMP/tiny.kiln" \
  --calibration "$CALIB" -o "$TMP/x.onnx"
expect usage_no_model 2 "MODEL" quantize --calibration "$CALIB" -o "$TMP/x.onnx"
expect usage_no_calibration 2 "--calibration" quantize "$MODEL" -o "$TMP/x.onnx"
expect usage_no_output 2 "-o" quantize "$MODEL" --calibration "$CALIB"
expect usage_unknown_option 2 "--bogus" quantize "$MODEL" --calibration "$CALIB" -o x --bogus
kiln quantize --help
[ "$rc" -eq 0 ] && grep -qF 'usage: kiln quantize' "$OUT" && pass help || fail help "exit $rc"

# ---- the trained models: held-out accuracy ------------------------------------
# trained NAME N_QUANT: calibrate on NAME's calib split with two methods,
# quantize, then the held-out samples in one batch through fp32 and the Q/DQ
# models in kiln (reference path and optimized), ONNX Runtime and kiln's
# int8 engine
trained() {
  local m=$1 n_quant=$2 D=$CACHE/$1 T=$TMP/$1
  if [ ! -f "$D/model.onnx" ] || [ ! -f "$D/heldout/labels.txt" ] || [ ! -d "$D/calib" ] ||
     [ ! -f "$D/info.json" ]; then
    skip "$m" "not in $CACHE (scripts/train_models.py --models $m makes it)"
    return
  fi
  mkdir -p "$T"
  local name dims n
  read -r name dims < <("$PY" -c 'import json, sys
i = json.load(open(sys.argv[1]))["input"]
print(i["name"], "x".join(str(d) for d in i["shape"][1:]))' "$D/info.json")
  for method in entropy minmax; do
    expect "${m}_calibrate_$method" 0 "" calibrate "$D/model.onnx" --data "$D/calib" \
      -o "$T/$method.calib" --method "$method" --shape "$name=1x$dims"
    expect "${m}_quantize_$method" 0 "" quantize "$D/model.onnx" \
      --calibration "$T/$method.calib" -o "$T/$method.qdq.onnx"
  done
  if check_structure "$D/model.onnx" "$T/entropy.qdq.onnx" "$T/entropy.calib" "$n_quant" 1 \
      >"$OUT" 2>"$ERR"; then
    pass "${m}_structure ($(cat "$OUT"))"
  else
    fail "${m}_structure" "$(tail -n 1 "$OUT")"
  fi
  # the held-out samples stacked into one batch (input_0.pb for ORT, .npy for kiln)
  n=$("$PY" - "$D/heldout" "$T/held" "$name" <<'EOF'
import os, re, sys
import numpy as np
import onnx
from onnx import numpy_helper
src, dst, name = sys.argv[1:]
key = lambda s: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]
dirs = sorted((d for d in os.listdir(src) if os.path.isfile(os.path.join(src, d, "input_0.pb"))),
              key=key)
xs = []
for d in dirs:
    t = onnx.TensorProto()
    t.ParseFromString(open(os.path.join(src, d, "input_0.pb"), "rb").read())
    xs.append(numpy_helper.to_array(t))
x = np.concatenate(xs)
os.makedirs(dst, exist_ok=True)
np.save(os.path.join(dst, "input.npy"), x)
open(os.path.join(dst, "input_0.pb"), "wb").write(numpy_helper.from_array(x, name).SerializeToString())
print(len(xs))
EOF
)
  run_all() { # OUTDIR MODEL [kiln run options]: logits of every held-out sample
    local out=$1 model=$2
    shift 2
    timeout "$TIMEOUT" "$KILN" run "$model" --input "$name=$T/held/input.npy" \
      --output-dir "$T/$out" --output-format npy "$@" >"$OUT" 2>"$ERR" ||
      fail "${m}_run_$out" "kiln run $*: $(head -n 1 "$ERR")"
  }
  local results=() method
  run_all fp32 "$D/model.onnx" --no-optimize
  results+=("fp32=$T/fp32/output_0.npy")
  for method in entropy minmax; do
    run_all "qdq_$method" "$T/$method.qdq.onnx" --no-optimize
    run_all "qdq_opt_$method" "$T/$method.qdq.onnx"
    results+=("kiln_qdq_$method=$T/qdq_$method/output_0.npy"
              "kiln_qdq_optimized_$method=$T/qdq_opt_$method/output_0.npy")
  done
  if [ "$have_ort" = 1 ]; then
    for method in fp32 entropy minmax; do
      local model=$T/$method.qdq.onnx
      [ "$method" = fp32 ] && model=$D/model.onnx
      if timeout "$TIMEOUT" node "$ORT_JS" "$model" --input-dir "$T/held" \
          --output-dir "$T/ort_$method" --quiet >"$OUT" 2>"$ERR"; then
        results+=("ort_$method=$T/ort_$method/output_0.pb")
      else
        fail "${m}_ort_$method" "ONNX Runtime failed"
      fi
    done
  else
    skip "${m}_ort" "no onnxruntime-node in $SRC/scripts/node_modules"
  fi
  # kiln's int8 engine, when this kiln builds one
  if "$KILN" build --help 2>/dev/null | grep -q -- '--precision.*int8'; then
    for method in entropy minmax; do
      if timeout "$TIMEOUT" "$KILN" build "$D/model.onnx" -o "$T/$method.int8.kiln" \
          --shape "$name=${n}x$dims" --precision int8 --calibration "$T/$method.calib" \
          >"$OUT" 2>"$ERR"; then
        timeout "$TIMEOUT" "$KILN" inspect "$T/$method.int8.kiln" >"$OUT" 2>"$ERR"
        if ! grep -Eq '^ +[0-9]+ .* int8 ' "$OUT"; then
          skip "${m}_int8_engine_$method" "kiln build --precision int8 made no int8 step"
          continue
        fi
        run_all "int8_$method" "$T/$method.int8.kiln"
        results+=("kiln_int8_engine_$method=$T/int8_$method/output_0.npy")
      else
        fail "${m}_int8_engine_$method" "kiln build --precision int8: $(head -n 1 "$ERR")"
      fi
    done
  else
    skip "${m}_int8_engine" "this kiln build has no --precision int8"
  fi
  if "$PY" - "$D/heldout/labels.txt" "${results[@]}" >"$OUT" 2>"$ERR" <<'EOF'; then
import sys
import numpy as np
import onnx
from onnx import numpy_helper
labels = np.array([int(v) for v in open(sys.argv[1]).read().split()])
logits = {}
for arg in sys.argv[2:]:
    name, path = arg.split("=", 1)
    if path.endswith(".pb"):
        t = onnx.TensorProto()
        t.ParseFromString(open(path, "rb").read())
        logits[name] = numpy_helper.to_array(t).astype(np.float64)
    else:
        logits[name] = np.load(path).astype(np.float64)
acc = {k: 100.0 * float((v.argmax(1) == labels).mean()) for k, v in logits.items()}
fail = []
print("held-out top-1 (%d samples): %s" % (len(labels),
      ", ".join("%s %.2f%%" % (k, a) for k, a in acc.items())))
for k, a in acc.items():
    if k not in ("fp32", "ort_fp32") and abs(a - acc["fp32"]) > 1.0 + 1e-9:
        fail.append("%s is %.2f points from fp32" % (k, a - acc["fp32"]))
for m in ("entropy", "minmax"):
    k = logits.get("kiln_qdq_" + m)
    print("fp32 vs kiln_qdq_%s (the quantization's own error): max abs logit difference %.3g"
          % (m, np.abs(logits["fp32"] - k).max()))
    for other in ("ort_" + m, "kiln_int8_engine_" + m, "kiln_qdq_optimized_" + m):
        if other not in logits:
            continue
        o = logits[other]
        agree = 100.0 * float((o.argmax(1) == k.argmax(1)).mean())
        d = np.abs(o - k).max()
        print("%s vs kiln_qdq_%s (reference path): top-1 agreement %.2f%%, max abs logit "
              "difference %.3g" % (other, m, agree, d))
        if agree < 99.0:
            fail.append("%s agrees with kiln on %.2f%% of predictions" % (other, agree))
    if "ort_" + m in logits and "kiln_int8_engine_" + m in logits:
        o, e = logits["ort_" + m], logits["kiln_int8_engine_" + m]
        agree = 100.0 * float((o.argmax(1) == e.argmax(1)).mean())
        print("ort_%s vs kiln_int8_engine_%s: top-1 agreement %.2f%%" % (m, m, agree))
        if agree < 99.0:
            fail.append("ORT's Q/DQ model and kiln's int8 engine (%s) agree on %.2f%%"
                        % (m, agree))
if fail:
    print("; ".join(fail))
    sys.exit(1)
EOF
    pass "${m}_accuracy"
    sed 's/^/    /' "$OUT"
  else
    fail "${m}_accuracy" "$(tail -n 1 "$OUT")"
    sed 's/^/    /' "$OUT"
  fi
}
if [ "$have_py" = 1 ]; then
  trained digits_cnn 4 # 3 Conv, the Gemm head
  trained seq_gru 1    # the Gemm head (the GRU stays fp32)
  trained seq_attn 7   # Q, K, V (one shared input), output and feed-forward MatMuls, the Gemm
else
  skip trained_models "$PY lacks onnx or numpy"
fi

# (e) ONNX Runtime's dynamic quantization (DynamicQuantizeLinear -> MatMulInteger
# -> Cast -> Mul per weighted MatMul, scripts/make_dynamic_quant.py) on bert_tiny:
# every MatMulInteger on the int8 GEMM (tactic qgemm_integer), the engine
# against kiln's reference path (cosine: a value on a rounding edge of a
# DynamicQuantizeLinear may take the next code after the fp32 parts' reordered
# sums), and against ONNX Runtime on the same file
dynamic() { # NAME SCRIPT_FLAGS...
  local name=$1 model="$TMP/$1.onnx" T="$CACHE/bert_tiny/test_data_set_0"
  shift
  if ! "$PY" "$SRC/scripts/make_dynamic_quant.py" "$CACHE/bert_tiny.onnx" "$model" "$@" \
      >"$OUT" 2>"$ERR"; then
    fail "${name}_make" "make_dynamic_quant.py failed"
    return
  fi
  expect "${name}_build" 0 "" build "$model" -o "$TMP/$name.kiln" --shape input_ids=1x128 \
    --shape attention_mask=1x128 --shape token_type_ids=1x128
  expect "${name}_inspect" 0 "" inspect "$TMP/$name.kiln" --json
  local n_fast
  # fused with their Cast and scale (integer_gemm pass), on the int8 GEMM
  n_fast=$(grep -o '"op": "MatMulIntegerToFloat", [^}]*"tactic": "qgemm_integer"' "$OUT" | wc -l)
  if [ "$n_fast" -eq 12 ]; then pass "${name}_tactic"
  else fail "${name}_tactic" "$n_fast of 12 MatMulIntegerToFloat steps on qgemm_integer"; fi
  kiln compare "$model" "$TMP/$name.kiln" --input "input_ids=$T/input_0.pb" \
    --input "attention_mask=$T/input_1.pb" --input "token_type_ids=$T/input_2.pb"
  local worst
  worst=$(grep -o 'cosine [0-9.]*' "$OUT" | tail -n 2 | awk '{print $2}' | sort -n | head -n 1)
  if [ "$rc" -le 1 ] && awk -v c="${worst:-0}" 'BEGIN { exit !(c >= 0.99999) }'; then
    pass "${name}_vs_reference (least cosine $worst)"
  else
    fail "${name}_vs_reference" "exit $rc, least cosine ${worst:-none}"
  fi
  if [ "$have_ort" != 1 ]; then
    skip "${name}_vs_ort" "no onnxruntime-node in scripts/node_modules"
    return
  fi
  rm -rf "$TMP/ort" "$TMP/kout"
  kiln run "$TMP/$name.kiln" --input-dir "$T" --output-dir "$TMP/kout"
  if [ "$rc" -ne 0 ] || ! timeout "$TIMEOUT" node "$ORT_JS" "$model" --input-dir "$T" \
      --output-dir "$TMP/ort" --quiet >"$OUT" 2>"$ERR"; then
    fail "${name}_vs_ort" "kiln run or ONNX Runtime failed"
    return
  fi
  if "$PY" - "$TMP/ort" "$TMP/kout" >"$OUT" 2>"$ERR" <<'PYEOF'; then
import sys
import numpy as np
import onnx
from onnx import numpy_helper
worst = 1.0
for i in range(2):
    a, b = (numpy_helper.to_array(onnx.load_tensor("%s/output_%d.pb" % (d, i))).ravel()
            .astype(np.float64) for d in sys.argv[1:3])
    worst = min(worst, float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
print("least cosine %.6f" % worst)
sys.exit(0 if worst >= 0.999 else 1)
PYEOF
    pass "${name}_vs_ort ($(cat "$OUT"))"
  else
    fail "${name}_vs_ort" "$(cat "$OUT")"
  fi
}
if [ "$have_py" = 1 ] && [ -f "$CACHE/bert_tiny.onnx" ] && [ -d "$CACHE/bert_tiny/test_data_set_0" ]
then
  dynamic dynamic_s8
  # the sanitized stage keeps one model (test_integer_gemm covers u8 weights and
  # their zero points there); KILN_LONG_TESTS=1 runs both
  if [ -z "${ASAN_OPTIONS:-}" ] || [ "${KILN_LONG_TESTS:-0}" = 1 ]; then
    dynamic dynamic_u8_per_channel --u8-weights --per-channel
  fi
else
  skip dynamic_quantization "needs $PY with onnx and bert_tiny in $CACHE"
fi

echo "quantize: $n_ok ok, $n_fail failed, $n_skip skipped"
[ "$n_fail" -eq 0 ]
