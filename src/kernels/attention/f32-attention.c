/*
 * Streamed attention: the portable driver (tiling, online softmax, threads)
 * and the portable micro-kernels.  See attention.h for the contract.
 */
#include "attention-kernels.h"

#include <math.h>
#include <string.h>

/* ---- the exp approximation ------------------------------------------------
 * Cephes' expf: x = n ln2 + r with n = floor(x log2(e) + 1/2), |r| <=
 * ln2 / 2, ln2 split in two (C1 exact in 9 bits, so n C1 is exact for |n| <
 * 2^15), exp(r) = 1 + r + r^2 P(r) with a degree-5 minimax P, and 2^n put
 * in the exponent bits.  Measured by tests/unit/test_attention_kernel.c
 * against double exp on every 251st float in [-87.33, 0] (the range
 * attention uses): at most 0.95 ulp here, 1.22 ulp in the FMA versions
 * (AVX2, AVX-512; the test allows 2).  Below -87.3365 (exp < FLT_MIN) it returns 0;
 * above 88.376 it saturates at exp(88.376) (n must stay <= 127). */
#define EXP_LO (-87.33654475f)
#define EXP_HI 88.37626266f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_C1 0.693359375f
#define EXP_C2 (-2.12194440e-4f)
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

float kn_attention_expf(float x) {
  if (x != x) return x;
  if (x < EXP_LO) return 0.0f;
  if (x > EXP_HI) x = EXP_HI;
  float n = floorf(x * EXP_LOG2E + 0.5f);
  float r = x - n * EXP_C1;
  r = r - n * EXP_C2;
  float p = EXP_P0;
  p = p * r + EXP_P1;
  p = p * r + EXP_P2;
  p = p * r + EXP_P3;
  p = p * r + EXP_P4;
  p = p * r + EXP_P5;
  p = p * (r * r) + r + 1.0f;
  union {
    uint32_t u;
    float f;
  } two = {.u = (uint32_t)((int32_t)n + 127) << 23};
  return p * two.f;
}

/* ---- portable micro-kernels ---------------------------------------------- */

/* Row by row, the inner loop over n contiguous in B and C (the compiler
 * vectorises it for the baseline ISA). */
static void gemm_portable(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                          const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; i++) {
    float *restrict ci = c + i * ldc;
    const float *ai = a + i * lda;
    if (!accumulate)
      for (int64_t j = 0; j < n; j++) ci[j] = 0.0f;
    for (int64_t p = 0; p < k; p++) {
      float x = ai[p];
      const float *restrict bp = b + p * ldb;
      for (int64_t j = 0; j < n; j++) ci[j] += x * bp[j];
    }
  }
}

static float scale_mask_max_portable(float *s, int64_t n, float scale, const float *mask,
                                     int64_t m_sj) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; j++) {
    float x = s[j] * scale;
    if (mask) x += mask[j * m_sj];
    s[j] = x;
    if (x > mx) mx = x;
  }
  return mx;
}

static float exp_sum_portable(float *s, int64_t n, float m) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; j++) {
    float p = kn_attention_expf(s[j] - m);
    s[j] = p;
    sum += p;
  }
  return sum;
}

static void rescale_portable(float *y, int64_t n, float c) {
  for (int64_t i = 0; i < n; i++) y[i] *= c;
}

void kn_f32_attention_pack_kt_portable(float *kt, const float *k, int64_t k_sj, int64_t k_sd,
                                       int64_t cols, int64_t dk) {
  if (k_sd == 1) {
    for (int64_t c = 0; c < cols; c++)
      for (int64_t d = 0; d < dk; d++) kt[d * KN_ATT_KB + c] = k[c * k_sj + d];
  } else {
    for (int64_t d = 0; d < dk; d++)
      for (int64_t c = 0; c < cols; c++) kt[d * KN_ATT_KB + c] = k[c * k_sj + d * k_sd];
  }
}

static const kn_f32_attention_ukernels ukernels_portable = {
    gemm_portable, scale_mask_max_portable, exp_sum_portable, rescale_portable,
    kn_f32_attention_pack_kt_portable};

