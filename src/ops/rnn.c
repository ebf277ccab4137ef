/*
 * Recurrent layers: RNN, GRU, LSTM (opsets 1..14+).
 *
 * Inputs (default layout 0, layout 1 swaps the seq and batch axes of X,
 * initial_h/c, Y, Y_h and Y_c):
 *   X [seq, batch, input]   W [dirs, G*H, input]   R [dirs, G*H, H]
 *   B [dirs, 2*G*H]         sequence_lens [batch] (int32)
 *   initial_h / initial_c [dirs, batch, H]        P [dirs, 3*H] (LSTM)
 * with G = 1 (RNN), 3 (GRU: z r h), 4 (LSTM: i o f c).
 * Outputs Y [seq, dirs, batch, H], Y_h and Y_c [dirs, batch, H].
 *
 * Every float dtype is computed in float32: inputs are converted once into
 * float buffers in layout 0, X*W^T (+ both biases) is one matrix product over
 * all time steps, and each step adds H_{t-1}*R^T per batch row.  Batch rows
 * with a shorter sequence_lens stop early: their Y rows past the end stay 0
 * and Y_h/Y_c hold the last valid step (a reverse pass starts at len-1).
 * The layers on the packed GEMM (tactic rnn_gemm) are src/tactics/rnn_tactics.c.
 */
#include "rnn.h"

#include <math.h>

typedef kn_rnn_act_kind act_kind;

/* Name, whether it reads alpha / beta from the attribute lists, defaults. */
static const struct {
  const char *name;
  bool uses_alpha, uses_beta;
  float alpha, beta;
} act_table[] = {
    [KN_RNN_ACT_RELU] = {"Relu", false, false, 0, 0},
    [KN_RNN_ACT_TANH] = {"Tanh", false, false, 0, 0},
    [KN_RNN_ACT_SIGMOID] = {"Sigmoid", false, false, 0, 0},
    [KN_RNN_ACT_AFFINE] = {"Affine", true, true, 1.0f, 0.0f},
    [KN_RNN_ACT_LEAKYRELU] = {"LeakyRelu", true, false, 0.01f, 0},
    [KN_RNN_ACT_THRESHOLDEDRELU] = {"ThresholdedRelu", true, false, 1.0f, 0},
    [KN_RNN_ACT_SCALEDTANH] = {"ScaledTanh", true, true, 1.0f, 1.0f},
    [KN_RNN_ACT_HARDSIGMOID] = {"HardSigmoid", true, true, 0.2f, 0.5f},
    [KN_RNN_ACT_ELU] = {"Elu", true, false, 1.0f, 0},
    [KN_RNN_ACT_SOFTSIGN] = {"Softsign", false, false, 0, 0},
    [KN_RNN_ACT_SOFTPLUS] = {"Softplus", false, false, 0, 0},
};
#define N_ACTS ((int)(sizeof act_table / sizeof act_table[0]))

typedef kn_rnn_act rnn_act;
typedef kn_rnn_params rnn_params;

static bool name_eq_nocase(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    char x = *a, y = *b;
    if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
    if (x != y) return false;
  }
  return *a == *b;
}

