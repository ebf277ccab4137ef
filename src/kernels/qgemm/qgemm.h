/*
 * int8 GEMM: u8 activations x s8 weights, accumulated exactly in s32,
 * then dequantized to fp32 with kiln's fused epilogue (kernels.h), or
 * requantized to u8 for the next int8 step.
 *
 *   A: m x k u8, per-tensor asymmetric: a_real = a_scale * (A - a_zero)
 *   B: k x n s8, per output channel symmetric: b_real = w_scale[j] * B
 *   acc[i][j] = sum_kk A[i][kk] * B[kk][j]                   (exact, s32)
 *   C[i][j]   = a_scale * w_scale[j] * (acc[i][j] - a_zero * colsum[j])
 *   C         = epilogue(C)            (bias, activation, residual: ep)
 *   Y[i][j]   = clamp(round(C[i][j] / y_scale) + y_zero, 0, 255)   (u8 out)
 *   S[i][j]   = acc[i][j] - a_zero * colsum[j]      (s32 out: MatMulInteger's
 *               result, exact; no scales, no epilogue)
 * with colsum[j] = sum_kk B[kk][j], computed once when B is packed.
 * round() is round-half-to-even (ONNX QuantizeLinear); a NaN quantizes to
 * 0.  The dequantization is fp32: a_scale * w_scale[j] (rounded to fp32)
 * times the s32 difference converted to fp32 (exact below 2^24).
 *
 * Exactness: every s32 sum is exact while k <= KN_QGEMM_K_MAX (255 * 128
 * * 2 * 32768 < 2^31 bounds |acc| and |acc - a_zero * colsum|), so the
 * k blocking, the tiling and the thread split never change a bit: results
 * are identical for any thread count and any blocking (they do depend on
 * the implementation, which only changes the fp32 epilogue's rounding).
 *
 * Implementations (kn_qgemm_impl), chosen once from cpuid:
 *   AVX512VNNI  vpdpbusd on zmm, 14 x 32 register tile, K in groups of 4
 *               (needs AVX-512 F/BW/VL/DQ and VNNI);
 *   AVX2        vpmaddwd on u8 zero-extended to s16 times s8 weights
 *               stored as s16: each s32 lane adds two exact products
 *               (|255 * 128| * 2 < 2^31; vpmaddubsw's s16 saturation is
 *               never reached), 5 x 16 tile, K in groups of 2;
 *   PORTABLE    C, 4 x 8 tile, K in groups of 4.
 *
 * Packed layouts (MR, NR, G = kn_qgemm_mr/nr/kgroup(impl); kg = ceil(k/G);
 * n_pad = n rounded up to NR, m_pad = m rounded up to MR; everything
 * zero-padded past k, m and n):
 *   B (kn_qgemm_pack_b), one relocatable block, 64-byte aligned:
 *     [0, 4 n_pad)          int32 colsum[n_pad]
 *     [4 n_pad, 8 n_pad)    float w_scale[n_pad]
 *     [8 n_pad, ...)        panels of NR columns, panel-major then k:
 *                           element (panel p, group g, column j, t) =
 *                           B[g*G + t][p*NR + j] at index
 *                           ((p*kg + g)*NR + j)*G + t, as s8 (G = 4) or as
 *                           s16 (AVX2, G = 2)
 *   A (kn_qgemm_pack_a, kn_qgemm_quantize_pack_a): panels of MR rows, each
 *     in chunks of C = kn_qgemm_kchunk groups (16 for VNNI, 1 for the
 *     others), row-major within a chunk; kgp = kg rounded up to C:
 *     element (panel p, group g, row r, t) = A[p*MR + r][g*G + t] at index
 *     p*kgp*MR*G + ((g/C)*MR + r)*C*G + (g%C)*G + t, as u8 (G = 4) or as
 *     u16 (AVX2, G = 2).  C = 1 is one group of every row after the other;
 *     C = 16 gives each row 64 contiguous bytes per chunk, which the VNNI
 *     packers copy (or quantize) with whole vectors.
 * For VNNI one s32 lane of a B vector is one column's 4 consecutive k (what
 * vpdpbusd multiplies with a broadcast 4-byte group of one A row); for AVX2
 * one s32 lane is one column's 2 consecutive k as s16 (vpmaddwd).  Neither
 * layout depends on the cache blocking.
 *
 * Threads split C into rectangles of whole register tiles (columns first,
 * rows when there are few column panels); M <= MR (a GEMV, a few tokens)
 * takes the whole k in one pass, A packed once per task, columns split
 * over the threads.
 */
#ifndef KN_QGEMM_H
#define KN_QGEMM_H

#include "kernels/kernels.h"

typedef enum kn_qgemm_impl {
  KN_QGEMM_PORTABLE = 0,
  KN_QGEMM_AVX2 = 1,
  KN_QGEMM_AVX512VNNI = 2,
  KN_QGEMM_IMPL_COUNT
} kn_qgemm_impl;

/* Largest k whose sums are exact in s32 (see above). */
#define KN_QGEMM_K_MAX 32768

/* The best implementation for a context running `isa` on a CPU with
 * `cpu_features` (kn_cpu_features() bits): VNNI only when the feature bit
 * is set and isa is KN_ISA_AVX512; AVX2 for KN_ISA_AVX2 and up. */
kn_qgemm_impl kn_qgemm_impl_for(kn_isa isa, uint64_t cpu_features);
/* Whether this build has `impl` and the CPU can run it. */
bool kn_qgemm_impl_available(kn_qgemm_impl impl, uint64_t cpu_features);
const char *kn_qgemm_impl_name(kn_qgemm_impl impl);
/* The ISA whose fp32 kernels (the epilogue) go with impl. */
kn_isa kn_qgemm_impl_isa(kn_qgemm_impl impl);

