/*
 * Fused steps made by the optimizer (domain "kiln"; src/passes/fuse_act.c
 * builds them): a convolution or matrix product followed, in one pass over
 * each finished block of the output, by its epilogue
 *
 *   residual_before_activation = 1:  Y = act(P + bias + Z)
 *   residual_before_activation = 0:  Y = act(P + bias) + Z   (default)
 *
 * where P is the product, bias and the residual Z are optional, and act is
 * named by the string attribute `activation`:
 *
 *   ""           identity            Relu        max(x, 0)
 *   Clip         min(max(x, activation_min), activation_max)   (Relu6: 0, 6)
 *   LeakyRelu    x < 0 ? activation_alpha * x : x   (alpha default 0.01)
 *   HardSigmoid  max(0, min(1, activation_alpha * x + activation_beta))
 *                (defaults 0.2, 0.5)
 *   HardSwish    x * max(0, min(1, x / 6 + 0.5))
 *   Sigmoid      1 / (1 + exp(-x))       Silu   x * Sigmoid(x)
 *   Tanh         tanh(x)
 *   Gelu         x * 0.5 * (1 + erf(x / sqrt 2))
 *   GeluTanh     x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
 *
 * The element expressions are those of the standalone ops (unary.c), so a
 * fused step differs from the ops it replaces by float rounding at most.
 *
 * FusedConv   inputs X, W, B?, Z?, S?; Conv's attributes; P = Conv(X', W)
 *             (the reference driver of conv.c); B is [M], added per channel.
 *             S (optional, [N, C]: a squeeze-and-excite channel scale folded
 *             in by src/passes/fuse_se.c) scales the input channels as the
 *             conv reads them: X'[n, c, ...] = X[n, c, ...] * S[n, c]; X' = X
 *             without S.  (Today the run makes X' in a buffer of its own
 *             before the reference or fast conv; a fast kernel may instead
 *             scale while packing its input panels, or scale the weights'
 *             input-channel columns per image when group == 1.)
 * FusedGemm   inputs A, B, C?, Z?; attributes alpha, beta, transA, transB
 *             (as Gemm); P = alpha * op(A) op(B).  A is 2-D, or with transA
 *             = 0 of any rank >= 2 (a MatMul by a 2-D B: the leading dims of
 *             A are rows); the output is A's leading dims x N.  beta * C is
 *             added, C broadcasting to the output.  With norm =
 *             "LayerNormalization" the step ends with a LayerNormalization
 *             over the last axis (epsilon norm_epsilon) of the result after
 *             the epilogue, with scale and bias inputs 4 and 5 (N values
 *             each): src/passes/fuse_norm.c puts it there when the IO model
 *             says the rows stay in cache.  The fast path normalises each
 *             block of rows as soon as its last column is final.
 * Z broadcasts to the output (unidirectionally: the output shape is the
 * product's).  Only float32.  The fast runs (the convolution and GEMM
 * kernels with the epilogue fused) are src/tactics/conv/fused_conv.c and
 * src/tactics/gemm/fused_gemm.c.
 */
#include "op.h"

#include <float.h>
#include <math.h>

#include "conv_ref.h"
#include "fused.h"
#include "kernels/gemm/ref-gemm.h"

typedef enum act_kind {
  ACT_NONE,
  ACT_RELU,
  ACT_CLIP,
  ACT_LEAKYRELU,
  ACT_HARDSIGMOID,
  ACT_HARDSWISH,
  ACT_SIGMOID,
  ACT_SILU,
  ACT_TANH,
  ACT_GELU,
  ACT_GELU_TANH,
} act_kind;

static const char *const act_names[] = {
    [ACT_NONE] = "",           [ACT_RELU] = "Relu",
    [ACT_CLIP] = "Clip",       [ACT_LEAKYRELU] = "LeakyRelu",
    [ACT_HARDSIGMOID] = "HardSigmoid", [ACT_HARDSWISH] = "HardSwish",
    [ACT_SIGMOID] = "Sigmoid", [ACT_SILU] = "Silu",
    [ACT_TANH] = "Tanh",       [ACT_GELU] = "Gelu",
    [ACT_GELU_TANH] = "GeluTanh",
};