kn_status kn_rnn_parse(kn_op_ctx *ctx, int kind, rnn_params *p) {
  memset(p, 0, sizeof *p);
  p->kind = kind;
  p->gates = kind == KN_RNN_OP_RNN ? 1 : kind == KN_RNN_OP_GRU ? 3 : 4;
  p->n_acts = kind == KN_RNN_OP_RNN ? 1 : kind == KN_RNN_OP_GRU ? 2 : 3;

  const char *dir = kn_attr_str(ctx, "direction", "forward");
  if (!strcmp(dir, "forward")) {
    p->dirs = 1;
  } else if (!strcmp(dir, "reverse")) {
    p->dirs = 1;
    p->reverse = true;
  } else if (!strcmp(dir, "bidirectional")) {
    p->dirs = 2;
  } else {
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "direction '%s' is not one of forward, reverse, "
                      "bidirectional", dir);
  }

  p->hidden = -1;
  if (kn_attr_get(ctx, "hidden_size")) {
    p->hidden = kn_attr_int(ctx, "hidden_size", 0);
    if (p->hidden <= 0 || p->hidden > ((int64_t)1 << 30))
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "hidden_size %lld must be positive",
                        (long long)p->hidden);
  }
  int64_t layout = ctx->opset >= 14 ? kn_attr_int(ctx, "layout", 0) : 0;
  if (layout != 0 && layout != 1)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "layout %lld must be 0 or 1",
                      (long long)layout);
  p->layout = (int)layout;
  p->clip = 0;
  if (kn_attr_get(ctx, "clip")) {
    p->clip = kn_attr_float(ctx, "clip", 0);
    if (!(p->clip > 0))
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "clip %g must be positive",
                        (double)p->clip);
  }
  p->input_forget = kind == KN_RNN_OP_LSTM && kn_attr_int(ctx, "input_forget", 0);
  p->linear_before_reset =
      kind == KN_RNN_OP_GRU && kn_attr_int(ctx, "linear_before_reset", 0);

  /* Default activations per op, for each direction. */
  static const act_kind dflt[3][3] = {
      [KN_RNN_OP_RNN] = {KN_RNN_ACT_TANH},
      [KN_RNN_OP_GRU] = {KN_RNN_ACT_SIGMOID, KN_RNN_ACT_TANH},
      [KN_RNN_OP_LSTM] = {KN_RNN_ACT_SIGMOID, KN_RNN_ACT_TANH, KN_RNN_ACT_TANH},
  };
  const kn_attr *acts = kn_attr_get(ctx, "activations");
  const float *alphas = NULL, *betas = NULL;
  int32_t n_alpha = kn_attr_floats(ctx, "activation_alpha", &alphas);
  int32_t n_beta = kn_attr_floats(ctx, "activation_beta", &betas);
  int32_t ia = 0, ib = 0;
  int total = p->dirs * p->n_acts;
  int32_t n_names = 0;
  if (acts) {
    if (acts->type != KN_ATTR_STRINGS && acts->type != KN_ATTR_STRING)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "attribute 'activations' must be a list of strings");
    n_names = acts->type == KN_ATTR_STRING ? 1 : acts->n;
    /* A list for one direction is reused for the other one. */
    if (n_names != total && n_names != p->n_acts)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "'activations' has %d names, expected %d (%d per "
                        "direction)", (int)n_names, total, p->n_acts);
  }
  for (int i = 0; i < total; i++) {
    int d = i / p->n_acts, k = i % p->n_acts;
    rnn_act *a = &p->act[d][k];
    if (!acts) {
      a->kind = dflt[kind][k];
      a->alpha = act_table[a->kind].alpha;
      a->beta = act_table[a->kind].beta;
      continue;
    }
    if (n_names != total && d > 0) {
      *a = p->act[0][k];
      continue;
    }
    const char *nm = acts->type == KN_ATTR_STRING ? acts->s : acts->strings[i];
    int found = -1;
    for (int j = 0; j < N_ACTS && nm; j++)
      if (name_eq_nocase(nm, act_table[j].name)) found = j;
    if (found < 0)
      return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                        "activation '%s' is not supported (expected Relu, Tanh, "
                        "Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
                        "ScaledTanh, HardSigmoid, Elu, Softsign or Softplus)",
                        nm ? nm : "");
    a->kind = (act_kind)found;
    a->alpha = act_table[found].alpha;
    a->beta = act_table[found].beta;
    if (act_table[found].uses_alpha && ia < n_alpha) a->alpha = alphas[ia++];
    if (act_table[found].uses_beta && ib < n_beta) a->beta = betas[ib++];
  }
  return KN_OK;
}