int32_t kn_qgemm_mr(kn_qgemm_impl impl);
int32_t kn_qgemm_nr(kn_qgemm_impl impl);
int32_t kn_qgemm_kgroup(kn_qgemm_impl impl);
/* Depth groups per packed A chunk (the A layout below). */
int32_t kn_qgemm_kchunk(kn_qgemm_impl impl);

/* ---- weights (at build time) -------------------------------------------- */

/* Bytes of a packed B (k x n), header included. */
size_t kn_qgemm_pack_b_size(kn_qgemm_impl impl, int64_t k, int64_t n);
/* Pack B (trans: B is stored n x k, as Gemm's transB and conv weights
 * [out channels][in channels * kernel]), its column sums and w_scale
 * (n floats) into dst (kn_qgemm_pack_b_size bytes, 64-byte aligned). */
void kn_qgemm_pack_b(kn_qgemm_impl impl, int64_t k, int64_t n, const int8_t *b, int64_t ldb,
                     bool trans, const float *w_scale, void *dst);

/* ---- activations ---------------------------------------------------------- */

/* y[i][j] = clamp(round(x[i][j] / scale) + zero, 0, 255), m rows of k
 * (row strides ldx, ldy); vectorised, the same bits for every impl. */
void kn_qgemm_quantize(kn_qgemm_impl impl, int64_t m, int64_t k, const float *x, int64_t ldx,
                       float scale, int32_t zero, uint8_t *y, int64_t ldy);
/* The same into s8 codes (zero in [-128, 127]): y[j] = clamp(round(x[j] /
 * scale) + zero, -128, 127), a NaN giving 0 (QuantizeLinear's int8), from
 * the u8 quantizer of zero + 128 moved back by 128. */
void kn_qgemm_quantize_s8(kn_qgemm_impl impl, int64_t n, const float *x, float scale,
                          int32_t zero, int8_t *y);
/* The range of n values with 0 included, NaNs left out: *lo = min(0, x),
 * *hi = max(0, x) (DynamicQuantizeLinear's); vectorised, the same result
 * for every impl. */
void kn_qgemm_range(kn_qgemm_impl impl, int64_t n, const float *x, float *lo, float *hi);
/* Bytes of a packed A (m x k). */
size_t kn_qgemm_pack_a_size(kn_qgemm_impl impl, int64_t m, int64_t k);
/* Pack u8 A (row stride lda) / quantize fp32 x and pack it, into dst
 * (kn_qgemm_pack_a_size bytes). */
void kn_qgemm_pack_a(kn_qgemm_impl impl, int64_t m, int64_t k, const uint8_t *a, int64_t lda,
                     void *dst);
void kn_qgemm_quantize_pack_a(kn_qgemm_impl impl, int64_t m, int64_t k, const float *x,
                              int64_t ldx, float scale, int32_t zero, void *dst);

/* ---- the product ------------------------------------------------------------ */

/* Cache blocking: kc (depth of a pass, a multiple of 16: the B micro-panel
 * kc x NR in about half of L1; for VNNI, whose tile reads few bytes per
 * instruction, the A block and a B micro-panel in half of L2, so most k
 * take one pass), mc (rows of the packed A block and of the s32
 * partial-sum block) and nc (columns per block; mc x nc partial sums and
 * the mc x kc A block share half of L2; with one pass there are no
 * partial sums and every column is one block).  The results do not depend
 * on it. */
typedef struct kn_qgemm_blocking {
  int64_t kc, mc, nc;
} kn_qgemm_blocking;
kn_qgemm_blocking kn_qgemm_blocking_of(kn_qgemm_impl impl, const kn_caches *caches);

typedef struct kn_qgemm_args {
  int64_t m, n, k; /* k <= KN_QGEMM_K_MAX */
  /* A, one of: u8 row-major (a, lda); fp32 row-major quantized while it
   * is packed (a_f32, lda, with a_scale and a_zero); prepacked (a_packed,
   * from kn_qgemm_pack_a or kn_qgemm_quantize_pack_a for the same impl,
   * m and k) */
  const uint8_t *a;
  const float *a_f32;
  int64_t lda;
  const void *a_packed;
  float a_scale;
  int32_t a_zero; /* in [0, 255] */
  const void *b_packed; /* kn_qgemm_pack_b, same impl, k and n */
  /* fp32 output C (c, ldc), u8 output Y (y, ldy, y_scale, y_zero) or s32
   * output S (s, lds: the exact sums, a_scale, w_scale and ep unused):
   * exactly one; overwritten, never read */
  float *c;
  int64_t ldc;
  uint8_t *y;
  int64_t ldy;
  float y_scale;
  int32_t y_zero;
  int32_t *s;
  int64_t lds;
  const kn_epilogue *ep;                /* NULL: none */
  const kn_qgemm_blocking *blocking;    /* NULL: the common cache sizes' */
} kn_qgemm_args;

/* Scratch bytes kn_qgemm needs on `threads` threads (threads times the
 * share of one); depends on sizes, modes and blocking, not on pointers. */
size_t kn_qgemm_scratch_size(kn_qgemm_impl impl, const kn_qgemm_args *g, int32_t threads);
/* Run the product on the pool (NULL: this thread); scratch: at least
 * kn_qgemm_scratch_size bytes, 64-byte aligned. */
void kn_qgemm(kn_qgemm_impl impl, kn_pool *pool, const kn_qgemm_args *g, void *scratch);

#endif
