/* The portable float32 GEMM of the reference kernels (ref-gemm.c): what
 * MatMul, Gemm and the convolutions of src/ops compute with, tactic 0. */
#ifndef KN_REF_GEMM_H
#define KN_REF_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/* C[M,N] (row stride ldc) += alpha * op(A) * op(B), where op(A) is A [M,K]
 * (row stride lda) or, with trans_a, A stored [K,M]; the same for B.
 * Returns false only when the packing scratch cannot be allocated. */
bool kn_f32_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                 int64_t lda, bool trans_a, const float *b, int64_t ldb,
                 bool trans_b, float *c, int64_t ldc);

#endif