const kn_bf16_attention_ukernels *kn_bf16_attention_ukernels_for(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return &kn_bf16_attention_ukernels__avx512bf16;
#endif
  (void)isa;
  return NULL;
}

const kn_f32_attention_ukernels *kn_f32_attention_ukernels_for(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return &kn_f32_attention_ukernels__avx512;
  if (isa == KN_ISA_AVX2) return &kn_f32_attention_ukernels__avx2;
#endif
  (void)isa;
  return &ukernels_portable;
}

/* ---- the driver ------------------------------------------------------------ */

static int64_t round64(int64_t n) { return (n + 15) & ~(int64_t)15; }

/* Per-thread scratch, in floats (each part a multiple of 16 floats: 64
 * bytes): the score tile, the accumulators, the running max and sum, the
 * head's keys packed tile by tile as Dk x KB (each tile contiguous: 64
 * rows of 256 bytes, where strided rows of a long sequence would fall into
 * a few L1 sets and evict each other), and its values with contiguous rows
 * when they are not already.  A bf16 step adds its rounded query tile
 * (qr: bf16 pairs on vdpbf16ps, else rounded floats), and on vdpbf16ps
 * the weights tile (ph), the keys (kh: per key tile, Dk/2 rows of KB
 * pairs) and the values (vh: per key tile, KB/2 rows of Dv pairs) as bf16
 * pairs; without it the values are always copied (to round them). */
typedef struct att_scratch_layout {
  int64_t s, acc, mx, sum, kt, vp, qr, ph, kh, vh, total;
} att_scratch_layout;

/* bf16 products on vdpbf16ps (bf16_dot promises an AVX-512 run on a CPU
 * with AVX512_BF16; a build without the kernel rounds instead) */
static bool native_bf16(const kn_f32_attention_args *a) {
  return a->bf16 && a->bf16_dot && kn_bf16_attention_ukernels_for(KN_ISA_AVX512) != NULL;
}

static bool values_packed(const kn_f32_attention_args *a) {
  if (a->bf16 && !a->bf16_dot) return a->sk > 0; /* rounded copies */
  return !native_bf16(a) && a->v_sj != a->dv && a->sk > 1;
}

static int64_t even(int64_t n) { return (n + 1) & ~(int64_t)1; }

int64_t kn_f32_attention_query_rows(int64_t dk, int64_t dv, const kn_caches *caches) {
  int64_t l1 = (int64_t)kn_caches_or_common(caches).l1d / (int64_t)sizeof(float);
  dk = dk > 0 ? dk : 1;
  dv = dv > 0 ? dv : 1;
  int64_t qb = (l1 - KN_ATT_KB * (dk + dv)) / (KN_ATT_KB + dv) / 8 * 8;
  return qb < KN_ATT_QB_MIN ? KN_ATT_QB_MIN : qb > KN_ATT_QB_MAX ? KN_ATT_QB_MAX : qb;
}

static att_scratch_layout scratch_layout(const kn_f32_attention_args *a) {
  att_scratch_layout l;
  int64_t qb = kn_f32_attention_query_rows(a->dk, a->dv, a->caches);
  l.s = 0;
  l.acc = l.s + round64(qb * KN_ATT_KB);
  l.mx = l.acc + round64(qb * (a->dv > 0 ? a->dv : 1));
  l.sum = l.mx + round64(qb);
  l.kt = l.sum + round64(qb);
  int64_t tiles = (a->sk + KN_ATT_KB - 1) / KN_ATT_KB;
  l.vp = l.kt + round64(tiles * KN_ATT_KB * (a->dk > 0 ? a->dk : 1));
  l.qr = l.vp + (values_packed(a) ? round64(a->sk * a->dv) : 0);
  /* halves counted in floats: two a float */
  int64_t dk2 = even(a->dk > 0 ? a->dk : 1);
  l.ph = l.qr + (native_bf16(a) ? round64(qb * dk2 / 2) : a->bf16 ? round64(qb * dk2) : 0);
  l.kh = l.ph + (native_bf16(a) ? round64(qb * KN_ATT_KB / 2) : 0);
  l.vh = l.kh + (native_bf16(a) ? round64(tiles * KN_ATT_KB * dk2 / 2) : 0);
  l.total = l.vh + (native_bf16(a) ? round64(tiles * KN_ATT_KB * (a->dv > 0 ? a->dv : 1) / 2)
                                   : 0);
  return l;
}

