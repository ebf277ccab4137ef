/*
 * The packed GEMM in reduced precision (gemm_tactic.h): what MatMul, Gemm
 * and FusedGemm run when the builder gave the step a precision other than
 * fp32 (src/builder/step_precision.c).  The ops build their kn_sgemm_args as for
 * fp32 (operands, epilogue, row epilogue) and hand them to kn_gemm_run,
 * which runs the same product on the bf16 / fp16 kernels (src/kernels/
 * hgemm) or the u8 x s8 ones (src/kernels/qgemm), with the same fused
 * epilogue in fp32:
 *
 *   bf16          B rounded to bf16 when packed, A to bf16 as it is packed;
 *   fp16          B in fp16, A rounded to fp16 as it is packed (when the
 *                 kernels can: see hgemm.h), fp32 sums;
 *   fp16-weights  B in fp16, A fp32;
 *   int8-weights  B per output channel s8 with fp32 scales (hgemm's S8W,
 *                 weight-only: a quarter of the weight bytes), A fp32,
 *                 fp32 sums, each output scaled once;
 *   int8          B per output channel s8 (kn_quantize_weights_s8), A
 *                 quantized to u8 with the step's input scale and zero
 *                 point as it is packed, exact s32 sums, dequantized in
 *                 fp32 before the epilogue.
 *
 * Activations between steps stay fp32 in memory: each step converts its
 * input while packing it, which it does anyway, so a reduced-precision
 * region needs no reorder steps.  The price is that activations are not
 * stored in half the bytes (docs/PRECISION.md).
 *
 * Blocks: the kn_gemm_packed header, then (at offset 64) a lowp_ext with
 * the kernel variant, then at b_off the kernels' packed B.  A block that
 * this CPU cannot run (an int8 block packed for VNNI, loaded where there
 * is none) is not used: the op then passes the raw B and it is packed
 * here, per run, into scratch.
 */
#include "gemm_tactic.h"

#include "core/cpu.h"
#include "kernels/hgemm/hgemm.h"
#include "kernels/qgemm/qgemm.h"

#include <math.h>

typedef struct lowp_ext {
  int32_t impl;  /* int8: kn_qgemm_impl; bf16/fp16: kn_hgemm_type */
  int32_t pad;
} lowp_ext;

#define LOWP_EXT_OFF 64
#define LOWP_HEAD 128

static const lowp_ext *ext_of(const kn_gemm_packed *p) {
  return (const lowp_ext *)((const char *)p + LOWP_EXT_OFF);
}

static kn_hgemm_type htype(int32_t precision) {
  return precision == KN_PRECISION_BF16           ? KN_HGEMM_BF16
         : precision == KN_PRECISION_INT8_WEIGHTS ? KN_HGEMM_S8W
                                                  : KN_HGEMM_F16;
}

/* The precisions that run on the hgemm family (fp32 sums of half or
 * weight-only int8 products). */
static bool is_half(int32_t precision) {
  return precision == KN_PRECISION_BF16 || precision == KN_PRECISION_FP16 ||
         precision == KN_PRECISION_FP16_WEIGHTS || precision == KN_PRECISION_INT8_WEIGHTS;
}

/* The variant a context on (isa, features) runs for precision p. */
static int32_t impl_for(int32_t p, kn_isa isa, uint64_t features) {
  return p == KN_PRECISION_INT8 ? (int32_t)kn_qgemm_impl_for(isa, features) : (int32_t)htype(p);
}

/* Bytes after the header of a block for precision p (0: not lowp). */
static size_t data_bytes(int32_t p, kn_isa isa, int32_t impl, int64_t k, int64_t n) {
  if (p == KN_PRECISION_INT8) return kn_qgemm_pack_b_size((kn_qgemm_impl)impl, k, n);
  if (is_half(p)) return kn_hgemm_pack_b_size(isa, (kn_hgemm_type)impl, k, n) * sizeof(uint16_t);
  return 0;
}