/* ---- shape checks -------------------------------------------------------- */

/* Checks rank and the known dims of input `idx` against `want` (-1: any). */
static kn_status check_shape(kn_op_ctx *ctx, int32_t idx, const char *what,
                             int32_t rank, const int64_t *want) {
  const kn_tensor *t = kn_in(ctx, idx);
  if (!t || t->rank < 0) return KN_OK;
  char sa[128], sb[128];
  if (t->rank != rank)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input %s has shape %s, expected rank %d (%s)",
                      what, kn_shape_str(t->rank, t->dims, sa, sizeof sa),
                      (int)rank, kn_shape_str(rank, want, sb, sizeof sb));
  for (int32_t i = 0; i < rank; i++)
    if (want[i] >= 0 && t->dims[i] >= 0 && t->dims[i] != want[i])
      return kn_op_fail(ctx, KN_ERR_SHAPE, "input %s has shape %s, expected %s", what,
                        kn_shape_str(t->rank, t->dims, sa, sizeof sa),
                        kn_shape_str(rank, want, sb, sizeof sb));
  return KN_OK;
}

/* Known dim of input idx, or -1. */
static int64_t in_dim(const kn_op_ctx *ctx, int32_t idx, int32_t d) {
  const kn_tensor *t = kn_in(ctx, idx);
  if (!t || t->rank <= d) return -1;
  return t->dims[d];
}

static int64_t mul_or_unknown(int64_t a, int64_t b) {
  return (a < 0 || b < 0) ? -1 : a * b;
}

typedef kn_rnn_dims rnn_dims;

kn_status kn_rnn_check(kn_op_ctx *ctx, int kind, rnn_params *p, rnn_dims *dm) {
  kn_status st = kn_rnn_parse(ctx, kind, p);
  if (st) return st;
  int n_in_max = kind == KN_RNN_OP_LSTM ? 8 : 6;
  for (int32_t i = 0; i < ctx->n_in && i < n_in_max; i++) {
    if (!ctx->in[i] || ctx->in[i]->kind == KN_KIND_NONE) continue;
    if (ctx->in[i]->kind != KN_KIND_TENSOR)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d must be a tensor", (int)i);
  }
  const kn_tensor *x = kn_in(ctx, 0);
  if (!x) return kn_op_fail(ctx, KN_ERR_MISSING, "input X is required");
  static const kn_dtype fl[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_F64,
                                KN_DTYPE_BF16, 0};
  static const kn_dtype i32[] = {KN_DTYPE_I32, 0};
  if ((st = kn_check_dtype(ctx, 0, x, fl))) return st;
  for (int32_t i = 1; i < ctx->n_in && i < n_in_max; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    if (!t) continue;
    if ((st = kn_check_dtype(ctx, i, t, i == 4 ? i32 : fl))) return st;
    if (i != 4 && t->dtype && x->dtype && t->dtype != x->dtype)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d has dtype %s, expected %s like X",
                        (int)i, kn_dtype_name(t->dtype), kn_dtype_name(x->dtype));
  }
  int64_t G = p->gates;
  int64_t D = p->dirs;
  int64_t H = p->hidden;
  if (H < 0) H = in_dim(ctx, 2, 2);
  if (H < 0 && in_dim(ctx, 2, 1) >= 0 && in_dim(ctx, 2, 1) % G == 0)
    H = in_dim(ctx, 2, 1) / G;
  if (H == 0) return kn_op_fail(ctx, KN_ERR_SHAPE, "hidden size is 0");
  int64_t seq = in_dim(ctx, 0, p->layout ? 1 : 0);
  int64_t batch = in_dim(ctx, 0, p->layout ? 0 : 1);
  int64_t input = in_dim(ctx, 0, 2);
  if (input < 0) input = in_dim(ctx, 1, 2);

  int64_t wx[3] = {-1, -1, -1};
  if (x->rank >= 0 && (st = check_shape(ctx, 0, "X", 3, wx))) return st;
  int64_t ww[3] = {D, mul_or_unknown(G, H), input};
  if ((st = check_shape(ctx, 1, "W", 3, ww))) return st;
  int64_t wr[3] = {D, mul_or_unknown(G, H), H};
  if ((st = check_shape(ctx, 2, "R", 3, wr))) return st;
  int64_t wb[2] = {D, mul_or_unknown(2 * G, H)};
  if ((st = check_shape(ctx, 3, "B", 2, wb))) return st;
  int64_t ws[1] = {batch};
  if ((st = check_shape(ctx, 4, "sequence_lens", 1, ws))) return st;
  int64_t wh[3] = {D, batch, H};
  if (p->layout) {
    wh[0] = batch;
    wh[1] = D;
  }
  if ((st = check_shape(ctx, 5, "initial_h", 3, wh))) return st;
  if (kind == KN_RNN_OP_LSTM) {
    if ((st = check_shape(ctx, 6, "initial_c", 3, wh))) return st;
    int64_t wp[2] = {D, mul_or_unknown(3, H)};
    if ((st = check_shape(ctx, 7, "P", 2, wp))) return st;
  }
  dm->seq = seq;
  dm->batch = batch;
  dm->input = input;
  dm->hidden = H;

  kn_dtype dt = x->dtype;
  int64_t y[4], yh[3];
  if (p->layout) {
    y[0] = batch, y[1] = seq, y[2] = D, y[3] = H;
    yh[0] = batch, yh[1] = D, yh[2] = H;
  } else {
    y[0] = seq, y[1] = D, y[2] = batch, y[3] = H;
    yh[0] = D, yh[1] = batch, yh[2] = H;
  }
  kn_out_set(ctx, 0, dt, 4, y);
  kn_out_set(ctx, 1, dt, 3, yh);
  if (kind == KN_RNN_OP_LSTM) kn_out_set(ctx, 2, dt, 3, yh);
  return KN_OK;
}