size_t kn_f32_attention_scratch(const kn_f32_attention_args *a, int32_t threads) {
  return (size_t)scratch_layout(a).total * sizeof(float) * (size_t)(threads > 0 ? threads : 1);
}

typedef struct att_job {
  const kn_f32_attention_args *a;
  const kn_f32_attention_ukernels *uk;
  const kn_bf16_attention_ukernels *bk; /* non-NULL: the bf16 products on it */
  float *scratch;
  att_scratch_layout l;
  int64_t qb;          /* query rows per tile */
  int64_t chunks;      /* query chunks per (batch, head) */
  int64_t chunk_tiles; /* query tiles per chunk */
} att_job;

static float round_bf16(float x) { return kn_bf16_to_f32(kn_f32_to_bf16(x)); }

/* One tile of `rows` query rows against every key.  q: the query rows
 * (row stride q_si); for a bf16 step on vdpbf16ps, qh holds them as bf16
 * pairs (row stride even(Dk)) and kh, vh the head's keys and values. */
static void att_tile(const att_job *job, float *ws, const float *q, int64_t q_si,
                     const float *kt, const float *v, int64_t v_sj, const float *mask,
                     float *out, int64_t rows) {
  const kn_f32_attention_args *a = job->a;
  const kn_f32_attention_ukernels *uk = job->uk;
  float *s = ws + job->l.s, *acc = ws + job->l.acc, *mx = ws + job->l.mx,
        *sum = ws + job->l.sum;
  int64_t Dk = a->dk, Dv = a->dv, Sk = a->sk, dk2 = even(Dk);
  const uint16_t *qh = (const uint16_t *)(ws + job->l.qr), *kh = (const uint16_t *)(ws + job->l.kh),
                 *vh = (const uint16_t *)(ws + job->l.vh);
  uint16_t *ph = (uint16_t *)(ws + job->l.ph);
  for (int64_t r = 0; r < rows; r++) {
    mx[r] = -INFINITY;
    sum[r] = 0.0f;
  }
  if (Sk == 0) memset(acc, 0, (size_t)(rows * Dv) * sizeof *acc);
  for (int64_t j0 = 0; j0 < Sk; j0 += KN_ATT_KB) {
    int64_t cols = Sk - j0 < KN_ATT_KB ? Sk - j0 : KN_ATT_KB;
    if (job->bk)
      job->bk->gemm(rows, cols, dk2 / 2, qh, dk2, kh + j0 * dk2, 2 * KN_ATT_KB, s, KN_ATT_KB,
                 false);
    else
      uk->gemm(rows, cols, Dk, q, q_si, kt + j0 * Dk, KN_ATT_KB, s, KN_ATT_KB, false);
    for (int64_t r = 0; r < rows; r++) {
      float *sr = s + r * KN_ATT_KB;
      const float *mr = mask ? mask + r * a->m_si + j0 * a->m_sj : NULL;
      float bmax = uk->scale_mask_max(sr, cols, a->scale, mr, a->m_sj);
      float mnew = bmax > mx[r] ? bmax : mx[r];
      if (mnew == -INFINITY) {
        /* every score so far -inf: weights 0 (the row ends 0/0 = NaN) */
        memset(sr, 0, (size_t)cols * sizeof *sr);
      } else {
        if (j0 > 0 && mnew != mx[r]) {
          float corr = mx[r] == -INFINITY ? 0.0f : expf(mx[r] - mnew);
          sum[r] *= corr;
          uk->rescale(acc + r * Dv, Dv, corr);
        }
        sum[r] += uk->exp_sum(sr, cols, mnew);
      }
      mx[r] = mnew;
      /* a bf16 step multiplies the weights rounded (their sum stays fp32) */
      if (job->bk) {
        uint16_t *pr = ph + r * KN_ATT_KB;
        job->bk->convert(pr, sr, cols);
        if (cols & 1) pr[cols] = 0;
      } else if (a->bf16) {
        for (int64_t j = 0; j < cols; j++) sr[j] = round_bf16(sr[j]);
      }
    }
    if (job->bk)
      job->bk->gemm(rows, Dv, even(cols) / 2, ph, KN_ATT_KB, vh + j0 * Dv, 2 * Dv, acc, Dv, j0 > 0);
    else
      uk->gemm(rows, Dv, cols, s, KN_ATT_KB, v + j0 * v_sj, v_sj, acc, Dv, j0 > 0);
  }
  for (int64_t r = 0; r < rows; r++) {
    float *o = out + r * a->o_si;
    const float *ar = acc + r * Dv;
    /* x / sum as the reference divides (a row of all -inf scores: 0/0) */
    for (int64_t e = 0; e < Dv; e++) o[e] = ar[e] / sum[r];
  }
}