size_t kn_gemm_lowp_block_size(int32_t precision, kn_isa isa, uint64_t features, int64_t k,
                               int64_t n) {
  size_t d = data_bytes(precision, isa, impl_for(precision, isa, features), k, n);
  return d ? LOWP_HEAD + d : 0;
}

/* Bytes of temporary s8 weights and scales the int8 packing needs. */
static size_t quant_temp_bytes(int32_t p, int64_t k, int64_t n) {
  if (p != KN_PRECISION_INT8) return 0;
  return ((size_t)(k * n) + 63) / 64 * 64 + ((size_t)n * sizeof(float) + 63) / 64 * 64;
}

/* Fills a block (kn_gemm_lowp_block_size bytes, zeroed, 64-aligned) from
 * op(B) fp32 (k x n; trans: stored n x k).  temp: quant_temp_bytes. */
static void fill_block(kn_gemm_packed *p, const kn_node *n, int32_t precision, kn_isa isa,
                       uint64_t features, int64_t k, int64_t nn, const float *b, int64_t ldb,
                       bool trans, void *temp) {
  int32_t impl = impl_for(precision, isa, features);
  lowp_ext *e = (lowp_ext *)((char *)p + LOWP_EXT_OFF);
  e->impl = impl;
  p->k = k;
  p->n = nn;
  p->b_off = LOWP_HEAD;
  char *dst = (char *)p + LOWP_HEAD;
  if (precision == KN_PRECISION_INT8) {
    int64_t rows = trans ? nn : k, cols = trans ? k : nn;
    int8_t *q = temp;
    float *sc = (float *)((char *)temp + ((size_t)(k * nn) + 63) / 64 * 64);
    KN_ASSERT(ldb == cols); /* B is a whole 2-D constant */
    kn_quantize_weights_s8(b, rows, cols, trans, kn_node_weight_scales(n, nn), q, sc);
    kn_qgemm_pack_b((kn_qgemm_impl)impl, k, nn, q, cols, trans, sc, dst);
  } else {
    kn_hgemm_pack_b(isa, (kn_hgemm_type)impl, k, nn, b, ldb, trans, (uint16_t *)dst);
  }
}

kn_status kn_gemm_lowp_pack(const kn_node *n, const kn_tensor *t, bool trans,
                            const kn_target *target, void **packed, kn_error *err) {
  *packed = NULL;
  int32_t isa = target->isa;
  uint64_t features = kn_cpu_features();
  if (target->machine) features &= target->machine->features;
  int64_t k = trans ? t->dims[1] : t->dims[0], nn = trans ? t->dims[0] : t->dims[1];
  size_t bytes = kn_gemm_lowp_block_size(n->precision, (kn_isa)isa, features, k, nn);
  if (!bytes) return KN_OK;
  kn_gemm_packed *p = kn_packed_alloc(bytes, isa, n->tactic);
  size_t tb = quant_temp_bytes(n->precision, k, nn);
  void *temp = tb ? aligned_alloc(64, tb) : NULL;
  if (!p || (tb && !temp)) {
    kn_packed_free(p);
    free(temp);
    return kn_fail(err, KN_ERR_OOM, "out of memory packing %zu bytes of %s weights", bytes,
                   kn_precision_name(n->precision));
  }
  fill_block(p, n, n->precision, (kn_isa)isa, features, k, nn, t->data, t->dims[1], trans,
             temp);
  free(temp);
  size_t l1, l2, l3;
  kn_target_caches(target, &l1, &l2, &l3);
  p->blocking = n->precision == KN_PRECISION_INT8
                    ? (kn_sgemm_blocking){0, 0, 0}
                    : kn_hgemm_blocking_for((kn_isa)isa, l1, l2, l3);
  if (n->precision == KN_PRECISION_INT8) {
    kn_caches c = {l1, l2, l3};
    kn_qgemm_blocking qb = kn_qgemm_blocking_of((kn_qgemm_impl)ext_of(p)->impl, &c);
    p->blocking = (kn_sgemm_blocking){qb.kc, qb.mc, qb.nc};
  }
  *packed = p;
  return KN_OK;
}