/* ---- kernels ------------------------------------------------------------- */

static inline float act_apply(const rnn_act *a, float x) {
  switch (a->kind) {
  case KN_RNN_ACT_RELU: return x > 0 ? x : 0;
  case KN_RNN_ACT_TANH: return tanhf(x);
  case KN_RNN_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case KN_RNN_ACT_AFFINE: return a->alpha * x + a->beta;
  case KN_RNN_ACT_LEAKYRELU: return x >= 0 ? x : a->alpha * x;
  case KN_RNN_ACT_THRESHOLDEDRELU: return x > a->alpha ? x : 0;
  case KN_RNN_ACT_SCALEDTANH: return a->alpha * tanhf(a->beta * x);
  case KN_RNN_ACT_HARDSIGMOID: {
    float v = a->alpha * x + a->beta;
    return v < 0 ? 0 : v > 1 ? 1 : v;
  }
  case KN_RNN_ACT_ELU: return x >= 0 ? x : a->alpha * (expf(x) - 1.0f);
  case KN_RNN_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
  case KN_RNN_ACT_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
  }
  return x;
}

static inline float clipf(float v, float c) {
  if (c <= 0) return v;
  return v < -c ? -c : v > c ? c : v;
}

/* Dot product with 8 independent partial sums (vectorizable). */
static float dotf(const float *a, const float *b, int64_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) s[k] += a[i + k] * b[i + k];
  float r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  for (; i < n; i++) r += a[i] * b[i];
  return r;
}

/* out[m][n] = a[m] . b[n]  (a: M x K rows, b: N x K rows).  Blocks of 32
 * rows of a stay in cache while every row of b streams past them once. */
static void gemm_abt(const float *a, const float *b, float *out, int64_t M,
                     int64_t N, int64_t K) {
  for (int64_t m0 = 0; m0 < M; m0 += 32) {
    int64_t m1 = m0 + 32 < M ? m0 + 32 : M;
    for (int64_t n = 0; n < N; n++)
      for (int64_t m = m0; m < m1; m++) out[m * N + n] = dotf(a + m * K, b + n * K, K);
  }
}

