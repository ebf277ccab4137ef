/* The matrix products (src/ops/matmul.c): what their tactics
 * (src/tactics/gemm) share with the reference ops. */
#ifndef KN_OPS_MATMUL_H
#define KN_OPS_MATMUL_H

#include "op.h"

/* A MatMul's geometry (numpy.matmul): m x k times k x n matrices over the
 * broadcast batch dims. */
typedef struct kn_mm_geom {
  int64_t m, n, k;
  int32_t batch_rank;            /* output batch dims */
  int64_t batch[KN_MAX_RANK];
  int64_t a_bstride[KN_MAX_RANK]; /* in matrices, 0 where broadcast */
  int64_t b_bstride[KN_MAX_RANK];
  int64_t batches;               /* product of batch dims */
  int64_t a_batches, b_batches;  /* matrices held by A and B */
} kn_mm_geom;

/* The geometry of matmul(a, b) (shapes known), checked. */
kn_status kn_matmul_geometry(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b,
                             kn_mm_geom *g) KN_WUR;
/* Matrix indices of A and B for output batch `idx` (row-major). */
static inline void kn_mm_batch_index(const kn_mm_geom *g, int64_t idx, int64_t *ia,
                                     int64_t *ib) {
  int64_t oa = 0, ob = 0;
  for (int32_t d = g->batch_rank - 1; d >= 0; d--) {
    int64_t x = idx % g->batch[d];
    idx /= g->batch[d];
    oa += x * g->a_bstride[d];
    ob += x * g->b_bstride[d];
  }
  *ia = oa;
  *ib = ob;
}

/* Gemm's m, n, k from A, B and transA / transB, checked. */
kn_status kn_gemm_dims(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b, int64_t *m,
                       int64_t *n, int64_t *k) KN_WUR;

/* A zero point / scale that is per tensor (one element), per row of A
 * (m or a_batches*m elements) or per column of B (n or b_batches*n). */
typedef struct kn_mm_qparam {
  const kn_tensor *t;
  int64_t per;   /* 1: per tensor; else elements per matrix (m or n) */
  bool batched;  /* one set per matrix of the operand */
} kn_mm_qparam;

/* MatMulInteger's (and MatMulIntegerToFloat's) geometry and A's and B's
 * zero points (inputs 2 and 3), checked. */
kn_status kn_mmi_geometry(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b,
                          kn_mm_geom *g, kn_mm_qparam *azp, kn_mm_qparam *bzp) KN_WUR;
/* MatMulIntegerToFloat at run time: kn_mmi_geometry and the scales' and
 * bias's sizes checked; *empty when the output has no elements. */
kn_status kn_mmif_begin(kn_op_ctx *ctx, kn_mm_geom *g, kn_mm_qparam *azp, kn_mm_qparam *bzp,
                        bool *empty) KN_WUR;
/* Its output from the exact s32 sums (n columns): (float)sum * (a_scale *
 * b_scale[j]) + bias[j], each product rounded as the chain rounds it. */
void kn_mmif_store(kn_op_ctx *ctx, const int32_t *sums, int64_t n);

#endif