typedef struct epilogue {
  act_kind act;
  float alpha, beta, lo, hi;
  bool res_first; /* residual added before the activation */
  /* bias: FusedConv: one value per channel; FusedGemm: beta * C, read
   * through its broadcast strides bs. */
  const float *bias;
  const float *z;
  /* output shape and the broadcast strides of bias and z over it */
  int32_t rank;
  int64_t dims[KN_MAX_RANK];
  int64_t bs[KN_MAX_RANK], zs[KN_MAX_RANK];
  bool z_same; /* z has exactly the output's shape */
  int64_t conv_m, conv_ysize; /* FusedConv: channels and positions */
} epilogue;

/* name with prefix in front (into buf), or name itself without one */
static const char *prefixed(char *buf, size_t len, const char *prefix, const char *name) {
  if (!*prefix) return name;
  snprintf(buf, len, "%s%s", prefix, name);
  return buf;
}

/* The activation named by the attributes <prefix>activation,
 * <prefix>activation_alpha, ... (prefix "" for FusedConv's own;
 * NhwcExpandDwConv keeps its expansion's under "expand_"). */
static kn_status read_activation(kn_op_ctx *ctx, const char *prefix, epilogue *e) {
  char b[64];
  const char *a = kn_attr_str(ctx, prefixed(b, sizeof b, prefix, "activation"), "");
  e->act = ACT_NONE;
  bool found = false;
  for (size_t i = 0; i < sizeof act_names / sizeof act_names[0]; i++)
    if (!strcmp(a, act_names[i])) {
      e->act = (act_kind)i;
      found = true;
    }
  if (!found)
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                      "activation '%s' is not one of Relu, Clip, LeakyRelu, HardSigmoid, "
                      "HardSwish, Sigmoid, Silu, Tanh, Gelu, GeluTanh (or empty)",
                      a);
  float da = e->act == ACT_LEAKYRELU ? 0.01f : 0.2f;
  e->alpha = kn_attr_float(ctx, prefixed(b, sizeof b, prefix, "activation_alpha"), da);
  e->beta = kn_attr_float(ctx, prefixed(b, sizeof b, prefix, "activation_beta"), 0.5f);
  e->lo = kn_attr_float(ctx, prefixed(b, sizeof b, prefix, "activation_min"), -INFINITY);
  e->hi = kn_attr_float(ctx, prefixed(b, sizeof b, prefix, "activation_max"), INFINITY);
  e->res_first = kn_attr_int(ctx, "residual_before_activation", 0) != 0;
  return KN_OK;
}

kn_status kn_fused_conv_act(kn_op_ctx *ctx, const char *prefix, kn_act_params *act,
                            bool *res_first) {
  epilogue e;
  memset(&e, 0, sizeof e);
  kn_status st = read_activation(ctx, prefix, &e);
  if (st) return st;
  memset(act, 0, sizeof *act);
  act->act = (kn_act)kn_act_from_name(act_names[e.act]);
  act->alpha = e.alpha;
  act->beta = e.beta;
  act->lo = e.lo;
  act->hi = e.hi;
  *res_first = e.res_first;
  return KN_OK;
}

static inline float sigmoidf(float x) {
  return x >= 0 ? 1 / (1 + expf(-x)) : expf(x) / (1 + expf(x));
}

