/*
 * qdq: the Q/DQ ("fake quantization") form of an int8 model, as ONNX
 * Runtime's quantization tool, PyTorch's exporter, TensorRT's toolkit and
 * `kiln quantize` write it, becomes annotations on the ops that can run it
 * in int8:
 *
 *   x -> QuantizeLinear(s, z) -> DequantizeLinear(s, z) -> Conv / Gemm / MatMul
 *   Wq -> DequantizeLinear(sw[, 0], axis) ------------------^ (the weight)
 *
 * The op reads x itself and gets the attributes kiln.a_scale = s,
 * kiln.a_zero = z (a u8 zero point; an s8 one plus 128, which gives the
 * same codes: clamp(round(x/s) + z, -128, 127) + 128 = clamp(round(x/s) +
 * z + 128, 0, 255)) and kiln.qdq = 1; the precision step of the builder
 * (src/builder/step_precision.c) then runs it in int8 with exactly that input
 * quantization, never re-calibrated.  The weight's per-channel scales go to
 * kiln.w_scale when they are per output channel (Conv axis 0, MatMul B
 * axis 1, Gemm B by transB) or per tensor, with zero points 0: the int8
 * step then quantizes the dequantized weights back to the very same codes.
 * Constant folding turns DequantizeLinear(Wq) into the float weight after
 * this pass, and dce drops a Q/DQ pair nothing reads any more.
 *
 * Results: where the step runs in int8 they equal the Q/DQ graph's up to
 * the fp32 summation order (the step rounds its input exactly as the pair
 * did); where it cannot (a reference-kernel build does not run passes; a
 * layer override to fp32; an op without int8 kernels) it reads the
 * unrounded x: the pair's rounding error is gone, as when ONNX Runtime
 * runs such a node in fp32.  Pairs on the inputs of other ops stay and run
 * as QuantizeLinear and DequantizeLinear.
 */
#include "pattern.h"

#include <math.h>

/* A per-tensor scale (positive, finite) and zero point of a Q or DQ
 * node's inputs 1 and 2; *zero_u8 the u8 code of the zero point. */
static bool per_tensor_params(const kn_graph *g, const kn_node *n, float *scale,
                              int32_t *zero_u8, kn_dtype *qtype) {
  if (n->n_inputs < 2 || n->inputs[1] < 0) return false;
  kn_tensor s;
  if (!kn_pat_const(g, n->inputs[1], &s) || s.dtype != KN_DTYPE_F32 ||
      kn_tensor_numel(&s) != 1)
    return false;
  float sv = *(const float *)s.data;
  if (!(sv > 0.0f) || !isfinite(sv)) return false;
  int32_t z = 0;
  kn_dtype t = KN_DTYPE_U8;
  if (n->n_inputs > 2 && n->inputs[2] >= 0) {
    kn_tensor zt;
    if (!kn_pat_const(g, n->inputs[2], &zt) || kn_tensor_numel(&zt) != 1) return false;
    t = zt.dtype;
    if (t == KN_DTYPE_U8) z = *(const uint8_t *)zt.data;
    else if (t == KN_DTYPE_I8) z = *(const int8_t *)zt.data + 128;
    else return false;
  } else if (kn_node_attr(n, "output_dtype")) {
    return false; /* opset 21's other types */
  }
  *scale = sv;
  *zero_u8 = z;
  *qtype = t;
  return true;
}

/* The output-channel axis of input 1 of node n, and the channel count. */
static bool weight_axis(const kn_graph *g, const kn_node *n, int32_t *axis, int64_t *channels) {
  int32_t w = n->inputs[1];
  const kn_type *t = &g->values[w].type;
  if (t->kind != KN_KIND_TENSOR || t->rank < 2) return false;
  if (kn_pat_is(n, "Conv")) {
    *axis = 0;
  } else if (kn_pat_is(n, "MatMul")) {
    if (t->rank != 2) return false;
    *axis = 1;
  } else {
    const kn_attr *tb = kn_node_attr(n, "transB");
    if (t->rank != 2) return false;
    *axis = tb && tb->i ? 0 : 1;
  }
  *channels = t->dims[*axis];
  return *channels > 0;
}

/* The weight of node n when it is DequantizeLinear(Wq int8 constant,
 * scale[, zero 0]) per tensor or per output channel: n gets the float
 * weight Wq * scale as a constant of its own (constant folding leaves
 * DequantizeLinear alone; the int8 step packs its weights from a float
 * constant) and the scales per channel as kiln.w_scale.  False when the
 * weight is not of that form (then it is left as it is); *oom on OOM. */