static void att_task(void *arg, int64_t task, int32_t thread) {
  const att_job *job = arg;
  const kn_f32_attention_args *a = job->a;
  float *ws = job->scratch + (int64_t)thread * job->l.total;
  int64_t chunk = task % job->chunks, bh = task / job->chunks;
  int64_t h = bh % a->heads, b = bh / a->heads;
  int64_t i0 = chunk * job->chunk_tiles * job->qb;
  int64_t i1 = i0 + job->chunk_tiles * job->qb;
  if (i1 > a->sq) i1 = a->sq;
  if (i0 >= i1) return;
  /* the head's keys as Dk x KB tiles, its values as contiguous rows */
  const float *k = a->k + b * a->k_sb + h * a->k_sh;
  float *kt = ws + job->l.kt;
  int64_t Dk = a->dk, Dv = a->dv, dk2 = even(Dk);
  for (int64_t j0 = 0; j0 < a->sk; j0 += KN_ATT_KB) {
    int64_t cols = a->sk - j0 < KN_ATT_KB ? a->sk - j0 : KN_ATT_KB;
    float *t = kt + j0 * Dk;
    job->uk->pack_kt(t, k + j0 * a->k_sj, a->k_sj, a->k_sd, cols, Dk);
    if (job->bk) {
      /* Dk/2 rows of KB pairs (d = 2p, 2p + 1) per key tile */
      uint16_t *kh = (uint16_t *)(ws + job->l.kh) + j0 * dk2;
      if (cols < KN_ATT_KB) /* the last tile: columns past it are 0 */
        for (int64_t d = 0; d < Dk; d++)
          memset(t + d * KN_ATT_KB + cols, 0, (size_t)(KN_ATT_KB - cols) * sizeof *t);
      for (int64_t p = 0; p < dk2 / 2; p++)
        job->bk->interleave(kh + p * 2 * KN_ATT_KB, t + 2 * p * KN_ATT_KB,
                            2 * p + 1 < Dk ? t + (2 * p + 1) * KN_ATT_KB : NULL, KN_ATT_KB);
    } else if (a->bf16) {
      for (int64_t d = 0; d < Dk; d++)
        for (int64_t c = 0; c < cols; c++) t[d * KN_ATT_KB + c] = round_bf16(t[d * KN_ATT_KB + c]);
    }
  }
  const float *v = a->v + b * a->v_sb + h * a->v_sh;
  int64_t v_sj = a->v_sj;
  if (job->bk) {
    /* per key tile, KB/2 rows of Dv pairs (keys j = 2p, 2p + 1) */
    uint16_t *vh = (uint16_t *)(ws + job->l.vh);
    for (int64_t j0 = 0; j0 < a->sk; j0 += KN_ATT_KB) {
      int64_t cols = a->sk - j0 < KN_ATT_KB ? a->sk - j0 : KN_ATT_KB;
      uint16_t *t = vh + j0 * Dv;
      for (int64_t p = 0; p < even(cols) / 2; p++)
        job->bk->interleave(t + p * 2 * Dv, v + (j0 + 2 * p) * v_sj,
                            2 * p + 1 < cols ? v + (j0 + 2 * p + 1) * v_sj : NULL, Dv);
    }
  } else if (values_packed(a)) {
    float *vp = ws + job->l.vp;
    for (int64_t j = 0; j < a->sk; j++) {
      memcpy(vp + j * Dv, v + j * a->v_sj, (size_t)Dv * sizeof *vp);
      if (a->bf16)
        for (int64_t f = 0; f < Dv; f++) vp[j * Dv + f] = round_bf16(vp[j * Dv + f]);
    }
    v = vp;
    v_sj = Dv;
  }
  for (int64_t i = i0; i < i1; i += job->qb) {
    int64_t rows = i1 - i < job->qb ? i1 - i : job->qb;
    const float *q = a->q + b * a->q_sb + h * a->q_sh + i * a->q_si;
    int64_t q_si = a->q_si;
    if (job->bk) {
      uint16_t *qh = (uint16_t *)(ws + job->l.qr);
      for (int64_t r = 0; r < rows; r++) {
        job->bk->convert(qh + r * dk2, q + r * q_si, Dk);
        if (Dk & 1) qh[r * dk2 + Dk] = 0;
      }
    } else if (a->bf16) {
      float *qr = ws + job->l.qr;
      for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < Dk; d++) qr[r * Dk + d] = round_bf16(q[r * q_si + d]);
      q = qr;
      q_si = Dk;
    }
    const float *mask =
        a->mask ? a->mask + b * a->m_sb + h * a->m_sh + i * a->m_si : NULL;
    float *out = a->out + b * a->o_sb + h * a->o_sh + i * a->o_si;
    att_tile(job, ws, q, q_si, kt, v, v_sj, mask, out, rows);
  }
}