static inline float act_apply(const epilogue *e, float x) {
  switch (e->act) {
  case ACT_NONE: return x;
  case ACT_RELU: return x < 0 ? 0 : x;
  case ACT_CLIP: {
    float t = x < e->lo ? e->lo : x;
    return t > e->hi ? e->hi : t;
  }
  case ACT_LEAKYRELU: return x < 0 ? e->alpha * x : x;
  case ACT_HARDSIGMOID: return fmaxf(0.0f, fminf(1.0f, e->alpha * x + e->beta));
  case ACT_HARDSWISH: return x * fmaxf(0.0f, fminf(1.0f, x / 6 + 0.5f));
  case ACT_SIGMOID: return sigmoidf(x);
  case ACT_SILU: return x * sigmoidf(x);
  case ACT_TANH: return tanhf(x);
  case ACT_GELU: return x * 0.5f * (1.0f + erff(x * (float)M_SQRT1_2));
  case ACT_GELU_TANH: {
    float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x * 0.5f * (1.0f + tanhf(inner));
  }
  }
  return x;
}

/* Offset in a tensor with broadcast strides s of the output element at
 * flat index i. */
static int64_t bcast_offset(const epilogue *e, const int64_t *s, int64_t i) {
  int64_t off = 0;
  for (int32_t d = e->rank - 1; d >= 0; d--) {
    int64_t x = i % e->dims[d];
    i /= e->dims[d];
    off += x * s[d];
  }
  return off;
}

/* Residual and activation of one biased value v, in the node's order. */
static inline float finish(const epilogue *e, float v, float zv) {
  if (e->res_first) return act_apply(e, v + zv);
  return act_apply(e, v) + zv;
}

/* Epilogue over the n consecutive output elements from flat index base;
 * the bias of element i is brow[i * bstep] (brow NULL: no bias). */
static void epi_run(const epilogue *e, float *y, int64_t base, int64_t n,
                    const float *brow, int64_t bstep) {
  if (!e->z) {
    if (e->act == ACT_NONE) {
      if (brow)
        for (int64_t i = 0; i < n; i++) y[base + i] += brow[i * bstep];
      return;
    }
    for (int64_t i = 0; i < n; i++) {
      float v = y[base + i];
      if (brow) v += brow[i * bstep];
      y[base + i] = act_apply(e, v);
    }
    return;
  }
  if (e->z_same) {
    const float *z = e->z + base;
    for (int64_t i = 0; i < n; i++) {
      float v = y[base + i];
      if (brow) v += brow[i * bstep];
      y[base + i] = finish(e, v, z[i]);
    }
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    float v = y[base + i];
    if (brow) v += brow[i * bstep];
    y[base + i] = finish(e, v, e->z[bcast_offset(e, e->zs, base + i)]);
  }
}

/* z must broadcast to the output shape without enlarging it. */
static kn_status check_residual(kn_op_ctx *ctx, int32_t input, const kn_tensor *z,
                                int32_t rank, const int64_t *dims) {
  if (!z || z->rank < 0 || rank < 0) return KN_OK;
  bool ok = z->rank <= rank;
  for (int32_t i = 0; ok && i < z->rank; i++) {
    int64_t zd = z->dims[i], od = dims[rank - z->rank + i];
    ok = zd < 0 || od < 0 || zd == 1 || zd == od;
  }
  if (ok) return KN_OK;
  char sz[128], so[128];
  return kn_op_fail(ctx, KN_ERR_SHAPE,
                    "input %d of shape %s must broadcast to the output %s without "
                    "enlarging it",
                    (int)input, kn_shape_str(z->rank, z->dims, sz, sizeof sz),
                    kn_shape_str(rank, dims, so, sizeof so));
}

static const kn_dtype f32_only[] = {KN_DTYPE_F32, 0};

static kn_status check_f32(kn_op_ctx *ctx) {
  kn_status st;
  for (int32_t i = 0; i < ctx->n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    if (t && (st = kn_check_dtype(ctx, i, t, f32_only))) return st;
  }
  return KN_OK;
}