static bool take_weight(kn_graph *g, int32_t i, bool *oom) {
  *oom = false;
  kn_node *n = &g->nodes[i];
  int32_t dqi = kn_pat_producer(g, n->inputs[1], "DequantizeLinear");
  if (dqi < 0) return false;
  const kn_node *dq = &g->nodes[dqi];
  kn_tensor wq, s;
  if (dq->n_inputs < 2 || !kn_pat_const(g, dq->inputs[0], &wq) || wq.dtype != KN_DTYPE_I8 ||
      !kn_pat_const(g, dq->inputs[1], &s) || s.dtype != KN_DTYPE_F32 || wq.rank < 1)
    return false;
  if (dq->n_inputs > 2 && dq->inputs[2] >= 0) {
    kn_tensor z;
    if (!kn_pat_const(g, dq->inputs[2], &z) || z.dtype != KN_DTYPE_I8) return false;
    for (int64_t k = 0; k < kn_tensor_numel(&z); k++)
      if (((const int8_t *)z.data)[k] != 0) return false; /* asymmetric weights */
  }
  int32_t axis;
  int64_t ch;
  if (!weight_axis(g, n, &axis, &ch) || wq.rank != g->values[n->inputs[1]].type.rank ||
      wq.dims[axis] != ch)
    return false;
  int64_t ns = kn_tensor_numel(&s);
  const kn_attr *ax = kn_node_attr(dq, "axis");
  int64_t dq_axis = ax ? ax->i : 1;
  if (dq_axis < 0) dq_axis += wq.rank;
  if (ns != 1 && (ns != ch || dq_axis != axis || s.rank > 1)) return false;
  const float *sv = s.data;
  for (int64_t c = 0; c < ns; c++)
    if (!(sv[c] > 0.0f) || !isfinite(sv[c])) return false;
  /* the float weight: Wq * scale of its channel */
  kn_tensor w;
  memset(&w, 0, sizeof w);
  if (kn_tensor_alloc(&w, KN_DTYPE_F32, wq.rank, wq.dims, NULL)) {
    *oom = true;
    return false;
  }
  int64_t inner = 1;
  for (int32_t d = axis + 1; d < wq.rank; d++) inner *= wq.dims[d];
  const int8_t *q = wq.data;
  float *wd = w.data;
  for (int64_t k = 0; k < kn_tensor_numel(&wq); k++)
    wd[k] = (float)q[k] * sv[ns == 1 ? 0 : (k / inner) % ch];
  float *per = kn_malloc((size_t)ch * sizeof(float));
  if (!per) {
    kn_tensor_release(&w);
    *oom = true;
    return false;
  }
  for (int64_t c = 0; c < ch; c++) per[c] = sv[ns == 1 ? 0 : c];
  char *name = kn_graph_unique_name(g, g->values[n->inputs[1]].name);
  int32_t v = name ? kn_graph_add_constant(g, name, &w) : -1;
  free(name);
  n = &g->nodes[i];
  bool ok = v >= 0 && kn_node_set_weight_scales(n, per, (int32_t)ch);
  free(per);
  if (!ok) {
    kn_tensor_release(&w);
    *oom = true;
    return false;
  }
  n->inputs[1] = v;
  return true;
}

kn_status kn_pass_qdq(kn_pass_ctx *ctx, kn_graph *g, bool *changed) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead || n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0) continue;
    if (!kn_pat_is(n, "Conv") && !kn_pat_is(n, "Gemm") && !kn_pat_is(n, "MatMul")) continue;
    if (n->quant.from_qdq) continue;
    int32_t dqi = kn_pat_producer(g, n->inputs[0], "DequantizeLinear");
    if (dqi < 0) continue;
    const kn_node *dq = &g->nodes[dqi];
    int32_t qi = dq->n_inputs > 0 ? kn_pat_producer(g, dq->inputs[0], "QuantizeLinear") : -1;
    if (qi < 0) continue;
    const kn_node *q = &g->nodes[qi];
    float s1, s2;
    int32_t z1, z2;
    kn_dtype t1, t2;
    if (!per_tensor_params(g, q, &s1, &z1, &t1) || !per_tensor_params(g, dq, &s2, &z2, &t2) ||
        s1 != s2 || z1 != z2 || t1 != t2 || q->n_inputs < 1 || q->inputs[0] < 0 ||
        kn_pat_dtype(g, q->inputs[0]) != KN_DTYPE_F32)
      continue;
    /* the weight must be a constant, or a dequantized one: the int8 steps
     * pack it */
    bool oom;
    if (!take_weight(g, i, &oom) && g->values[n->inputs[1]].constant == NULL) {
      if (oom) return kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
      continue;
    }
    if (oom) return kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
    n = &g->nodes[i];
    q = &g->nodes[qi];
    /* a scale that is not positive and finite leaves the step without an
     * input quantization: the builder then calibrates it (or its run uses
     * scale 1, zero 0) */
    n->quant.from_qdq = true;
    if (!kn_node_set_input_quant(n, s1, (int32_t)z1)) n->quant.has_input = false;
    n->inputs[0] = g->nodes[qi].inputs[0];
    *changed = true;
    if (ctx->decisions) {
      char line[512];
      snprintf(line, sizeof line,
               "%s: Q/DQ input quantization (scale %.6g, zero %d%s) taken as int8, the "
               "QuantizeLinear/DequantizeLinear pair bypassed",
               n->name, (double)s1, z1, t1 == KN_DTYPE_I8 ? ", from s8" : "");
      if (!kn_lines_add(ctx->decisions, line))
        return kn_fail(ctx->err, KN_ERR_OOM, "out of memory");
    }
  }
  return KN_OK;
}