bool kn_gemm_lowp_block_ok(const kn_op_ctx *ctx, const kn_gemm_packed *p) {
  int32_t prec = ctx->node->precision;
  if (!is_half(prec) && prec != KN_PRECISION_INT8) return false;
  return p->b_off == LOWP_HEAD &&
         ext_of(p)->impl == impl_for(prec, ctx->rt->isa, ctx->rt->features);
}

/* ---- running ------------------------------------------------------------ */

/* What the product needs beyond the caller's: a block packed now (when
 * the op had none for this CPU) and, for int8 with alpha != 1, A
 * quantized ahead. */
typedef struct lowp_plan {
  int32_t prec, impl;
  bool pack_now;
  size_t block_bytes, temp_bytes, a_bytes, kernel_bytes;
  kn_hgemm_args h;
  kn_qgemm_args q;
  kn_sgemm_blocking hb;
  kn_qgemm_blocking qb;
} lowp_plan;

static void rows_adapter(void *arg, void *c, int64_t ldc, int64_t r0, int64_t rows, int64_t n) {
  const kn_sgemm_args *g = arg;
  g->rows_done(g->rows_arg, c, ldc, r0, rows, n);
}

static void plan_of(const kn_op_ctx *ctx, const kn_sgemm_args *g, int32_t threads,
                    lowp_plan *pl) {
  const kn_rt *rt = ctx->rt;
  memset(pl, 0, sizeof *pl);
  pl->prec = ctx->node->precision;
  pl->impl = impl_for(pl->prec, rt->isa, rt->features);
  const kn_gemm_packed *pk = ctx->packed;
  pl->pack_now = !(pk && !g->b && pk->k == g->k && pk->n == g->n &&
                   pk->hdr.isa == (int32_t)rt->isa && kn_gemm_lowp_block_ok(ctx, pk));
  if (pl->pack_now) {
    pl->block_bytes = kn_gemm_lowp_block_size(pl->prec, rt->isa, rt->features, g->k, g->n);
    pl->block_bytes = (pl->block_bytes + 63) / 64 * 64;
    pl->temp_bytes = quant_temp_bytes(pl->prec, g->k, g->n);
  }
  if (pl->prec == KN_PRECISION_INT8) {
    float as;
    int32_t az;
    if (!kn_node_input_quant(ctx->node, &as, &az)) as = 1.0f, az = 0;
    pl->qb = pk && !pl->pack_now ? (kn_qgemm_blocking){pk->blocking.kc, pk->blocking.mc,
                                                        pk->blocking.nc}
                                 : kn_qgemm_blocking_of((kn_qgemm_impl)pl->impl, &rt->caches);
    pl->q = (kn_qgemm_args){.m = g->m, .n = g->n, .k = g->k, .a_scale = as, .a_zero = az,
                            .c = g->c, .ldc = g->ldc, .ep = g->ep, .blocking = &pl->qb};
    if (g->alpha != 1.0f) {
      pl->a_bytes = (kn_qgemm_pack_a_size((kn_qgemm_impl)pl->impl, g->m, g->k) + 63) / 64 * 64;
      pl->q.a_packed = (const void *)1; /* sizes only */
      pl->q.a_scale = as * g->alpha;
    } else {
      pl->q.a_f32 = g->a;
      pl->q.lda = g->lda;
    }
    pl->kernel_bytes = kn_qgemm_scratch_size((kn_qgemm_impl)pl->impl, &pl->q, threads);
  } else {
    pl->hb = pk && !pl->pack_now ? pk->blocking : kn_hgemm_blocking_of(rt->isa, &rt->caches);
    pl->h = (kn_hgemm_args){.type = (kn_hgemm_type)pl->impl,
                            .bf16_dot = kn_hgemm_bf16_dot(rt->isa, rt->features),
                            /* fp16 steps multiply fp16-stored activations */
                            .round_a = pl->prec == KN_PRECISION_FP16,
                            .m = g->m, .n = g->n, .k = g->k, .alpha = g->alpha, .a = g->a,
                            .lda = g->lda, .c = g->c, .ldc = g->ldc, .ep = g->ep,
                            .rows_done = g->rows_done ? rows_adapter : NULL,
                            .rows_arg = (void *)g, .blocking = &pl->hb};
    pl->kernel_bytes = kn_hgemm_scratch_size(rt->isa, &pl->h, threads);
  }
}