static void epi_shape(epilogue *e, const kn_tensor *y) {
  e->rank = y->rank;
  memcpy(e->dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
}

static void epi_set_z(epilogue *e, const kn_tensor *z) {
  e->z = NULL;
  if (!z || kn_tensor_numel(z) == 0) return;
  e->z = z->data;
  e->z_same = z->rank == e->rank &&
              !memcmp(z->dims, e->dims, sizeof(int64_t) * (size_t)e->rank);
  kn_broadcast_strides(z->rank, z->dims, e->rank, e->dims, e->zs);
}

/* ---- FusedConv ----------------------------------------------------------- */

static kn_status fconv_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *w, *b = kn_in(ctx, 2), *z = kn_in(ctx, 3);
  kn_status st;
  epilogue e;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &w)) ||
      (st = check_f32(ctx)) || (st = read_activation(ctx, "", &e)))
    return st;
  kn_conv_geom g;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  if ((st = kn_conv_geometry(ctx, x, w, false, &g, &r, d, &complete))) return st;
  if (b && b->rank >= 0 &&
      (b->rank != 1 || (r >= 2 && d[1] >= 0 && b->dims[0] >= 0 && b->dims[0] != d[1])))
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "bias (input 2) must be 1-D with one value per output channel "
                      "(%lld), got rank %d",
                      (long long)(r >= 2 ? d[1] : -1), (int)b->rank);
  if ((st = check_residual(ctx, 3, z, r, d))) return st;
  const kn_tensor *cs = kn_in(ctx, 4);
  if (cs && cs->rank >= 0 && x->rank >= 2 &&
      (cs->rank != 2 || (cs->dims[0] >= 0 && x->dims[0] >= 0 && cs->dims[0] != x->dims[0]) ||
       (cs->dims[1] >= 0 && x->dims[1] >= 0 && cs->dims[1] != x->dims[1])))
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "channel scale (input 4) must be [N, C] = [%lld, %lld] of the input",
                      (long long)x->dims[0], (long long)x->dims[1]);
  kn_out_set(ctx, 0, KN_DTYPE_F32, r, d);
  return KN_OK;
}

static void fconv_epilogue(void *arg, float *y, int64_t b, int64_t m0, int64_t mc,
                           int64_t p0, int64_t pc) {
  const epilogue *e = arg;
  for (int64_t m = m0; m < m0 + mc; m++) {
    int64_t base = (b * e->conv_m + m) * e->conv_ysize + p0;
    epi_run(e, y, base, pc, e->bias ? e->bias + m : NULL, 0);
  }
}

/* The epilogue and geometry of a FusedConv run on input x (X'); *empty
 * when the output has no elements. */
static kn_status fconv_setup(kn_op_ctx *ctx, const kn_tensor *x, epilogue *e, kn_conv_geom *g,
                             kn_tensor **yp, bool *empty) {
  const kn_tensor *w = kn_in(ctx, 1), *b = kn_in(ctx, 2), *z = kn_in(ctx, 3);
  *empty = false;
  memset(e, 0, sizeof *e);
  kn_status st = read_activation(ctx, "", e);
  if (st) return st;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  if ((st = kn_conv_geometry(ctx, x, w, false, g, &r, d, &complete))) return st;
  kn_tensor *y = kn_out(ctx, 0);
  *yp = y;
  if (kn_tensor_numel(y) == 0) {
    *empty = true;
    return KN_OK;
  }
  epi_shape(e, y);
  e->bias = b && kn_tensor_numel(b) > 0 ? b->data : NULL;
  epi_set_z(e, z);
  e->conv_m = g->m;
  e->conv_ysize = g->y_size;
  return KN_OK;
}

kn_status kn_fused_conv_begin(kn_op_ctx *ctx, const kn_tensor *x, kn_fused_conv_plan *p,
                              bool *empty) {
  epilogue e;
  memset(p, 0, sizeof *p);
  kn_status st = fconv_setup(ctx, x, &e, &p->g, &p->y, empty);
  if (st || *empty) return st;
  p->bias = e.bias;
  p->z = e.z;
  p->z_same = e.z_same;
  p->res_first = e.res_first;
  p->act.act = (kn_act)kn_act_from_name(act_names[e.act]);
  p->act.alpha = e.alpha;
  p->act.beta = e.beta;
  p->act.lo = e.lo;
  p->act.hi = e.hi;
  return KN_OK;
}