/* out[b][j] = hs[b] . R[j] for j in [j0, j1) and each listed batch row b
 * (row stride ldo); a row of R is read once for all batch rows. */
static void rec_gemm(const float *hs, const int64_t *rows, int64_t n_rows, int64_t H,
                     const float *R, int64_t j0, int64_t j1, float *out, int64_t ldo) {
  for (int64_t j = j0; j < j1; j++) {
    const float *rj = R + j * H;
    for (int64_t i = 0; i < n_rows; i++) {
      int64_t b = rows[i];
      out[b * ldo + j] = dotf(hs + b * H, rj, H);
    }
  }
}

/* Any float tensor -> float32 buffer (n elements from element `off`). */
static void load_f32(const kn_tensor *t, int64_t off, int64_t n, float *dst) {
  size_t es = kn_dtype_size(t->dtype);
  kn_convert((const char *)t->data + (size_t)off * es, t->dtype, dst, KN_DTYPE_F32, n);
}

static void store_f32(kn_tensor *t, int64_t off, int64_t n, const float *src) {
  size_t es = kn_dtype_size(t->dtype);
  kn_convert(src, KN_DTYPE_F32, (char *)t->data + (size_t)off * es, t->dtype, n);
}

/* Offset (in elements) of row (seq s, dir d, batch b) of Y. */
static int64_t y_off(const rnn_params *p, const rnn_dims *dm, int64_t s, int64_t d,
                     int64_t b) {
  int64_t D = p->dirs, H = dm->hidden;
  if (p->layout) return (((b * dm->seq + s) * D) + d) * H;
  return (((s * D) + d) * dm->batch + b) * H;
}

/* Offset of row (dir d, batch b) of Y_h / Y_c / initial_h / initial_c. */
static int64_t h_off(const rnn_params *p, const rnn_dims *dm, int64_t d, int64_t b) {
  if (p->layout) return (b * p->dirs + d) * dm->hidden;
  return (d * dm->batch + b) * dm->hidden;
}

/* Work buffers for one direction. */
typedef struct {
  float *w, *r, *bias, *peep; /* W, R, Wb+Rb, P */
  float *xw;                  /* [seq*batch, G*H] */
  float *h, *c;               /* [batch, H] */
  float *gates;               /* [batch, G*H] recurrent products */
  float *tmp;                 /* [batch, H] GRU r . H */
  int64_t *rows, *tidx;       /* active batch rows; time index per row */
} rnn_work;

