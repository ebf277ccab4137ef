/* Tactics of the recurrent family (src/ops/rnn.c): RNN, GRU and LSTM with
 * the gate products on the packed GEMM (kernels/rnn, tactic rnn_gemm), W,
 * R, B and P packed once at build when they are constants. */
#include "tactics.h"

#include "kernels/rnn/rnn-kernels.h"
#include "ops/rnn.h"

static const int kernel_kind[3] = {[KN_RNN_OP_RNN] = KN_RNN_RNN, [KN_RNN_OP_GRU] = KN_RNN_GRU,
                                   [KN_RNN_OP_LSTM] = KN_RNN_LSTM};

/* Attributes the kernel runs: layout 0, no clip, the default activations
 * (their default alpha/beta are unused). */
static bool fast_params_ok(const kn_rnn_params *p) {
  static const kn_rnn_act_kind dflt[3][3] = {
      [KN_RNN_OP_RNN] = {KN_RNN_ACT_TANH},
      [KN_RNN_OP_GRU] = {KN_RNN_ACT_SIGMOID, KN_RNN_ACT_TANH},
      [KN_RNN_OP_LSTM] = {KN_RNN_ACT_SIGMOID, KN_RNN_ACT_TANH, KN_RNN_ACT_TANH},
  };
  if (p->layout != 0 || p->clip > 0) return false;
  for (int d = 0; d < p->dirs; d++)
    for (int k = 0; k < p->n_acts; k++)
      if (p->act[d][k].kind != dflt[p->kind][k]) return false;
  return true;
}

/* Attributes of node n without a run (select and pack). */
static bool node_params(const kn_node *n, int kind, kn_rnn_params *p) {
  kn_error err;
  kn_op_ctx ctx = {.node = n, .opset = n->opset, .err = &err, .static_infer = true};
  return kn_rnn_parse(&ctx, kind, p) == KN_OK;
}

static int32_t rnn_select_common(const kn_graph *g, const kn_node *n, int kind) {
  kn_rnn_params p;
  if (n->n_inputs < 3 || n->inputs[0] < 0) return 0;
  if (g->values[n->inputs[0]].type.dtype != KN_DTYPE_F32) return 0;
  if (!node_params(n, kind, &p) || !fast_params_ok(&p)) return 0;
  return KN_TACTIC_rnn_gemm;
}

static int32_t rnn_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  return rnn_select_common(g, n, KN_RNN_OP_RNN);
}
static int32_t gru_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  return rnn_select_common(g, n, KN_RNN_OP_GRU);
}
static int32_t lstm_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  return rnn_select_common(g, n, KN_RNN_OP_LSTM);
}

/* The packed weights: one relocatable block (kn_packed), sizes and
 * flags in the header, the kernel's packed memory at data_off. */
typedef struct rnn_block {
  kn_packed hdr;
  int32_t kind, dirs, gru_split, peep;
  int64_t input, hidden;
  uint64_t data_off;
} rnn_block;

#define RNN_DATA_OFF ((sizeof(rnn_block) + 63) & ~(size_t)63)

/* fp32 constant input i of n, or NULL. */
static const kn_tensor *const_f32(const kn_graph *g, const kn_node *n, int32_t i) {
  if (i >= n->n_inputs || n->inputs[i] < 0) return NULL;
  const kn_tensor *t = g->values[n->inputs[i]].constant;
  return t && t->dtype == KN_DTYPE_F32 ? t : NULL;
}

/* Dims of W and R a kernel can take: [D, G*H, I] and [D, G*H, H]. */
static bool weight_dims_ok(const kn_tensor *w, const kn_tensor *r, const kn_rnn_params *p,
                           int64_t *I, int64_t *H) {
  if (w->rank != 3 || r->rank != 3 || w->dims[0] != p->dirs || r->dims[0] != p->dirs) return false;
  *H = r->dims[2];
  *I = w->dims[2];
  if (*H <= 0 || (p->hidden >= 0 && p->hidden != *H)) return false;
  return w->dims[1] == p->gates * *H && r->dims[1] == p->gates * *H;
}