static kn_status fconv_run_x(kn_op_ctx *ctx, const kn_tensor *x) {
  const kn_tensor *w = kn_in(ctx, 1);
  epilogue e;
  kn_conv_geom g;
  kn_tensor *y;
  bool empty;
  kn_status st = fconv_setup(ctx, x, &e, &g, &y, &empty);
  if (st || empty) return st;
  bool any = e.bias || e.z || e.act != ACT_NONE;
  if (!kn_conv_forward_f32(&g, x->data, w->data, y->data, any ? fconv_epilogue : NULL,
                           &e))
    return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for convolution scratch");
  return KN_OK;
}

kn_status kn_fused_conv_input(kn_op_ctx *ctx, const kn_tensor **xp, kn_tensor *scaled) {
  const kn_tensor *x = kn_in(ctx, 0), *cs = kn_in(ctx, 4);
  scaled->data = NULL;
  *xp = x;
  if (!cs || kn_tensor_numel(cs) == 0 || kn_tensor_numel(x) == 0) return KN_OK;
  if (x->rank < 2 || cs->rank != 2 || cs->dims[0] != x->dims[0] || cs->dims[1] != x->dims[1])
    return kn_op_fail(ctx, KN_ERR_SHAPE, "channel scale (input 4) must be [N, C] of the input");
  int64_t nc = x->dims[0] * x->dims[1], per = kn_tensor_numel(x) / nc;
  kn_tensor xs = *x;
  xs.data = kn_malloc((size_t)kn_tensor_numel(x) * sizeof(float));
  if (!xs.data) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for the scaled input");
  const float *xd = x->data, *sd = cs->data;
  float *od = xs.data;
  for (int64_t i = 0; i < nc; i++)
    for (int64_t p = 0; p < per; p++) od[i * per + p] = xd[i * per + p] * sd[i];
  *scaled = xs;
  *xp = scaled;
  return KN_OK;
}

/* With the channel scale S (input 4): the conv of X' = X * S[n, c], made in
 * a buffer of its own (fuse_se.c's fold; see the header comment). */
static kn_status fconv_run(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_tensor scaled;
  kn_status st = kn_fused_conv_input(ctx, &x, &scaled);
  if (st) return st;
  st = fconv_run_x(ctx, x);
  free(scaled.data);
  return st;
}

static double epi_flops(const kn_op_ctx *ctx) {
  const kn_tensor *y = ctx->n_out > 0 ? &ctx->out[0]->t : NULL;
  if (!y || y->rank < 0) return 0;
  double n = 1;
  for (int32_t i = 0; i < y->rank; i++) n *= y->dims[i] < 0 ? 1 : (double)y->dims[i];
  return n * 2;
}

static double fconv_flops(const kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *w = kn_in(ctx, 1);
  const kn_tensor *y = ctx->n_out > 0 ? &ctx->out[0]->t : NULL;
  if (!x || !w || !y || w->rank < 3 || y->rank < 0) return 0;
  double per = 1, cnt = 1;
  for (int32_t i = 1; i < w->rank; i++) per *= w->dims[i] < 0 ? 1 : (double)w->dims[i];
  for (int32_t i = 0; i < y->rank; i++) cnt *= y->dims[i] < 0 ? 1 : (double)y->dims[i];
  return 2.0 * cnt * per + epi_flops(ctx);
}

/* ---- FusedGemm ----------------------------------------------------------- */

typedef struct gemm_dims {
  int64_t rows, n, k;
  int32_t rank;
  int64_t dims[KN_MAX_RANK];
} gemm_dims;

