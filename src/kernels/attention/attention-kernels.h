/*
 * Streamed scaled dot-product attention (fp32), the kernel of kiln's fused
 * Attention op (src/ops/attention.c, tactic attention_streamed).
 *
 * For every batch b, head h and query row i:
 *
 *   out[b,h,i,:] = sum_j softmax_j(scale * q[b,h,i,:] . k[b,h,j,:] + mask[b,h,i,j])
 *                  * v[b,h,j,:]
 *
 * Every tensor is given by a base pointer and element strides, so the head
 * layouts exporters write ([B,S,H*D] rows, [B,H,S,D], [B*H,S,D], keys
 * pre-transposed as [B,H,D,S]) and broadcast batch or head dims (stride 0)
 * all run without copies.  The innermost dim of q, v and out (the feature
 * within a head) must be contiguous; k may be either way round (k_sd == 1:
 * rows of keys; k_sj == 1: already [D, S]); each head's keys are packed
 * as Dk x KB tiles and its values, when their rows are strided, copied to
 * contiguous rows, once per task.  The mask's key stride is 0 (one value per row) or 1.
 *
 * Algorithm (Milakov and Gimelshein 2018; Dao et al., FlashAttention 2022):
 * one task per (batch, head, tile of QB query rows) streams over
 * tiles of KN_ATT_KB keys keeping, per row, the running maximum m and sum l
 * of exp(score - m) and a QB x Dv accumulator rescaled by exp(m_old - m_new)
 * when the maximum grows.  The live state is one QB x KB score tile, one
 * packed Dk x KB key tile and the accumulators (about 40 KiB at Dk = Dv =
 * 64: L1-resident), never the Sq x Sk matrix.  Both products (Q.K^T and
 * P.V) are the same small register-blocked GEMM per ISA.
 *
 * A row whose scores are all -inf gives 0/0 = NaN, as Softmax of such a row
 * does (and as the reference kernel does).  Each output element is computed
 * by one task in a fixed order: results do not depend on the thread count.
 */
#ifndef KN_KERNELS_ATTENTION_H
#define KN_KERNELS_ATTENTION_H

#include "kernels/kernels.h"

/* Keys per streamed tile: 4 zmm vectors, the micro-kernels' register
 * width (pack_kt's layout). */
#define KN_ATT_KB 64
/* Query rows per tile come from the L1 (kn_f32_attention_query_rows): the
 * score tile (QB x KB) and the accumulators (QB x Dv) stay in L1 next to
 * the key and value tiles (Dk x KB and KB x Dv) they meet, while the
 * query rows stream from L2 once per key tile.  On Zen 5's 48 KiB at
 * Dk = Dv = 64 that is 32 rows (8 + 8 + 16 + 16 KiB), which also gives
 * BERT at batch 1 (Sq = 128) 4 tiles per head for the threads to share.
 * A multiple of 8, from 16 (below, the per-tile work is too short for the
 * rescaling and packing around it) to 64. */
#define KN_ATT_QB_MIN 16
#define KN_ATT_QB_MAX 64
int64_t kn_f32_attention_query_rows(int64_t dk, int64_t dv, const kn_caches *caches);

typedef struct kn_f32_attention_args {
  int64_t batch, heads, sq, sk, dk, dv;
  float scale;
  /* strides in elements: batch, head, row (query i / key j), feature */
  const float *q;
  int64_t q_sb, q_sh, q_si; /* feature stride 1 */
  const float *k;
  int64_t k_sb, k_sh, k_sj, k_sd; /* k_sd == 1 or k_sj == 1 */
  const float *v;
  int64_t v_sb, v_sh, v_sj; /* feature stride 1 */
  const float *mask;        /* NULL: none */
  int64_t m_sb, m_sh, m_si, m_sj; /* m_sj 0 or 1 */
  float *out;
  int64_t o_sb, o_sh, o_si; /* feature stride 1 */
  const kn_caches *caches;  /* the query tile's L1 (NULL: the common sizes) */
  /* A bf16 step: q, k, v and the softmax weights are rounded to bf16 (to
   * nearest even) before their products, which are exact in fp32 and
   * summed in fp32 (the running max, the sums and the accumulators stay
   * fp32).  With bf16_dot (AVX512_BF16 present and isa AVX-512) the
   * products run on vdpbf16ps, operands packed as k pairs; otherwise the
   * rounded values go through the fp32 micro-kernels: the same products,
   * summed in another order. */
  bool bf16, bf16_dot;
} kn_f32_attention_args;