size_t kn_gemm_lowp_scratch_size(const kn_op_ctx *ctx, const kn_sgemm_args *g, int32_t threads) {
  lowp_plan pl;
  plan_of(ctx, g, threads, &pl);
  return pl.block_bytes + pl.temp_bytes + pl.a_bytes + pl.kernel_bytes;
}

void kn_gemm_lowp_run(kn_op_ctx *ctx, const kn_sgemm_args *g, void *scratch) {
  kn_rt *rt = ctx->rt;
  int32_t threads = kn_rt_threads(rt);
  lowp_plan pl;
  plan_of(ctx, g, threads, &pl);
  char *s = scratch;
  const kn_gemm_packed *pk = ctx->packed;
  if (pl.pack_now) {
    KN_ASSERT(g->b && !g->trans_a);
    kn_gemm_packed *blk = (kn_gemm_packed *)s;
    memset(blk, 0, pl.block_bytes);
    bool trans = g->trans_b;
    fill_block(blk, ctx->node, pl.prec, rt->isa, rt->features, g->k, g->n, g->b, g->ldb, trans,
               s + pl.block_bytes);
    pk = blk;
    s += pl.block_bytes + pl.temp_bytes;
  }
  const void *b = (const char *)pk + pk->b_off;
  if (pl.prec == KN_PRECISION_INT8) {
    pl.q.b_packed = b;
    if (pl.a_bytes) {
      kn_qgemm_quantize_pack_a((kn_qgemm_impl)pl.impl, g->m, g->k, g->a, g->lda,
                               pl.q.a_scale / g->alpha, pl.q.a_zero, s);
      pl.q.a_packed = s;
      s += pl.a_bytes;
    }
    kn_qgemm((kn_qgemm_impl)pl.impl, rt->pool, &pl.q, s);
    /* the u8 kernels have no row callback: the row epilogue after */
    if (g->rows_done) g->rows_done(g->rows_arg, g->c, g->ldc, 0, g->m, g->n);
  } else {
    pl.h.b_packed = b;
    kn_hgemm(rt->isa, rt->pool, &pl.h, s);
  }
}

void kn_gemm_run(kn_op_ctx *ctx, const kn_sgemm_args *g, void *scratch) {
  if (ctx->node->precision == KN_PRECISION_FP32) kn_sgemm(ctx->rt->isa, ctx->rt->pool, g, scratch);
  else kn_gemm_lowp_run(ctx, g, scratch);
}

uint32_t kn_gemm_precisions(const kn_graph *g, const kn_node *n, bool trans_b) {
  if (n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0) return 0;
  const kn_attr *ta = kn_node_attr(n, "transA");
  if (ta && ta->i) return 0;
  const kn_value *b = &g->values[n->inputs[1]];
  const kn_tensor *t = b->constant;
  if (!t || t->dtype != KN_DTYPE_F32 || t->rank != 2 ||
      !kn_gemm_f32_rank(g, n->inputs[0], 1, KN_MAX_RANK))
    return 0;
  uint32_t m = (1u << KN_PRECISION_BF16) | (1u << KN_PRECISION_FP16) |
               (1u << KN_PRECISION_FP16_WEIGHTS) | (1u << KN_PRECISION_INT8_WEIGHTS);
  int64_t k = trans_b ? t->dims[1] : t->dims[0];
  if (k <= KN_QGEMM_K_MAX) m |= 1u << KN_PRECISION_INT8;
  return m;
}