static kn_status fgemm_dims(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b,
                            gemm_dims *gd) {
  bool ta = kn_attr_int(ctx, "transA", 0) != 0;
  bool tb = kn_attr_int(ctx, "transB", 0) != 0;
  gd->rank = -1;
  gd->rows = gd->n = gd->k = -1;
  if (a->rank >= 0 && (a->rank < 2 || (ta && a->rank != 2)))
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "input A must be 2-D (or of rank >= 2 without transA), got rank %d",
                      (int)a->rank);
  if (b->rank >= 0 && b->rank != 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input B must be 2-D, got rank %d", (int)b->rank);
  int64_t ka = -1, kb = -1;
  if (b->rank == 2) {
    gd->n = b->dims[tb ? 0 : 1];
    kb = b->dims[tb ? 1 : 0];
  }
  if (a->rank >= 2) {
    ka = a->dims[ta ? 0 : a->rank - 1];
    gd->rank = a->rank;
    if (ta) {
      gd->dims[0] = a->dims[1];
    } else {
      for (int32_t i = 0; i + 1 < a->rank; i++) gd->dims[i] = a->dims[i];
    }
    gd->dims[gd->rank - 1] = gd->n;
    gd->rows = 1;
    for (int32_t i = 0; i + 1 < gd->rank; i++)
      gd->rows = gd->dims[i] < 0 || gd->rows < 0 ? -1 : gd->rows * gd->dims[i];
  }
  if (ka >= 0 && kb >= 0 && ka != kb)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "op(A) has %lld columns but op(B) has %lld rows (transA=%d, transB=%d)",
                      (long long)ka, (long long)kb, ta, tb);
  gd->k = ka >= 0 ? ka : kb;
  return KN_OK;
}

/* The row normalisation after the epilogue: none, or LayerNormalization
 * over the last axis with scale and bias inputs 4 and 5 of n values. */
static bool has_norm(kn_op_ctx *ctx) { return *kn_attr_str(ctx, "norm", "") != 0; }

static kn_status check_norm(kn_op_ctx *ctx, int64_t n) {
  const char *norm = kn_attr_str(ctx, "norm", "");
  if (!*norm) {
    if (kn_in(ctx, 4) || kn_in(ctx, 5))
      return kn_op_fail(ctx, KN_ERR_SHAPE, "inputs 4 and 5 (norm scale, bias) need a norm");
    return KN_OK;
  }
  if (strcmp(norm, "LayerNormalization"))
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                      "norm '%s' is not LayerNormalization (or empty)", norm);
  float eps = kn_attr_float(ctx, "norm_epsilon", 1e-5f);
  if (!(eps >= 0) || !isfinite(eps))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "norm_epsilon %g must be finite and >= 0", eps);
  for (int32_t i = 4; i <= 5; i++) {
    const kn_tensor *t;
    kn_status st = kn_in_req(ctx, i, &t);
    if (st) return st;
    if (t->dtype != KN_DTYPE_F32)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d (norm %s) is %s, expected float32", (int)i,
                        i == 4 ? "scale" : "bias", kn_dtype_name(t->dtype));
    if (n >= 0 && kn_shape_known(t) && kn_tensor_numel(t) != n)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "input %d (norm %s) has %lld elements, expected %lld (the columns)",
                        (int)i, i == 4 ? "scale" : "bias", (long long)kn_tensor_numel(t),
                        (long long)n);
  }
  return KN_OK;
}

static kn_status fgemm_infer(kn_op_ctx *ctx) {
  const kn_tensor *a, *b, *c = kn_in(ctx, 2), *z = kn_in(ctx, 3);
  kn_status st;
  epilogue e;
  if ((st = kn_in_req(ctx, 0, &a)) || (st = kn_in_req(ctx, 1, &b)) ||
      (st = check_f32(ctx)) || (st = read_activation(ctx, "", &e)))
    return st;
  gemm_dims gd;
  if ((st = fgemm_dims(ctx, a, b, &gd)) ||
      (st = check_residual(ctx, 2, c, gd.rank, gd.dims)) ||
      (st = check_residual(ctx, 3, z, gd.rank, gd.dims)) || (st = check_norm(ctx, gd.n)))
    return st;
  kn_out_set(ctx, 0, KN_DTYPE_F32, gd.rank, gd.rank >= 0 ? gd.dims : NULL);
  return KN_OK;
}