static kn_status rnn_run_common(kn_op_ctx *ctx, int kind) {
  rnn_params p;
  rnn_dims dm;
  kn_status st = kn_rnn_check(ctx, kind, &p, &dm);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0), *w = kn_in(ctx, 1), *r = kn_in(ctx, 2);
  const kn_tensor *b = kn_in(ctx, 3), *sl = kn_in(ctx, 4), *h0 = kn_in(ctx, 5);
  const kn_tensor *c0 = kind == KN_RNN_OP_LSTM ? kn_in(ctx, 6) : NULL;
  const kn_tensor *pp = kind == KN_RNN_OP_LSTM ? kn_in(ctx, 7) : NULL;
  if (!w || !r)
    return kn_op_fail(ctx, KN_ERR_MISSING, "inputs W and R are required");
  if (x->rank != 3 || w->rank != 3 || r->rank != 3)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "X, W and R must have rank 3");
  const int64_t S = dm.seq, B = dm.batch, I = dm.input, H = dm.hidden;
  const int64_t G = p.gates, GH = G * H, D = p.dirs;
  if (w->dims[2] != I)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "W has input size %lld, X has %lld",
                      (long long)w->dims[2], (long long)I);

  /* Work buffers hold S*B*G*H and G*H*max(I, H) floats. */
  int64_t lim = (int64_t)(KN_MAX_TENSOR_BYTES / sizeof(float));
  int64_t wide = I > H ? I : H;
  if (S * B > lim / (GH ? GH : 1) || GH > lim / (wide ? wide : 1))
    return kn_op_fail(ctx, KN_ERR_LIMIT, "work buffers for seq %lld, batch %lld, "
                      "%lld gates x hidden exceed kiln's tensor limit",
                      (long long)S, (long long)B, (long long)GH);
  /* sequence lengths, validated */
  int64_t *lens = kn_calloc((size_t)(B ? B : 1), sizeof *lens);
  if (!lens) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  for (int64_t i = 0; i < B; i++) {
    int64_t v = sl ? kn_load_i64(sl->data, sl->dtype, i) : S;
    if (v < 0 || v > S) {
      free(lens);
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "sequence_lens[%lld] = %lld is outside 0..%lld", (long long)i,
                        (long long)v, (long long)S);
    }
    lens[i] = v;
  }

  /* X in layout 0 as float32 */
  size_t n_x = (size_t)(S * B * I);
  float *xf = kn_malloc((n_x ? n_x : 1) * sizeof(float));
  rnn_work wk;
  memset(&wk, 0, sizeof wk);
  wk.w = kn_malloc((size_t)(GH * I + 1) * sizeof(float));
  wk.r = kn_malloc((size_t)(GH * H + 1) * sizeof(float));
  wk.bias = kn_calloc((size_t)(2 * GH), sizeof(float));
  wk.peep = kn_calloc((size_t)(3 * H), sizeof(float));
  wk.xw = kn_malloc((size_t)(S * B * GH + 1) * sizeof(float));
  wk.h = kn_malloc((size_t)(B * H + 1) * sizeof(float));
  wk.c = kn_malloc((size_t)(B * H + 1) * sizeof(float));
  wk.gates = kn_malloc((size_t)(B * GH + 1) * sizeof(float));
  wk.tmp = kn_malloc((size_t)(B * H + 1) * sizeof(float));
  wk.rows = kn_malloc((size_t)(B + 1) * sizeof(int64_t));
  wk.tidx = kn_malloc((size_t)(B + 1) * sizeof(int64_t));
  if (!xf || !wk.w || !wk.r || !wk.bias || !wk.peep || !wk.xw || !wk.h || !wk.c ||
      !wk.gates || !wk.tmp || !wk.rows || !wk.tidx) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory for %s work buffers",
                    ctx->node->op_type);
    goto done;
  }
  for (int64_t s = 0; s < S; s++)
    for (int64_t bb = 0; bb < B; bb++) {
      int64_t src = p.layout ? (bb * S + s) * I : (s * B + bb) * I;
      load_f32(x, src, I, xf + (s * B + bb) * I);
    }

  kn_tensor *y = kn_out_wanted(ctx, 0) ? kn_out(ctx, 0) : NULL;
  kn_tensor *yh = kn_out_wanted(ctx, 1) ? kn_out(ctx, 1) : NULL;
  kn_tensor *yc = kind == KN_RNN_OP_LSTM && kn_out_wanted(ctx, 2) ? kn_out(ctx, 2) : NULL;
  if (y && (!y->data && S * B * D * H != 0)) y = NULL;
  if (yh && !yh->data && B * D * H != 0) yh = NULL;
  if (yc && !yc->data && B * D * H != 0) yc = NULL;

  for (int64_t d = 0; d < D; d++) {
    bool rev = p.reverse || d == 1;
    const rnn_act *af = &p.act[d][0], *ag = &p.act[d][1], *ah = &p.act[d][2];
    load_f32(w, d * GH * I, GH * I, wk.w);
    load_f32(r, d * GH * H, GH * H, wk.r);
    if (b) load_f32(b, d * 2 * GH, 2 * GH, wk.bias);
    if (pp) load_f32(pp, d * 3 * H, 3 * H, wk.peep);
    for (int64_t bb = 0; bb < B; bb++) {
      if (h0) load_f32(h0, h_off(&p, &dm, d, bb), H, wk.h + bb * H);
      else memset(wk.h + bb * H, 0, (size_t)H * sizeof(float));
      if (c0) load_f32(c0, h_off(&p, &dm, d, bb), H, wk.c + bb * H);
      else memset(wk.c + bb * H, 0, (size_t)H * sizeof(float));
    }
    /* xw = X W^T + Wb (+ Rb, except GRU's h gate Rb which depends on
     * linear_before_reset and is added in the step). */
    gemm_abt(xf, wk.w, wk.xw, S * B, GH, I);
    const float *wb = wk.bias, *rb = wk.bias + GH;
    for (int64_t row = 0; row < S * B; row++) {
      float *o = wk.xw + row * GH;
      for (int64_t j = 0; j < GH; j++) {
        bool gru_h = kind == KN_RNN_OP_GRU && j >= 2 * H;
        o[j] += wb[j] + (gru_h ? 0 : rb[j]);
      }
    }

    int64_t max_len = 0;
    for (int64_t bb = 0; bb < B; bb++)
      if (lens[bb] > max_len) max_len = lens[bb];
    for (int64_t step = 0; step < max_len; step++) {
      /* rows still running at this step and their time index */
      int64_t n_act = 0;
      for (int64_t bb = 0; bb < B; bb++) {
        if (step >= lens[bb]) continue;
        wk.rows[n_act++] = bb;
        wk.tidx[bb] = rev ? lens[bb] - 1 - step : step;
      }
      /* recurrent products H_{t-1} R^T for the gates that read H directly */
      int64_t jr = kind == KN_RNN_OP_GRU && !p.linear_before_reset ? 2 * H : GH;
      rec_gemm(wk.h, wk.rows, n_act, H, wk.r, 0, jr, wk.gates, GH);
      if (kind == KN_RNN_OP_GRU && !p.linear_before_reset) {
        /* h gate reads (r . H_{t-1}) R_h^T: r first, then the product */
        for (int64_t i = 0; i < n_act; i++) {
          int64_t bb = wk.rows[i];
          const float *xw = wk.xw + (wk.tidx[bb] * B + bb) * GH;
          float *g = wk.gates + bb * GH, *h = wk.h + bb * H, *tmp = wk.tmp + bb * H;
          for (int64_t j = 0; j < H; j++) {
            float r_t = act_apply(af, clipf(xw[H + j] + g[H + j], p.clip));
            tmp[j] = r_t * h[j];
          }
        }
        rec_gemm(wk.tmp, wk.rows, n_act, H, wk.r, 2 * H, 3 * H, wk.gates, GH);
      }
      for (int64_t i = 0; i < n_act; i++) {
        int64_t bb = wk.rows[i], t = wk.tidx[bb];
        const float *xw = wk.xw + (t * B + bb) * GH;
        float *h = wk.h + bb * H, *c = wk.c + bb * H, *g = wk.gates + bb * GH;
        if (kind == KN_RNN_OP_RNN) {
          for (int64_t j = 0; j < H; j++) h[j] = act_apply(af, clipf(xw[j] + g[j], p.clip));
        } else if (kind == KN_RNN_OP_GRU) {
          const float *rbh = rb + 2 * H;
          for (int64_t j = 0; j < H; j++) {
            float z = act_apply(af, clipf(xw[j] + g[j], p.clip));
            float hh;
            if (p.linear_before_reset) {
              float r_t = act_apply(af, clipf(xw[H + j] + g[H + j], p.clip));
              hh = xw[2 * H + j] + r_t * (g[2 * H + j] + rbh[j]);
            } else {
              hh = xw[2 * H + j] + g[2 * H + j] + rbh[j];
            }
            float ht = act_apply(ag, clipf(hh, p.clip));
            h[j] = (1.0f - z) * ht + z * h[j];
          }
        } else {
          /* gates i o f c */
          const float *pi = wk.peep, *po = wk.peep + H, *pf = wk.peep + 2 * H;
          for (int64_t j = 0; j < H; j++) {
            float it = act_apply(af, clipf(xw[j] + g[j] + pi[j] * c[j], p.clip));
            float ft = p.input_forget ? 1.0f - it
                                      : act_apply(af, clipf(xw[2 * H + j] + g[2 * H + j] +
                                                                pf[j] * c[j],
                                                            p.clip));
            float ct = act_apply(ag, clipf(xw[3 * H + j] + g[3 * H + j], p.clip));
            float cn = ft * c[j] + it * ct;
            float ot = act_apply(af, clipf(xw[H + j] + g[H + j] + po[j] * cn, p.clip));
            c[j] = cn;
            h[j] = ot * act_apply(ah, cn);
          }
        }
        if (y) store_f32(y, y_off(&p, &dm, t, d, bb), H, h);
      }
    }
    for (int64_t bb = 0; bb < B; bb++) {
      if (yh) store_f32(yh, h_off(&p, &dm, d, bb), H, wk.h + bb * H);
      if (yc) store_f32(yc, h_off(&p, &dm, d, bb), H, wk.c + bb * H);
    }
  }
  st = KN_OK;