void kn_f32_attention(kn_isa isa, kn_pool *pool, const kn_f32_attention_args *a,
                      void *scratch) {
  KN_ASSERT(a->q && a->k && a->v && a->out && scratch);
  KN_ASSERT(a->k_sd == 1 || a->k_sj == 1 || a->sk <= 1);
  KN_ASSERT(!a->mask || a->m_sj == 0 || a->m_sj == 1);
  int64_t bh = a->batch * a->heads;
  if (bh == 0 || a->sq == 0 || a->dv == 0) return;
  int64_t qb = kn_f32_attention_query_rows(a->dk, a->dv, a->caches);
  int64_t tiles = (a->sq + qb - 1) / qb;
  /* Split a head's query tiles only as far as the threads need to share
   * the work evenly (each chunk packs the head's keys and values again):
   * the fewest chunks per head that make the task count a multiple of the
   * threads (2 heads on 2 threads: one head each, packed once), at most
   * about 4 tasks per thread.  A row's arithmetic does not depend on the
   * split: results are the same for any thread count. */
  int32_t threads = kn_pool_threads(pool);
  int64_t chunks = 1;
  if (threads > 1) {
    int64_t most = (4 * (int64_t)threads + bh - 1) / bh;
    if (most > tiles) most = tiles;
    while (chunks < most && (bh * chunks) % threads) chunks++;
  }
  KN_ASSERT(!native_bf16(a) || isa == KN_ISA_AVX512);
  att_job job = {
      .a = a,
      .uk = kn_f32_attention_ukernels_for(isa),
      .bk = native_bf16(a) ? kn_bf16_attention_ukernels_for(isa) : NULL,
      .scratch = scratch,
      .l = scratch_layout(a),
      .qb = qb,
      .chunks = chunks,
      .chunk_tiles = (tiles + chunks - 1) / chunks,
  };
  kn_pool_for(pool, bh * chunks, att_task, &job);
}