/* Rows of the output finished per block: the epilogue then runs on about
 * 64 KiB of output still in cache, but at least 64 rows, so that packing B
 * again for each block stays a small part of the work. */
static int64_t gemm_block_rows(int64_t n) {
  int64_t r = ((int64_t)16 << 10) / (n > 0 ? n : 1);
  return r < 64 ? 64 : r;
}

/* The activation kinds above are kernels.h's kn_act, in the same order. */
_Static_assert((int)ACT_GELU_TANH == (int)KN_ACT_GELU_TANH && (int)ACT_CLIP == (int)KN_ACT_CLIP,
               "act_kind and kn_act must list the activations in one order");

/* The epilogue after the product, as the reference applies it. */
static kn_status fgemm_general_epilogue(kn_op_ctx *ctx, const kn_tensor *c, float beta,
                                        epilogue *e, int64_t rows, int64_t n, kn_tensor *y) {
  const float *cd = c && beta != 0.0f && kn_tensor_numel(c) > 0 ? c->data : NULL;
  int64_t cn = cd ? kn_tensor_numel(c) : 0;
  float *cs = NULL;
  if (cd) {
    kn_broadcast_strides(c->rank, c->dims, e->rank, e->dims, e->bs);
    cs = kn_malloc((size_t)cn * sizeof(float));
    if (!cs) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for the scaled bias");
    for (int64_t i = 0; i < cn; i++) cs[i] = beta * cd[i];
    e->bias = cs;
  }
  for (int64_t r = 0; r < rows; r++) {
    const float *brow = cs ? cs + bcast_offset(e, e->bs, r * n) : NULL;
    epi_run(e, y->data, r * n, n, brow, cs ? e->bs[e->rank - 1] : 0);
  }
  free(cs);
  return KN_OK;
}

static kn_status fgemm_run(kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1), *c = kn_in(ctx, 2),
                  *z = kn_in(ctx, 3);
  bool ta = kn_attr_int(ctx, "transA", 0) != 0;
  bool tb = kn_attr_int(ctx, "transB", 0) != 0;
  float alpha = kn_attr_float(ctx, "alpha", 1.0f);
  float beta = kn_attr_float(ctx, "beta", 1.0f);
  epilogue e;
  memset(&e, 0, sizeof e);
  kn_status st = read_activation(ctx, "", &e);
  if (st) return st;
  gemm_dims gd;
  if ((st = fgemm_dims(ctx, a, b, &gd))) return st;
  kn_tensor *y = kn_out(ctx, 0);
  if (kn_tensor_numel(y) == 0) return KN_OK;
  epi_shape(&e, y);
  if (c && beta != 0.0f && kn_tensor_numel(c) > 0) {
    e.bias = c->data;
    kn_broadcast_strides(c->rank, c->dims, e.rank, e.dims, e.bs);
  }
  epi_set_z(&e, z);
  int64_t lda = a->dims[a->rank - 1], ldb = b->dims[1], n = gd.n;
  int64_t rb = gemm_block_rows(n);
  /* beta * C scaled once when beta != 1: the epilogue adds plain values. */
  float *cs = NULL;
  if (e.bias && beta != 1.0f) {
    int64_t nc = kn_tensor_numel(c);
    cs = kn_malloc((size_t)nc * sizeof(float));
    if (!cs) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for the scaled bias");
    for (int64_t i = 0; i < nc; i++) cs[i] = beta * ((const float *)c->data)[i];
    e.bias = cs;
  }
  float *yd = y->data;
  const float *ad = a->data;
  for (int64_t r0 = 0; r0 < gd.rows; r0 += rb) {
    int64_t cnt = gd.rows - r0 < rb ? gd.rows - r0 : rb;
    const float *ablk = ta ? ad + r0 : ad + r0 * lda;
    if (!kn_f32_gemm(cnt, n, gd.k, alpha, ablk, lda, ta, b->data, ldb, tb,
                     yd + r0 * n, n)) {
      free(cs);
      return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for matrix product scratch");
    }
    for (int64_t r = r0; r < r0 + cnt; r++) {
      const float *brow = NULL;
      int64_t bstep = 0;
      if (e.bias) {
        brow = e.bias + bcast_offset(&e, e.bs, r * n);
        bstep = e.bs[e.rank - 1];
      }
      epi_run(&e, yd, r * n, n, brow, bstep);
    }
    if (has_norm(ctx))
      kn_ref_layernorm_rows(yd + r0 * n, yd + r0 * n, cnt, n,
                            kn_attr_float(ctx, "norm_epsilon", 1e-5f), kn_in(ctx, 4)->data,
                            kn_in(ctx, 5)->data);
  }
  free(cs);
  return KN_OK;
}

