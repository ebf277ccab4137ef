/* Tactics of ElementwiseChain (src/ops/ewchain.c): the vectorised
 * interpreter (tactic eltwise).  The reference's program and result slots
 * (src/ops/ewchain.h), in blocks of EWF_BLOCK elements (2 KiB per slot, so
 * a chain's live slots stay in L1), each instruction one call of the
 * vector kernels (kernels/eltwise) over the block.  Blocks are split over
 * the thread pool; each thread has its own slots in the context's
 * scratch. */
#include "tactics.h"

#include "kernels/eltwise/eltwise.h"
#include "kernels/qgemm/qgemm.h"
#include "ops/ewchain.h"

/* Elements per block. */
#define EWF_BLOCK 512

/* The Q/DQ opcodes on the int8 family's vector quantizers (the codes of
 * src/ops/quant.c bit for bit), then dequantized in float.  d may be A: the codes
 * are made before d is written. */
static void ewf_qdq(kn_qgemm_impl qimpl, bool s8, float scale, float zero, kn_ewchain_arg A,
                    float *d, int32_t cnt) {
  union {
    uint8_t u[EWF_BLOCK];
    int8_t s[EWF_BLOCK];
  } q;
  float xs[EWF_BLOCK];
  const float *x = A.p;
  if (!A.step) {
    for (int32_t i = 0; i < cnt; i++) xs[i] = A.p[0];
    x = xs;
  }
  int32_t z = (int32_t)zero;
  if (s8) {
    kn_qgemm_quantize_s8(qimpl, cnt, x, scale, z, q.s);
    for (int32_t i = 0; i < cnt; i++) d[i] = ((float)q.s[i] - zero) * scale;
  } else {
    kn_qgemm_quantize(qimpl, 1, cnt, x, cnt, scale, z, q.u, cnt);
    for (int32_t i = 0; i < cnt; i++) d[i] = ((float)q.u[i] - zero) * scale;
  }
}

/* d = op(A, B) over cnt elements with the vector kernels; opcodes without
 * one (Pow, Log, Softplus) keep the reference's scalar code. */
static void ewf_exec(const kn_ew_ukernels *k, kn_qgemm_impl qimpl, int64_t op, float c0,
                     float c1, kn_ewchain_arg A, kn_ewchain_arg B, float *d, int32_t cnt) {
  if (op == KN_EW_QDQ_U8 || op == KN_EW_QDQ_S8) {
    ewf_qdq(qimpl, op == KN_EW_QDQ_S8, c0, c1, A, d, cnt);
    return;
  }
  int bin = -1, un = -1;
  kn_act_params ap = {.alpha = c0, .beta = c1, .lo = c0, .hi = c1};
  switch ((kn_ew_opcode)op) {
  case KN_EW_ADD: bin = KN_VBIN_ADD; break;
  case KN_EW_SUB: bin = KN_VBIN_SUB; break;
  case KN_EW_MUL: bin = KN_VBIN_MUL; break;
  case KN_EW_DIV: bin = KN_VBIN_DIV; break;
  case KN_EW_MAX: bin = KN_VBIN_MAX; break;
  case KN_EW_MIN: bin = KN_VBIN_MIN; break;
  case KN_EW_POWC:
    if (c0 == 2.0f) { /* powf(x, 2) is x * x, correctly rounded */
      bin = KN_VBIN_MUL;
      B = A;
    }
    break;
  case KN_EW_NEG: un = KN_VOP_NEG; break;
  case KN_EW_ABS: un = KN_VOP_ABS; break;
  case KN_EW_EXP: un = KN_VOP_EXP; break;
  case KN_EW_SQRT: un = KN_VOP_SQRT; break;
  case KN_EW_RECIPROCAL: un = KN_VOP_RECIPROCAL; break;
  case KN_EW_RELU: un = KN_ACT_RELU; break;
  case KN_EW_LEAKYRELU: un = KN_ACT_LEAKYRELU; break;
  case KN_EW_SIGMOID: un = KN_ACT_SIGMOID; break;
  case KN_EW_TANH: un = KN_ACT_TANH; break;
  case KN_EW_ERF: un = KN_VOP_ERF; break;
  case KN_EW_HARDSIGMOID: un = KN_ACT_HARDSIGMOID; break;
  case KN_EW_HARDSWISH: un = KN_ACT_HARDSWISH; break;
  case KN_EW_CLIP: un = KN_ACT_CLIP; break;
  case KN_EW_GELU: un = KN_ACT_GELU; break;
  case KN_EW_GELU_TANH: un = KN_ACT_GELU_TANH; break;
  default: break;
  }
  if (bin >= 0) {
    k->binary(bin, A.p, A.step, B.p, B.step, d, cnt);
  } else if (un >= 0 && A.step) {
    k->unary(un, &ap, A.p, d, cnt);
  } else if (un >= 0) {
    float v;
    k->unary(un, &ap, A.p, &v, 1);
    for (int32_t i = 0; i < cnt; i++) d[i] = v;
  } else {
    kn_ewchain_exec(op, c0, c1, A, B, d, cnt);
  }
}

typedef struct ewf_job {
  const kn_ewchain_prog *p;
  const kn_ew_bcast *g;
  const kn_ew_ukernels *k;
  kn_qgemm_impl qimpl; /* the Q/DQ opcodes' quantizer */
  const float *const *in;
  float *y, *scratch;
  const int32_t *slot;
  int32_t n_slots;
  int64_t nb, blocks, tasks;
} ewf_job;