/* Packs W, R, B and P once when they are constants (else the run packs). */
static kn_status rnn_pack_common(const kn_graph *g, const kn_node *n, int kind, int32_t isa,
                                 void **packed, kn_error *err) {
  *packed = NULL;
  kn_rnn_params p;
  if (!node_params(n, kind, &p) || !fast_params_ok(&p)) return KN_OK;
  const kn_tensor *w = const_f32(g, n, 1), *r = const_f32(g, n, 2);
  const kn_tensor *b = const_f32(g, n, 3), *pp = kind == KN_RNN_OP_LSTM ? const_f32(g, n, 7) : NULL;
  bool b_given = n->n_inputs > 3 && n->inputs[3] >= 0;
  bool p_given = kind == KN_RNN_OP_LSTM && n->n_inputs > 7 && n->inputs[7] >= 0;
  int64_t I, H;
  if (!w || !r || (b_given && !b) || (p_given && !pp) || !weight_dims_ok(w, r, &p, &I, &H))
    return KN_OK;
  int64_t GH = p.gates * H;
  if ((b && kn_tensor_numel(b) != p.dirs * 2 * GH) || (pp && kn_tensor_numel(pp) != p.dirs * 3 * H))
    return KN_OK;
  bool split = kind == KN_RNN_OP_GRU && !p.linear_before_reset;
  size_t floats = kn_rnn_weights_floats((kn_isa)isa, kernel_kind[kind], p.dirs, I, H, split);
  rnn_block *blk = kn_packed_alloc(RNN_DATA_OFF + floats * sizeof(float), isa,
                                   KN_TACTIC_rnn_gemm);
  if (!blk)
    return kn_fail(err, KN_ERR_OOM, "node '%s' (%s): out of memory packing weights", n->name,
                   n->op_type);
  blk->kind = kernel_kind[kind];
  blk->dirs = p.dirs;
  blk->gru_split = split;
  blk->peep = pp != NULL;
  blk->input = I;
  blk->hidden = H;
  blk->data_off = RNN_DATA_OFF;
  kn_rnn_weights unused;
  kn_rnn_weights_pack((kn_isa)isa, kernel_kind[kind], p.dirs, I, H, split, w->data, r->data,
                      b ? b->data : NULL, pp ? pp->data : NULL,
                      (float *)((char *)blk + RNN_DATA_OFF), &unused);
  *packed = blk;
  return KN_OK;
}

static kn_status rnn_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                          void **packed, kn_error *err) {
  return rnn_pack_common(g, n, KN_RNN_OP_RNN, target->isa, packed, err);
}
static kn_status gru_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                          void **packed, kn_error *err) {
  return rnn_pack_common(g, n, KN_RNN_OP_GRU, target->isa, packed, err);
}
static kn_status lstm_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                           void **packed, kn_error *err) {
  return rnn_pack_common(g, n, KN_RNN_OP_LSTM, target->isa, packed, err);
}

/* An fp32 input of the expected element count, or NULL. */
static const float *f32_in(const kn_op_ctx *ctx, int32_t i, int64_t numel, bool *bad) {
  const kn_tensor *t = kn_in(ctx, i);
  if (!t) return NULL;
  if (t->dtype != KN_DTYPE_F32 || kn_tensor_numel(t) != numel) *bad = true;
  return t->data;
}

/* Runs the kernel when this run is a case it takes (*done); otherwise
 * leaves everything to the reference. */