/* Scratch bytes kn_f32_attention needs on `threads` threads. */
size_t kn_f32_attention_scratch(const kn_f32_attention_args *a, int32_t threads);

/* Computes a->out (every element) on the pool's threads with the ISA's
 * micro-kernels; scratch holds kn_f32_attention_scratch bytes (64-byte
 * aligned). */
void kn_f32_attention(kn_isa isa, kn_pool *pool, const kn_f32_attention_args *a,
                      void *scratch);

/* ---- per-ISA micro-kernels (the driver above is portable) ---------------- */

typedef struct kn_f32_attention_ukernels {
  /* C[m x n] = A[m x k] . B[k x n] (accumulate: C +=), row-major with row
   * strides lda (may be 0: one row broadcast), ldb, ldc. */
  void (*gemm)(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
               int64_t ldb, float *c, int64_t ldc, bool accumulate);
  /* s[j] = s[j] * scale + mask[j * m_sj] (mask NULL: none; m_sj 0 or 1);
   * returns max_j s[j] (-inf when n == 0 or every s[j] is -inf; NaNs are
   * skipped, as the reference's comparisons skip them). */
  float (*scale_mask_max)(float *s, int64_t n, float scale, const float *mask, int64_t m_sj);
  /* s[j] = exp(s[j] - m) with the ISA's exp approximation; returns the sum. */
  float (*exp_sum)(float *s, int64_t n, float m);
  /* y[e] *= c */
  void (*rescale)(float *y, int64_t n, float c);
  /* kt[d * KN_ATT_KB + c] = k[c * k_sj + d * k_sd] for c < cols, d < dk:
   * one key tile transposed (k_sd == 1: 8x8 register transposes). */
  void (*pack_kt)(float *kt, const float *k, int64_t k_sj, int64_t k_sd, int64_t cols,
                  int64_t dk);
} kn_f32_attention_ukernels;

void kn_f32_attention_pack_kt_portable(float *kt, const float *k, int64_t k_sj, int64_t k_sd,
                                       int64_t cols, int64_t dk);

/* The bf16 products of a bf16 step on vdpbf16ps (NULL where the build
 * has no AVX512_BF16 kernel), and the conversions that feed them, all
 * rounding to nearest even as vcvtneps2bf16 does (fp32 denormals become
 * zero there, as vdpbf16ps treats bf16 ones). */
typedef struct kn_bf16_attention_ukernels {
  /* C[m x n] (+)= A[m x 2 kp] . B[2 kp x n], fp32 C: A row-major in bf16
   * with k pairs contiguous (row stride lda halves, even); B as kp rows of
   * n pairs, b[p * ldb + 2 c + t] = B[2 p + t][c] (ldb halves, even): the
   * layout vdpbf16ps multiplies. */
  void (*gemm)(int64_t m, int64_t n, int64_t kp, const uint16_t *a, int64_t lda,
               const uint16_t *b, int64_t ldb, float *c, int64_t ldc, bool accumulate);
  /* dst[i] = bf16(src[i]) for i < n */
  void (*convert)(uint16_t *dst, const float *src, int64_t n);
  /* dst[2 i] = bf16(r0[i]), dst[2 i + 1] = bf16(r1[i]) (0 when r1 is NULL)
   * for i < n: two rows as one row of pairs */
  void (*interleave)(uint16_t *dst, const float *r0, const float *r1, int64_t n);
} kn_bf16_attention_ukernels;
const kn_bf16_attention_ukernels *kn_bf16_attention_ukernels_for(kn_isa isa);

/* The ISA's micro-kernels (portable ones for an ISA this build lacks). */
const kn_f32_attention_ukernels *kn_f32_attention_ukernels_for(kn_isa isa);

/* The exp approximation the portable micro-kernels use (exported for the
 * error test): for x in [-87.33, 88.72] within 1 ulp of exp(x); 0 below,
 * +inf above, NaN for NaN.  The AVX2 and AVX-512 versions compute the same
 * polynomial (at most 1.3 ulp, measured in test_attention_kernel). */
float kn_attention_expf(float x);

#ifdef KN_HAVE_X86_KERNELS
extern const kn_f32_attention_ukernels kn_f32_attention_ukernels__avx2;
extern const kn_f32_attention_ukernels kn_f32_attention_ukernels__avx512;
void kn_f32_attention_pack_kt__avx2(float *kt, const float *k, int64_t k_sj, int64_t k_sd,
                                    int64_t cols, int64_t dk);
extern const kn_bf16_attention_ukernels kn_bf16_attention_ukernels__avx512bf16;
#endif

#endif