kn_status kn_fused_gemm_begin(kn_op_ctx *ctx, kn_fused_gemm_plan *p, bool *empty) {
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1), *z = kn_in(ctx, 3);
  memset(p, 0, sizeof *p);
  *empty = false;
  p->ta = kn_attr_int(ctx, "transA", 0) != 0;
  p->tb = kn_attr_int(ctx, "transB", 0) != 0;
  p->alpha = kn_attr_float(ctx, "alpha", 1.0f);
  p->beta = kn_attr_float(ctx, "beta", 1.0f);
  epilogue e;
  memset(&e, 0, sizeof e);
  kn_status st = read_activation(ctx, "", &e);
  if (st) return st;
  gemm_dims gd;
  if ((st = fgemm_dims(ctx, a, b, &gd))) return st;
  p->y = kn_out(ctx, 0);
  if (kn_tensor_numel(p->y) == 0) {
    *empty = true;
    return KN_OK;
  }
  epi_shape(&e, p->y);
  epi_set_z(&e, z);
  p->rows = gd.rows;
  p->n = gd.n;
  p->k = gd.k;
  p->rank = e.rank;
  memcpy(p->dims, e.dims, sizeof p->dims);
  p->act = (kn_act_params){.act = (kn_act)e.act, .alpha = e.alpha, .beta = e.beta, .lo = e.lo,
                           .hi = e.hi};
  p->res_first = e.res_first;
  p->z = e.z;
  p->z_same = e.z_same;
  return KN_OK;
}

kn_status kn_fused_gemm_epilogue(kn_op_ctx *ctx, const kn_fused_gemm_plan *p) {
  epilogue e;
  memset(&e, 0, sizeof e);
  kn_status st = read_activation(ctx, "", &e);
  if (st) return st;
  epi_shape(&e, p->y);
  epi_set_z(&e, kn_in(ctx, 3));
  return fgemm_general_epilogue(ctx, kn_in(ctx, 2), p->beta, &e, p->rows, p->n, p->y);
}

static double fgemm_flops(const kn_op_ctx *ctx) {
  const kn_tensor *a = kn_in(ctx, 0);
  const kn_tensor *y = ctx->n_out > 0 ? &ctx->out[0]->t : NULL;
  if (!a || !y || a->rank < 2 || y->rank < 0) return 0;
  bool ta = kn_attr_int(ctx, "transA", 0) != 0;
  int64_t k = a->dims[ta ? 0 : a->rank - 1];
  double cnt = 1;
  for (int32_t i = 0; i < y->rank; i++) cnt *= y->dims[i] < 0 ? 1 : (double)y->dims[i];
  /* a LayerNormalization: sum, squares, scale and shift, about 8 a value */
  double norm = *kn_attr_str(ctx, "norm", "") ? 8.0 * cnt : 0;
  return 2.0 * cnt * (k < 0 ? 1 : (double)k) + epi_flops(ctx) + norm;
}

const kn_op_def kn_ops_fused[] = {
    {"FusedConv", KN_DOMAIN, 2, 5, 1, 1, 1, 1, fconv_infer, fconv_run, fconv_flops},
    {"FusedGemm", KN_DOMAIN, 2, 6, 1, 1, 1, 1, fgemm_infer, fgemm_run, fgemm_flops},
    KN_OP_END,
};
