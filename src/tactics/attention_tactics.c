/* Tactics of kiln's Attention (src/ops/attention.c): the streamed kernel
 * (kernels/attention, tactic attention_streamed) on the reference's plan,
 * its bf16 precision, its loop nest for the IO model and its tiling. */
#include "tactics.h"

#include "core/cpu.h"
#include "ops/attention.h"

/* The streamed kernel takes contiguous features in q, v and the output,
 * keys either way round, a mask contiguous or constant along keys. */
static bool att_fast_ok(const kn_att_plan *p) {
  const kn_f32_attention_args *a = &p->a;
  return p->q_sd == 1 && p->v_se == 1 && p->o_se == 1 &&
         (a->k_sd == 1 || a->k_sj == 1 || a->sk <= 1) &&
         (!a->mask || a->m_sj == 0 || a->m_sj == 1);
}

static kn_status att_fast(kn_op_ctx *ctx) {
  if (ctx->node->tactic != KN_TACTIC_attention_streamed) return ctx->node->op->run(ctx);
  kn_att_plan plan;
  bool empty;
  kn_status st = kn_attention_plan(ctx, &plan, &empty);
  if (st || empty) return st;
  if (!att_fast_ok(&plan)) return ctx->node->op->run(ctx);
  int32_t threads = kn_rt_threads(ctx->rt);
  plan.a.caches = &ctx->rt->caches; /* the query tile's rows come from the L1 */
  plan.a.bf16 = ctx->node->precision == KN_PRECISION_BF16;
  plan.a.bf16_dot = plan.a.bf16 && ctx->rt->isa == KN_ISA_AVX512 &&
                    (ctx->rt->features & KN_CPU_BIT(AVX512BF16));
  void *scratch = kn_rt_scratch(ctx->rt, kn_f32_attention_scratch(&plan.a, threads));
  if (!scratch) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for the attention tiles");
  kn_f32_attention(ctx->rt->isa, ctx->rt->pool, &plan.a, scratch);
  return KN_OK;
}

/* Static inputs the streamed kernel takes: fp32 tensors of known rank
 * (layouts it cannot stride through fall back to the reference at run). */
static int32_t att_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  for (int32_t i = 0; i < n->n_inputs; i++) {
    if (n->inputs[i] < 0) continue;
    const kn_type *t = &g->values[n->inputs[i]].type;
    if (t->kind != KN_KIND_TENSOR || t->dtype != KN_DTYPE_F32 || t->rank < 0) return 0;
  }
  return KN_TACTIC_attention_streamed;
}

/* bf16 where the streamed kernel runs: both products on bf16 operands,
 * fp32 softmax and sums (attention.h).  A layout the kernel cannot stride
 * through falls back at run time to the fp32 reference, which is only
 * more exact. */
static uint32_t att_precisions(const kn_graph *g, const kn_node *n, int32_t isa) {
  return att_select(g, n, isa) ? 1u << KN_PRECISION_BF16 : 0;
}

static int64_t known_numel(const kn_graph *g, int32_t v) {
  if (v < 0) return -1;
  const kn_type *t = &g->values[v].type;
  if (t->kind != KN_KIND_TENSOR || t->rank < 0) return -1;
  return kn_shape_numel(t->rank, t->dims);
}

/* The IO model's loop nest: heads bh, queries q, features d, keys x (in
 * that order: a query tile and its output stay while the keys stream
 * past, FlashAttention's schedule).  Q, K, V, O as [bh, q|x, d]; the
 * mask [q, x] at its own size. */
static bool att_loops(const kn_graph *g, const kn_node *n, kn_loopnest *l) {
  if (n->n_inputs < 3 || n->n_outputs < 1) return false;
  int64_t nq = known_numel(g, n->inputs[0]), nk = known_numel(g, n->inputs[1]),
          nv = known_numel(g, n->inputs[2]), ny = known_numel(g, n->outputs[0]);
  if (nq <= 0 || nk <= 0 || nv <= 0 || ny <= 0) return false;
  const kn_type *k = &g->values[n->inputs[1]].type;
  const kn_attr *kp = kn_node_attr(n, "k_perm"), *heads = kn_node_attr(n, "num_heads");
  int64_t sk, dk;
  if (kp && kp->type == KN_ATTR_INTS && kp->n == k->rank && k->rank >= 2) {
    sk = k->dims[kp->ints[k->rank - 2]];
    dk = k->dims[kp->ints[k->rank - 1]];
  } else if (k->rank == 3) {
    int64_t h = heads && heads->i > 0 ? heads->i : 1;
    sk = k->dims[1];
    dk = k->dims[2] / h;
  } else {
    return false;
  }
  if (sk < 1 || dk < 1 || nk % (sk * dk)) return false;
  int64_t bh = nk / (sk * dk), q = nq / (bh * dk), dv = nv / (bh * sk);
  if (q < 1 || dv < 1) return false;
  int32_t db = kn_loop_dim(l, "bh", bh), dq = kn_loop_dim(l, "q", q),
          dd = kn_loop_dim(l, "d", dk > dv ? dk : dv), dx = kn_loop_dim(l, "x", sk);
  uint32_t B = 1u << db, Q = 1u << dq, D = 1u << dd, X = 1u << dx;
  kn_loop_tensor_add(l, "Q", B | Q | D, 4, false, false);
  kn_loop_tensor_add(l, "K", B | X | D, 4, false, false);
  kn_loop_tensor_add(l, "V", B | X | D, 4, false, false);
  kn_loop_tensor_add(l, "O", B | Q | D, 4, true, false);
  int64_t nm = n->n_inputs > 3 ? known_numel(g, n->inputs[3]) : -1;
  if (nm > 0) {
    int32_t m = kn_loop_tensor_add(l, "mask", Q | X, 4, false, false);
    l->t[m].real_bytes = 4.0 * (double)nm;
  }
  l->flops = (double)(bh * q) * (double)sk * (double)(2 * dk + 2 * dv + 5);
  return true;
}

/* The streamed kernel's tiles on the target's L1 (attention.h). */
static void att_tiling(const kn_graph *g, const kn_node *n, const void *packed,
                       const kn_target *target, char *buf, size_t len) {
  (void)packed;
  kn_loopnest l;
  memset(&l, 0, sizeof l);
  if (n->tactic != KN_TACTIC_attention_streamed || !att_loops(g, n, &l)) return;
  int64_t d = l.extent[2]; /* max(Dk, Dv): taken for both (they are equal in practice) */
  kn_caches ca;
  kn_target_caches(target, &ca.l1d, &ca.l2, &ca.l3);
  snprintf(buf, len, "%lld queries x %d keys", (long long)kn_f32_attention_query_rows(d, d, &ca),
           KN_ATT_KB);
}

const kn_op_tactics kn_tactics_attention[] = {
    {KN_DOMAIN, "Attention", .select = att_select, .tiling = att_tiling, .loops = att_loops,
     .precisions = att_precisions, .run = att_fast},
    KN_TACTICS_END,
};