static kn_status rnn_fast(kn_op_ctx *ctx, int kind, bool *done) {
  *done = false;
  kn_rnn_params p;
  kn_rnn_dims dm;
  kn_status st = kn_rnn_check(ctx, kind, &p, &dm);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0), *w = kn_in(ctx, 1), *r = kn_in(ctx, 2);
  if (!fast_params_ok(&p) || !x || !w || !r || x->dtype != KN_DTYPE_F32 || x->rank != 3 ||
      w->dtype != KN_DTYPE_F32 || r->dtype != KN_DTYPE_F32)
    return KN_OK;
  int64_t I, H;
  if (!weight_dims_ok(w, r, &p, &I, &H) || I != x->dims[2]) return KN_OK;
  const int64_t S = x->dims[0], B = x->dims[1], GH = p.gates * H, D = p.dirs;
  /* sequence_lens shorter than seq_length: the reference handles them */
  const kn_tensor *sl = kn_in(ctx, 4);
  for (int64_t i = 0; sl && i < B; i++)
    if (kn_load_i64(sl->data, sl->dtype, i) != S) return KN_OK;
  bool bad = false;
  const float *bias = f32_in(ctx, 3, D * 2 * GH, &bad), *h0 = f32_in(ctx, 5, D * B * H, &bad);
  const float *c0 = kind == KN_RNN_OP_LSTM ? f32_in(ctx, 6, D * B * H, &bad) : NULL;
  const float *peep = kind == KN_RNN_OP_LSTM ? f32_in(ctx, 7, D * 3 * H, &bad) : NULL;
  if (bad) return KN_OK;
  kn_tensor *y = kn_out_wanted(ctx, 0) ? kn_out(ctx, 0) : NULL;
  kn_tensor *yh = kn_out_wanted(ctx, 1) ? kn_out(ctx, 1) : NULL;
  kn_tensor *yc = kind == KN_RNN_OP_LSTM && kn_out_wanted(ctx, 2) ? kn_out(ctx, 2) : NULL;
  if ((y && !y->data) || (yh && !yh->data) || (yc && !yc->data)) return KN_OK;

  kn_rt *rt = ctx->rt;
  bool split = kind == KN_RNN_OP_GRU && !p.linear_before_reset;
  /* the block packed at build, when it was packed for this run */
  const rnn_block *blk = ctx->packed;
  kn_rnn_weights local;
  const kn_rnn_weights *wt = NULL;
  if (blk && blk->hdr.isa == (int32_t)rt->isa && blk->kind == kernel_kind[kind] &&
      blk->dirs == D && blk->input == I && blk->hidden == H && (bool)blk->gru_split == split) {
    kn_rnn_weights_map(rt->isa, blk->kind, blk->dirs, I, H, split, blk->peep,
                       (const float *)((const char *)blk + blk->data_off), &local);
    wt = &local;
  }
  kn_rnn_args a = {.seq = S, .batch = B, .reverse = p.reverse, .input_forget = p.input_forget,
                   .lbr = p.linear_before_reset, .x = x->data, .h0 = h0, .c0 = c0,
                   .y = y ? y->data : NULL, .yh = yh ? yh->data : NULL,
                   .yc = yc ? yc->data : NULL};
  size_t pack_bytes = wt ? 0
                         : (kn_rnn_weights_floats(rt->isa, kernel_kind[kind], (int)D, I, H, split) *
                                sizeof(float) + 63) & ~(size_t)63;
  /* the scratch size depends on sizes only: size it with a stand-in */
  kn_rnn_weights shape = {.isa = rt->isa, .kind = kernel_kind[kind], .dirs = (int)D,
                          .input = I, .hidden = H, .gru_split = split};
  shape.d[0].w = shape.d[0].r = (const float *)&shape; /* packed operands */
  shape.d[0].r_h = split ? (const float *)&shape : NULL;
  size_t run_bytes =
      kn_rnn_scratch_size(rt->isa, &a, wt ? wt : &shape, kn_rt_threads(rt), &rt->caches);
  char *mem = kn_rt_scratch(rt, pack_bytes + run_bytes);
  if (!mem) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for %s work buffers",
                              ctx->node->op_type);
  if (!wt) {
    kn_rnn_weights_pack(rt->isa, kernel_kind[kind], (int)D, I, H, split, w->data, r->data,
                        bias, peep, (float *)mem, &local);
    wt = &local;
  }
  kn_f32_rnn(rt->isa, rt->pool, &a, wt, mem + pack_bytes, &rt->caches);
  *done = true;
  return KN_OK;
}

static kn_status rnn_fast_run(kn_op_ctx *ctx, int kind) {
  if (ctx->node->tactic == KN_TACTIC_rnn_gemm) {
    bool done;
    kn_status fst = rnn_fast(ctx, kind, &done);
    if (fst || done) return fst;
    /* the reference leaves Y past a sequence's end as it found it: zero,
     * which the executor does not do for fast tactics */
    for (int32_t o = 0; o < ctx->n_out; o++)
      if (kn_out_wanted(ctx, o) && ctx->out[o]->kind == KN_KIND_TENSOR && ctx->out[o]->t.data)
        memset(ctx->out[o]->t.data, 0, ctx->out[o]->t.nbytes);
  }
  return ctx->node->op->run(ctx);
}

static kn_status rnn_run(kn_op_ctx *ctx) { return rnn_fast_run(ctx, KN_RNN_OP_RNN); }
static kn_status gru_run(kn_op_ctx *ctx) { return rnn_fast_run(ctx, KN_RNN_OP_GRU); }
static kn_status lstm_run(kn_op_ctx *ctx) { return rnn_fast_run(ctx, KN_RNN_OP_LSTM); }

/* The block holds W, R, B and (LSTM) the peepholes: the run reads none of
 * them when it has it (rnn_fast). */
static uint32_t rnn_replaces(const kn_graph *g, const kn_node *n) {
  (void)g;
  return (1u << 1) | (1u << 2) | (1u << 3) | (strcmp(n->op_type, "LSTM") ? 0 : 1u << 7);
}

const kn_op_tactics kn_tactics_rnn[] = {
    {NULL, "RNN", .select = rnn_select, .pack = rnn_pack, .run = rnn_run, .replaces = rnn_replaces},
    {NULL, "GRU", .select = gru_select, .pack = gru_pack, .run = gru_run, .replaces = rnn_replaces},
    {NULL, "LSTM", .select = lstm_select, .pack = lstm_pack, .run = lstm_run,
     .replaces = rnn_replaces},
    KN_TACTICS_END,
};