done:
  free(lens);
  free(xf);
  free(wk.w);
  free(wk.r);
  free(wk.bias);
  free(wk.peep);
  free(wk.xw);
  free(wk.h);
  free(wk.c);
  free(wk.gates);
  free(wk.tmp);
  free(wk.rows);
  free(wk.tidx);
  return st;
}

static kn_status rnn_infer(kn_op_ctx *ctx) {
  rnn_params p;
  rnn_dims d;
  return kn_rnn_check(ctx, KN_RNN_OP_RNN, &p, &d);
}
static kn_status gru_infer(kn_op_ctx *ctx) {
  rnn_params p;
  rnn_dims d;
  return kn_rnn_check(ctx, KN_RNN_OP_GRU, &p, &d);
}
static kn_status lstm_infer(kn_op_ctx *ctx) {
  rnn_params p;
  rnn_dims d;
  return kn_rnn_check(ctx, KN_RNN_OP_LSTM, &p, &d);
}
static kn_status rnn_run(kn_op_ctx *ctx) { return rnn_run_common(ctx, KN_RNN_OP_RNN); }
static kn_status gru_run(kn_op_ctx *ctx) { return rnn_run_common(ctx, KN_RNN_OP_GRU); }
static kn_status lstm_run(kn_op_ctx *ctx) { return rnn_run_common(ctx, KN_RNN_OP_LSTM); }

/* 2 flops per multiply-add of X W^T and H R^T, for every direction. */
static double rnn_flops(const kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *w = kn_in(ctx, 1), *r = kn_in(ctx, 2);
  if (!x || !w || !r || x->rank != 3 || w->rank != 3 || r->rank != 3) return 0;
  if (!kn_shape_known(x) || !kn_shape_known(w) || !kn_shape_known(r)) return 0;
  double sb = (double)x->dims[0] * (double)x->dims[1];
  double per_dir = 2.0 * sb * (double)w->dims[1] * ((double)w->dims[2] + (double)r->dims[2]);
  return per_dir * (double)w->dims[0];
}

const kn_op_def kn_ops_rnn[] = {
    {"RNN", NULL, 3, 6, 0, 2, 1, 22, rnn_infer, rnn_run, rnn_flops},
    {"GRU", NULL, 3, 6, 0, 2, 1, 22, gru_infer, gru_run, rnn_flops},
    {"LSTM", NULL, 3, 8, 0, 3, 1, 22, lstm_infer, lstm_run, rnn_flops},
    KN_OP_END,
};