static void ewf_task(void *arg, int64_t task, int32_t thread) {
  const ewf_job *j = arg;
  const kn_ewchain_prog *p = j->p;
  const kn_ew_bcast *g = j->g;
  int32_t n = p->n, n_in = p->n_in;
  float *sc = j->scratch + (size_t)thread * (size_t)j->n_slots * EWF_BLOCK;
  int64_t b0 = j->blocks * task / j->tasks, b1 = j->blocks * (task + 1) / j->tasks;
  int64_t off[KN_EW_MAX_IN], cur = -1;
  for (int64_t blk = b0; blk < b1; blk++) {
    int64_t row = blk / j->nb, s = (blk % j->nb) * EWF_BLOCK;
    int32_t cnt = (int32_t)(g->len - s < EWF_BLOCK ? g->len - s : EWF_BLOCK);
    if (row != cur) {
      for (int32_t i = 0; i < n_in; i++) off[i] = kn_ew_bcast_offset(g, i, row);
      cur = row;
    }
    for (int32_t k = 0; k < n; k++) {
      kn_ewchain_arg ab[2] = {{NULL, 0}, {NULL, 0}};
      for (int32_t q = 0; q < 2; q++) {
        int64_t a = p->args[2 * k + q];
        if (a < 0) continue;
        if (a < n_in) {
          ab[q].p = j->in[a] + off[a] + s * g->step[a];
          ab[q].step = g->step[a];
        } else {
          ab[q].p = sc + (size_t)j->slot[a - n_in] * EWF_BLOCK;
          ab[q].step = 1;
        }
      }
      float *d = k == n - 1 ? j->y + row * g->len + s : sc + (size_t)j->slot[k] * EWF_BLOCK;
      ewf_exec(j->k, j->qimpl, p->ops[k], p->consts[2 * k], p->consts[2 * k + 1], ab[0], ab[1],
               d, cnt);
    }
  }
}

/* KN_OK, or KN_ERR_UNSUPPORTED when this run needs the reference path
 * (more inputs than the broadcast helper takes). */
static kn_status ew_run_fast(kn_op_ctx *ctx, const kn_ewchain_prog *p, kn_tensor *y) {
  int32_t n_in = p->n_in, n = p->n;
  if (n_in > KN_EW_MAX_IN) return KN_ERR_UNSUPPORTED;
  int32_t ranks[KN_EW_MAX_IN];
  const int64_t *dims[KN_EW_MAX_IN];
  const float *in[KN_EW_MAX_IN];
  for (int32_t i = 0; i < n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    ranks[i] = t->rank;
    dims[i] = t->dims;
    in[i] = t->data;
  }
  kn_ew_bcast g;
  if (!kn_ew_bcast_init(&g, n_in, ranks, dims, y->rank, y->dims)) return KN_ERR_UNSUPPORTED;
  int32_t *ints = kn_malloc(3 * (size_t)n * sizeof(int32_t));
  if (!ints) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for %d instruction slots", (int)n);
  int32_t n_slots = kn_ewchain_slots(p, ints, ints + n, ints + 2 * n);
  int64_t total = g.rows * g.len;
  int32_t threads = total >= KN_EW_PARALLEL_MIN ? kn_rt_threads(ctx->rt) : 1;
  float *scratch = kn_rt_scratch(ctx->rt, (size_t)threads * (size_t)(n_slots > 0 ? n_slots : 1) *
                                              EWF_BLOCK * sizeof(float));
  if (!scratch) {
    free(ints);
    return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for %d scratch slots", (int)n_slots);
  }
  ewf_job j = {.p = p,
               .g = &g,
               .k = kn_ew_get(ctx->rt->isa),
               .qimpl = kn_qgemm_impl_for(ctx->rt->isa, ctx->rt->features),
               .in = in,
               .y = y->data,
               .scratch = scratch,
               .slot = ints,
               .n_slots = n_slots,
               .nb = (g.len + EWF_BLOCK - 1) / EWF_BLOCK,
               .tasks = threads};
  j.blocks = g.rows * j.nb;
  if (threads == 1) ewf_task(&j, 0, 0);
  else kn_pool_for(ctx->rt->pool, threads, ewf_task, &j);
  free(ints);
  return KN_OK;
}

/* Chains are float32 throughout: always the vectorised interpreter. */
static int32_t ew_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)g;
  (void)n;
  (void)isa;
  return KN_TACTIC_eltwise;
}

static kn_status ew_fast(kn_op_ctx *ctx) {
  if (ctx->node->tactic != KN_TACTIC_eltwise) return ctx->node->op->run(ctx);
  kn_ewchain_prog p;
  kn_status st = kn_ewchain_read_prog(ctx, &p);
  if (st) return st;
  kn_tensor *y = kn_out_ready(ctx, 0);
  if (!y) return KN_ERR_INTERNAL;
  if (kn_tensor_numel(y) == 0) return KN_OK;
  st = ew_run_fast(ctx, &p, y);
  return st != KN_ERR_UNSUPPORTED ? st : ctx->node->op->run(ctx);
}

const kn_op_tactics kn_tactics_ewchain[] = {
    {KN_DOMAIN, "ElementwiseChain", .select = ew_select, .run = ew_fast},
    KN_TACTICS_END,
};
