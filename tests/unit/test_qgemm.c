/* The int8 GEMM family (src/kernels/qgemm): kn_qgemm against a plain loop
 * (int64 sums, exact, then the epilogue in double) for every implementation
 * this machine has (the others are skipped, saying so), over sampled shapes
 * (1, primes, tails of every vector width, k not a multiple of 4, m = 1,
 * sizes that cross cache blocks and thread tiles), A as u8, fp32 quantized
 * on the fly or prepacked, B plain or transposed, zero points 0, 128 and
 * 255, extreme values (u8 255 against s8 -128 and 127 everywhere: any
 * saturation shows), every epilogue kind, fp32 and requantized u8 output,
 * tiny cache blocks; 1 and 2 threads must agree bit for bit, and outputs
 * start as NaN (u8: 0x00 on one run, 0xff on the other) so that an
 * element left unwritten fails.  With unit scales and no epilogue the
 * fp32 output is the exact integer result, compared bit for bit.  Then the
 * quantizers against their scalar definition. */
#include "testkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/qgemm/qgemm.h"

typedef struct qcase {
  int64_t m, n, k;
  bool tb;       /* B stored n x k */
  int amode;     /* 0 u8 raw, 1 fp32 raw, 2 packed u8, 3 quantize-packed */
  int32_t za;
  int extreme;   /* 0 random, 1 A 255 B -128, 2 A 255 B 127, 3 A 0 B -128 */
  bool unit;     /* unit scales, no epilogue: the exact integers */
  int bias;      /* 0 none, 1 per column, 2 per row */
  int res;       /* 0 none, 1 after the activation, 2 before */
  kn_act act;
  bool u8out;
  int tiny;      /* 0 default blocking, 1 and 2 tiny ones */
  int64_t pad;   /* extra leading-dimension elements */
} qcase;

static void *xalloc(size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  assert_non_null(p);
  return p;
}

static uint32_t next(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static double act_ref(const kn_act_params *a, double x) {
  if (a->act == KN_ACT_GELU_TANH)
    return 0.5 * x * (1 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  return tk_act_ref(a, x);
}

static uint8_t quant_ref(float x, float scale, int32_t zero) {
  float t = nearbyintf(x / scale) + (float)zero;
  return t > 0.0f ? (t < 255.0f ? (uint8_t)t : 255) : 0;
}

static void run_case(kn_qgemm_impl impl, const qcase *qc, kn_pool *pool2) {
  const int64_t m = qc->m, n = qc->n, k = qc->k;
  const int64_t lda = k + qc->pad, ldb = (qc->tb ? k : n) + qc->pad, ldc = n + qc->pad;
  uint32_t seed = (uint32_t)(m * 7919 + n * 131 + k * 17 + qc->za + (int64_t)impl);
  uint8_t *a = xalloc((size_t)(m * lda));
  float *af = xalloc((size_t)(m * lda) * sizeof(float));
  int8_t *b = xalloc((size_t)((qc->tb ? n : k) * ldb));
  float *ws = xalloc((size_t)n * sizeof(float));
  float *bias = xalloc((size_t)(m > n ? m : n) * sizeof(float));
  float *res = xalloc((size_t)(m * ldc) * sizeof(float));
  double *ref = xalloc((size_t)(m * n) * sizeof(double));
  int32_t *sref = xalloc((size_t)(m * n) * sizeof(int32_t)); /* the s32 output's */
  const float sa = qc->unit ? 1.0f : 0.02f + 0.001f * (float)(k % 7);
  for (int64_t i = 0; i < m * lda; i++) {
    a[i] = qc->extreme == 3 ? 0 : qc->extreme ? 255 : (uint8_t)next(&seed);
    /* fp32 A whose quantization is a[i] (away from rounding ties) */
    af[i] = sa * ((float)a[i] - (float)qc->za) + sa * 0.25f * tk_pseudo(&seed);
  }
  if (qc->amode == 1 || qc->amode == 3) /* what the kernel will see */
    for (int64_t i = 0; i < m; i++)
      for (int64_t p = 0; p < k; p++) a[i * lda + p] = quant_ref(af[i * lda + p], sa, qc->za);
  for (int64_t i = 0; i < (qc->tb ? n : k) * ldb; i++)
    b[i] = qc->extreme == 2 ? 127 : qc->extreme ? -128 : (int8_t)(next(&seed) & 0xff);
  for (int64_t j = 0; j < n; j++) ws[j] = qc->unit ? 1.0f : 0.005f + 0.0001f * (float)(j % 13);
  for (int64_t i = 0; i < (m > n ? m : n); i++) bias[i] = tk_pseudo(&seed);
  for (int64_t i = 0; i < m * ldc; i++) res[i] = tk_pseudo(&seed);

  kn_epilogue ep;
  memset(&ep, 0, sizeof ep);
  ep.act.act = qc->act;
  ep.act.alpha = 0.1f;
  ep.act.beta = 0.5f;
  ep.act.lo = -0.25f;
  ep.act.hi = 0.5f;
  if (qc->act == KN_ACT_RELU) ep.act.lo = 0.0f, ep.act.hi = INFINITY;
  ep.bias = qc->bias ? bias : NULL;
  ep.bias_per_row = qc->bias == 2;
  ep.res = qc->res ? res : NULL;
  ep.ldr = ldc;
  ep.res_first = qc->res == 2;
  const bool any_ep = qc->bias || qc->res || qc->act != KN_ACT_NONE;

  /* the reference: exact sums, the definition of qgemm.h in double */
  double vmax = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      int64_t acc = 0, cs = 0;
      for (int64_t p = 0; p < k; p++) {
        int64_t bv = qc->tb ? b[j * ldb + p] : b[p * ldb + j];
        acc += (int64_t)a[i * lda + p] * bv;
        cs += bv;
      }
      sref[i * n + j] = (int32_t)(acc - qc->za * cs); /* exact: |.| < 2^31 (qgemm.h) */
      double v = (double)sa * (double)ws[j] * (double)(acc - qc->za * cs);
      if (ep.bias) v += ep.bias_per_row ? bias[i] : bias[j];
      if (ep.res && ep.res_first) v += res[i * ldc + j];
      v = act_ref(&ep.act, v);
      if (ep.res && !ep.res_first) v += res[i * ldc + j];
      ref[i * n + j] = v;
      vmax = fmax(vmax, fabs(v));
    }

  const int32_t mr = kn_qgemm_mr(impl), nr = kn_qgemm_nr(impl);
  void *bp = xalloc(kn_qgemm_pack_b_size(impl, k, n));
  kn_qgemm_pack_b(impl, k, n, b, ldb, qc->tb, ws, bp);
  void *ap = NULL;
  if (qc->amode >= 2) {
    ap = xalloc(kn_qgemm_pack_a_size(impl, m, k));
    if (qc->amode == 2) kn_qgemm_pack_a(impl, m, k, a, lda, ap);
    else kn_qgemm_quantize_pack_a(impl, m, k, af, lda, sa, qc->za, ap);
  }
  kn_qgemm_blocking tiny[3] = {{0, 0, 0}, {16, mr, nr}, {32 + 16 * (k % 2), 2 * mr, 3 * nr}};
  const float ys = 0.02f;
  const int32_t yz = 100;
  kn_qgemm_args g = {.m = m, .n = n, .k = k,
                     .a = qc->amode == 0 ? a : NULL,
                     .a_f32 = qc->amode == 1 ? af : NULL,
                     .lda = lda, .a_packed = ap, .a_scale = sa, .a_zero = qc->za,
                     .b_packed = bp, .ep = any_ep ? &ep : NULL,
                     .y_scale = ys, .y_zero = yz,
                     .blocking = qc->tiny ? &tiny[qc->tiny] : NULL};
  char what[240];
  snprintf(what, sizeof what,
           "%s m%lld n%lld k%lld tb%d a%d za%d extreme %d unit %d bias %d res %d act %s "
           "u8 %d tiny %d pad %lld",
           kn_qgemm_impl_name(impl), (long long)m, (long long)n, (long long)k, qc->tb,
           qc->amode, qc->za, qc->extreme, qc->unit, qc->bias, qc->res, kn_act_name(qc->act),
           qc->u8out, qc->tiny, (long long)qc->pad);

  /* fp32 output on 1 and 2 threads (always: the u8 output is checked
   * against its requantization) */
  float *c[2];
  uint8_t *y[2];
  kn_pool *pools[2] = {NULL, pool2};
  for (int t = 0; t < 2; t++) {
    c[t] = xalloc((size_t)(m * ldc) * sizeof(float));
    y[t] = xalloc((size_t)(m * ldc));
    for (int64_t i = 0; i < m * ldc; i++) c[t][i] = NAN;
    memset(y[t], t ? 0xff : 0x00, (size_t)(m * ldc));
    size_t sz = kn_qgemm_scratch_size(impl, &g, kn_pool_threads(pools[t]));
    g.c = c[t], g.ldc = ldc, g.y = NULL;
    size_t sz2;
    {
      kn_qgemm_args gy = g;
      gy.c = NULL, gy.y = y[t], gy.ldy = ldc;
      sz2 = kn_qgemm_scratch_size(impl, &gy, kn_pool_threads(pools[t]));
    }
    void *scratch = xalloc(sz > sz2 ? sz : sz2);
    kn_qgemm(impl, pools[t], &g, scratch);
    if (qc->u8out) {
      g.c = NULL, g.y = y[t], g.ldy = ldc;
      kn_qgemm(impl, pools[t], &g, scratch);
    }
    free(scratch);
  }
  double tol = 2e-6 * (vmax + 1.0) + 1e-6;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < ldc; j++) {
      float got = c[0][i * ldc + j];
      if (j >= n) {
        if (!isnan(got)) fail_msg("%s: wrote C[%lld][%lld] past n", what, (long long)i, (long long)j);
        continue;
      }
      double want = ref[i * n + j];
      if (qc->unit && !any_ep ? got != (float)want : !(fabs((double)got - want) <= tol))
        fail_msg("%s: C[%lld][%lld] = %.9g, want %.9g", what, (long long)i, (long long)j,
                 (double)got, want);
    }
  if (memcmp(c[0], c[1], (size_t)(m * ldc) * sizeof(float)))
    fail_msg("%s: fp32 output, 2 threads differ from 1", what);
  if (qc->u8out) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < ldc; j++) {
        uint8_t got = y[0][i * ldc + j];
        if (j >= n) {
          if (got != 0x00 || y[1][i * ldc + j] != 0xff)
            fail_msg("%s: wrote Y[%lld][%lld] past n", what, (long long)i, (long long)j);
          continue;
        }
        uint8_t want = quant_ref(c[0][i * ldc + j], ys, yz);
        if (got != want)
          fail_msg("%s: Y[%lld][%lld] = %d, requantized C %d", what, (long long)i,
                   (long long)j, got, want);
        if (got != y[1][i * ldc + j])
          fail_msg("%s: Y[%lld][%lld]: 2 threads %d, 1 thread %d (or unwritten)", what,
                   (long long)i, (long long)j, y[1][i * ldc + j], got);
      }
  }
  /* s32 output (MatMulInteger's): the exact sums, every impl, blocking
   * and thread count alike; nothing written past n (sanitized: 1 thread,
   * unless KILN_LONG_TESTS=1) */
  for (int t = 0; t < (tk_sanitized() && tk_short_sweep() ? 1 : 2); t++) {
    int32_t *so = xalloc((size_t)(m * ldc) * sizeof(int32_t));
    for (int64_t i = 0; i < m * ldc; i++) so[i] = 0x7eadbeef;
    kn_qgemm_args gs = g;
    gs.c = NULL, gs.y = NULL, gs.s = so, gs.lds = ldc;
    void *scratch = xalloc(kn_qgemm_scratch_size(impl, &gs, kn_pool_threads(pools[t])));
    kn_qgemm(impl, pools[t], &gs, scratch);
    free(scratch);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < ldc; j++) {
        int32_t got = so[i * ldc + j], want = j < n ? sref[i * n + j] : 0x7eadbeef;
        if (got != want)
          fail_msg("%s: s32 output, %d thread(s): S[%lld][%lld] = %d, want %d", what, t + 1,
                   (long long)i, (long long)j, got, want);
      }
    free(so);
  }
  for (int t = 0; t < 2; t++) {
    free(c[t]);
    free(y[t]);
  }
  free(sref);
  free(ap);
  free(bp);
  free(a);
  free(af);
  free(b);
  free(ws);
  free(bias);
  free(res);
  free(ref);
}

static const int64_t ms[] = {1, 2, 3, 5, 6, 7, 13, 14, 15, 17, 28, 29, 31, 64, 97, 127};
static const int64_t ns[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 65, 100};
/* k: tails of the depth group (4) and of the VNNI A chunk (64) */
static const int64_t ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 63, 64, 65, 100, 129, 257, 770};
#define COUNT(a) ((uint32_t)(sizeof a / sizeof a[0]))

static kn_pool *make_pool(void) {
  kn_pool *p = NULL;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &p, &err), KN_OK);
  return p;
}

static void for_each_impl(void (*fn)(kn_qgemm_impl, kn_pool *), kn_pool *pool) {
  uint64_t feat = kn_cpu_features();
  for (int i = 0; i < KN_QGEMM_IMPL_COUNT; i++) {
    if (!kn_qgemm_impl_available((kn_qgemm_impl)i, feat)) {
      printf("    qgemm %s: skipped, this CPU does not have it\n",
             kn_qgemm_impl_name((kn_qgemm_impl)i));
      continue;
    }
    fn((kn_qgemm_impl)i, pool);
  }
}

static void sampled(kn_qgemm_impl impl, kn_pool *pool) {
  static const int32_t zs[] = {0, 128, 255, 3};
  uint32_t s = 12345;
  for (int i = 0; i < 260; i++) {
    qcase qc;
    memset(&qc, 0, sizeof qc);
    qc.m = ms[next(&s) % COUNT(ms)];
    qc.n = ns[next(&s) % COUNT(ns)];
    qc.k = ks[next(&s) % COUNT(ks)];
    qc.tb = next(&s) % 2;
    qc.amode = i % 4;
    qc.za = zs[(i / 4) % 4];
    qc.unit = i % 9 == 0;
    if (!qc.unit) {
      qc.bias = (int)(next(&s) % 3);
      qc.res = (int)(next(&s) % 3);
      qc.act = (kn_act)(i % KN_ACT_COUNT);
      qc.u8out = i % 3 == 1;
    }
    qc.tiny = (int)(next(&s) % 3);
    qc.pad = i % 5 == 0 ? 3 : 0;
    run_case(impl, &qc, pool);
  }
}

/* Large enough to cross k passes, row and column blocks and thread tiles
 * with the default blocking; m = 1 and thin m with long k (one pass);
 * extreme values everywhere. */
static void big(kn_qgemm_impl impl, kn_pool *pool) {
  const qcase cases[] = {
      {.m = 150, .n = 300, .k = 1601, .amode = 0, .za = 128, .bias = 1, .act = KN_ACT_RELU},
      {.m = 150, .n = 300, .k = 1601, .amode = 3, .za = 7, .unit = true},
      {.m = 131, .n = 77, .k = 2053, .amode = 1, .za = 255, .tb = true, .act = KN_ACT_GELU,
       .u8out = true},
      {.m = 1, .n = 1000, .k = 2051, .amode = 0, .za = 128, .bias = 1},
      {.m = 1, .n = 333, .k = 3001, .amode = 2, .za = 0, .unit = true},
      {.m = 3, .n = 129, .k = 999, .amode = 1, .za = 128, .res = 1, .act = KN_ACT_TANH},
      {.m = 70, .n = 90, .k = 4099, .amode = 0, .za = 0, .extreme = 1, .unit = true},
      {.m = 70, .n = 90, .k = 4099, .amode = 2, .za = 255, .extreme = 1, .unit = true},
      {.m = 20, .n = 40, .k = 4100, .amode = 0, .za = 0, .extreme = 2, .unit = true},
      {.m = 20, .n = 40, .k = 4097, .amode = 0, .za = 255, .extreme = 3, .unit = true},
      {.m = 33, .n = 65, .k = 1003, .amode = 0, .za = 128, .extreme = 1, .tiny = 1,
       .u8out = true, .bias = 1},
      {.m = 1, .n = 100, .k = 5000, .amode = 0, .za = 0, .extreme = 1, .unit = true},
      /* two k passes with the VNNI kc and more columns than one block of
       * partial sums holds; A packed (chunks) read from a later pass */
      {.m = 30, .n = 700, .k = 4111, .amode = 1, .za = 5, .bias = 1},
      {.m = 29, .n = 65, .k = 4111, .amode = 3, .za = 200, .unit = true},
      {.m = 128, .n = 64, .k = 577, .amode = 0, .za = 128, .res = 2},
  };
  for (uint32_t i = 0; i < COUNT(cases); i++) run_case(impl, &cases[i], pool);
}

static void test_qgemm_sampled(void **state) {
  (void)state;
  kn_pool *pool = make_pool();
  for_each_impl(sampled, pool);
  kn_pool_free(pool);
}

static void test_qgemm_big(void **state) {
  (void)state;
  kn_pool *pool = make_pool();
  for_each_impl(big, pool);
  kn_pool_free(pool);
}

/* The quantizers: every impl against the scalar definition on ties, NaN,
 * infinities, out-of-range and random values; packing from fp32 against
 * packing the quantized u8. */
static void quantizers(kn_qgemm_impl impl, kn_pool *pool) {
  (void)pool;
  enum { N = 301 };
  float x[N];
  uint8_t y[N + 1];
  const float special[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 127.5f, 128.5f, -128.5f, 1e30f,
                           -1e30f, INFINITY, -INFINITY, NAN, -0.0f, 1e-40f, 254.49f, 300.0f};
  uint32_t s = 7;
  for (int i = 0; i < N; i++)
    x[i] = i < (int)COUNT(special) ? special[i] : 200.0f * tk_pseudo(&s);
  const float scales[] = {1.0f, 0.5f, 0.037f};
  const int32_t zeros[] = {0, 128, 255};
  for (int si = 0; si < 3; si++)
    for (int zi = 0; zi < 3; zi++)
      for (int64_t len = 0; len <= N; len += len < 40 ? 1 : 37) {
        y[len] = 0xa5;
        kn_qgemm_quantize(impl, 1, len, x, len, scales[si], zeros[zi], y, len);
        for (int64_t j = 0; j < len; j++)
          if (y[j] != quant_ref(x[j], scales[si], zeros[zi]))
            fail_msg("%s quantize x %.9g scale %g zero %d: %d, want %d",
                     kn_qgemm_impl_name(impl), (double)x[j], (double)scales[si], zeros[zi],
                     y[j], quant_ref(x[j], scales[si], zeros[zi]));
        if (y[len] != 0xa5) fail_msg("%s quantize wrote past n = %lld", kn_qgemm_impl_name(impl), (long long)len);
      }
  /* the range with 0 (DynamicQuantizeLinear's): the scalar definition,
   * NaNs left out, on every length, at every offset of the specials and on
   * all-negative, all-positive and all-NaN runs */
  {
    float v[N];
    for (int pass = 0; pass < 4; pass++)
      for (int64_t len = 0; len <= N; len += len < 70 ? 1 : 29) {
        for (int64_t j = 0; j < len; j++) {
          float r = 200.0f * tk_pseudo(&s);
          v[j] = pass == 0   ? x[(j * 7 + len) % N]
                 : pass == 1 ? -fabsf(r) - 1.0f
                 : pass == 2 ? fabsf(r) + 1.0f
                             : NAN;
        }
        float lo = 1, hi = -1, wlo = 0.0f, whi = 0.0f;
        for (int64_t j = 0; j < len; j++) {
          wlo = v[j] < wlo ? v[j] : wlo;
          whi = v[j] > whi ? v[j] : whi;
        }
        kn_qgemm_range(impl, len, v, &lo, &hi);
        if (memcmp(&lo, &wlo, sizeof lo) || memcmp(&hi, &whi, sizeof hi))
          fail_msg("%s range of %lld values (pass %d): [%.9g, %.9g], want [%.9g, %.9g]",
                   kn_qgemm_impl_name(impl), (long long)len, pass, (double)lo, (double)hi,
                   (double)wlo, (double)whi);
      }
  }
  /* quantize-pack == pack(quantize) */
  const int64_t m = 17, k = 263;
  float *xf = xalloc((size_t)(m * k) * sizeof(float));
  uint8_t *q = xalloc((size_t)(m * k));
  for (int64_t i = 0; i < m * k; i++) xf[i] = 300.0f * tk_pseudo(&s);
  kn_qgemm_quantize(impl, m, k, xf, k, 0.7f, 77, q, k);
  size_t sz = kn_qgemm_pack_a_size(impl, m, k);
  uint8_t *p1 = xalloc(sz), *p2 = xalloc(sz);
  memset(p1, 0x11, sz);
  memset(p2, 0x22, sz);
  kn_qgemm_pack_a(impl, m, k, q, k, p1);
  kn_qgemm_quantize_pack_a(impl, m, k, xf, k, 0.7f, 77, p2);
  if (memcmp(p1, p2, sz)) fail_msg("%s: quantize_pack_a differs from pack_a", kn_qgemm_impl_name(impl));
  /* the packed A layout of qgemm.h, element by element (zero padding) */
  {
    const int64_t MR = kn_qgemm_mr(impl), G = kn_qgemm_kgroup(impl), C = kn_qgemm_kchunk(impl);
    const int64_t kg = (k + G - 1) / G, kgp = (kg + C - 1) / C * C;
    const int64_t es = kn_qgemm_impl_isa(impl) == KN_ISA_AVX2 ? 2 : 1;
    assert_int_equal(sz, (size_t)((m + MR - 1) / MR * MR * kgp * G * es));
    for (int64_t i = 0; i < (m + MR - 1) / MR * MR; i++)
      for (int64_t kk = 0; kk < kgp * G; kk++) {
        int64_t p = i / MR, r = i % MR, g = kk / G, t = kk % G;
        size_t at = (size_t)(p * kgp * MR * G + ((g / C) * MR + r) * C * G + (g % C) * G + t);
        int want = i < m && kk < k ? q[i * k + kk] : 0;
        int got = es == 2 ? ((const uint16_t *)(const void *)p1)[at] : p1[at];
        if (got != want)
          fail_msg("%s: packed A row %lld depth %lld = %d, want %d", kn_qgemm_impl_name(impl),
                   (long long)i, (long long)kk, got, want);
      }
  }
  free(xf);
  free(q);
  free(p1);
  free(p2);
}

static void test_qgemm_quantize(void **state) {
  (void)state;
  for_each_impl(quantizers, NULL);
}

/* Dispatch: VNNI only with its cpuid bit and an AVX-512 context. */
static void test_qgemm_dispatch(void **state) {
  (void)state;
  uint64_t avx512 = KN_CPU_BIT(AVX2) | KN_CPU_BIT(FMA) | KN_CPU_BIT(F16C) |
                    KN_CPU_BIT(AVX512F) | KN_CPU_BIT(AVX512BW) | KN_CPU_BIT(AVX512VL) |
                    KN_CPU_BIT(AVX512DQ);
#ifdef KN_HAVE_X86_KERNELS
  assert_int_equal(kn_qgemm_impl_for(KN_ISA_AVX512, avx512), KN_QGEMM_AVX2);
  assert_int_equal(kn_qgemm_impl_for(KN_ISA_AVX512, avx512 | KN_CPU_BIT(AVX512VNNI)),
                   KN_QGEMM_AVX512VNNI);
  assert_int_equal(kn_qgemm_impl_for(KN_ISA_AVX2, avx512 | KN_CPU_BIT(AVX512VNNI)),
                   KN_QGEMM_AVX2);
#endif
  assert_int_equal(kn_qgemm_impl_for(KN_ISA_PORTABLE, avx512 | KN_CPU_BIT(AVX512VNNI)),
                   KN_QGEMM_PORTABLE);
  assert_int_equal(kn_qgemm_impl_for(KN_ISA_AVX2, 0), KN_QGEMM_PORTABLE);
}

/* The blocking and the per-product plan of the int8 family as its own
 * driver chose them before the shared GEMM driver (src/kernels/gemm/
 * driver.c) took over its loops, which must reproduce them exactly (the
 * results do not depend on them, the speed does; test_gemm.c's
 * test_sgemm_plan says how); rows of an implementation whose tile this
 * build lacks are skipped. */
static void test_qgemm_plan(void **state) {
  (void)state;
  static const struct {
    int impl;
    size_t l1, l2, l3;
    int32_t mr, nr;
    int64_t kc, mc, nc;
  } blk[] = {
      {0, 0, 0, 0, 4, 8, 2048, 32, 2048}, {0, 32, 512, 8192, 4, 8, 2048, 32, 1024},
      {0, 48, 1024, 32768, 4, 8, 2048, 32, 2048}, {0, 32, 256, 6144, 4, 8, 2048, 16, 1024},
      {0, 64, 2048, 262144, 4, 8, 2048, 32, 2048}, {0, 16, 128, 1024, 4, 8, 1024, 16, 512},
      {1, 0, 0, 0, 5, 16, 768, 40, 1632}, {1, 32, 512, 8192, 5, 16, 512, 40, 816},
      {1, 48, 1024, 32768, 5, 16, 768, 40, 1632}, {1, 32, 256, 6144, 5, 16, 512, 30, 544},
      {1, 64, 2048, 262144, 5, 16, 1024, 40, 3264}, {1, 16, 128, 1024, 5, 16, 256, 30, 272},
      {2, 0, 0, 0, 14, 32, 3584, 112, 576}, {2, 32, 512, 8192, 14, 32, 1792, 112, 288},
      {2, 48, 1024, 32768, 14, 32, 3584, 112, 576}, {2, 32, 256, 6144, 14, 32, 1472, 56, 288},
      {2, 64, 2048, 262144, 14, 32, 4096, 112, 1152}, {2, 16, 128, 1024, 14, 32, 704, 56, 128},
  };
  for (uint32_t i = 0; i < sizeof blk / sizeof blk[0]; i++) {
    kn_qgemm_impl impl = (kn_qgemm_impl)blk[i].impl;
    if (kn_qgemm_mr(impl) != blk[i].mr || kn_qgemm_nr(impl) != blk[i].nr) continue;
    kn_caches c = {blk[i].l1 << 10, blk[i].l2 << 10, blk[i].l3 << 10};
    kn_qgemm_blocking b = kn_qgemm_blocking_of(impl, &c);
    assert_int_equal(b.kc, blk[i].kc);
    assert_int_equal(b.mc, blk[i].mc);
    assert_int_equal(b.nc, blk[i].nc);
  }
  /* v: 0 u8 A, fp32 C; 1 fp32 A, u8 C; 2 prepacked A, s32 C; 3 u8 A and
   * C; leading dimensions 4096 */
  static const struct {
    int impl, v;
    int64_t m, n, k;
    size_t s1, s3;
  } sc[] = {
      {0, 0, 1, 1000, 2048, 8384, 25152}, {0, 1, 1, 1000, 2048, 8512, 25536},
      {0, 2, 1, 1000, 2048, 192, 576}, {0, 3, 1, 1000, 2048, 8512, 25536},
      {0, 0, 4, 1024, 256, 1216, 3648}, {0, 1, 4, 1024, 256, 1344, 4032},
      {0, 2, 4, 1024, 256, 192, 576}, {0, 3, 4, 1024, 256, 1344, 4032},
      {0, 0, 128, 768, 768, 24768, 74304}, {0, 1, 128, 768, 768, 24896, 74688},
      {0, 2, 128, 768, 768, 192, 576}, {0, 3, 128, 768, 768, 24896, 74688},
      {0, 0, 300, 64, 576, 18624, 55872}, {0, 1, 300, 64, 576, 18752, 56256},
      {0, 2, 300, 64, 576, 192, 576}, {0, 3, 300, 64, 576, 18752, 56256},
      {0, 0, 49, 2048, 4608, 311360, 934080}, {0, 1, 49, 2048, 4608, 311488, 934464},
      {0, 2, 49, 2048, 4608, 262208, 786624}, {0, 3, 49, 2048, 4608, 311488, 934464},
      {1, 0, 1, 1000, 2048, 20864, 62592}, {1, 1, 1, 1000, 2048, 21184, 63552},
      {1, 2, 1, 1000, 2048, 384, 1152}, {1, 3, 1, 1000, 2048, 21184, 63552},
      {1, 0, 4, 1024, 256, 2944, 8832}, {1, 1, 4, 1024, 256, 3264, 9792},
      {1, 2, 4, 1024, 256, 384, 1152}, {1, 3, 4, 1024, 256, 3264, 9792},
      {1, 0, 128, 768, 768, 61824, 185472}, {1, 1, 128, 768, 768, 62144, 186432},
      {1, 2, 128, 768, 768, 384, 1152}, {1, 3, 128, 768, 768, 62144, 186432},
      {1, 0, 300, 64, 576, 46464, 139392}, {1, 1, 300, 64, 576, 46784, 140352},
      {1, 2, 300, 64, 576, 384, 1152}, {1, 3, 300, 64, 576, 46784, 140352},
      {1, 0, 49, 2048, 4608, 322624, 967872}, {1, 1, 49, 2048, 4608, 322944, 968832},
      {1, 2, 49, 2048, 4608, 261184, 783552}, {1, 3, 49, 2048, 4608, 322944, 968832},
      {2, 0, 1, 1000, 2048, 30528, 91584}, {2, 1, 1, 1000, 2048, 32320, 96960},
      {2, 2, 1, 1000, 2048, 1856, 5568}, {2, 3, 1, 1000, 2048, 32320, 96960},
      {2, 0, 4, 1024, 256, 5440, 16320}, {2, 1, 4, 1024, 256, 7232, 21696},
      {2, 2, 4, 1024, 256, 1856, 5568}, {2, 3, 4, 1024, 256, 7232, 21696},
      {2, 0, 128, 768, 768, 87872, 263616}, {2, 1, 128, 768, 768, 89664, 268992},
      {2, 2, 128, 768, 768, 1856, 5568}, {2, 3, 128, 768, 768, 89664, 268992},
      {2, 0, 300, 64, 576, 66368, 199104}, {2, 1, 300, 64, 576, 68160, 204480},
      {2, 2, 300, 64, 576, 1856, 5568}, {2, 3, 300, 64, 576, 68160, 204480},
      {2, 0, 49, 2048, 4608, 258112, 774336}, {2, 1, 49, 2048, 4608, 259904, 779712},
      {2, 2, 49, 2048, 4608, 129088, 387264}, {2, 3, 49, 2048, 4608, 259904, 779712},
  };
  static const int32_t mr[KN_QGEMM_IMPL_COUNT] = {4, 5, 14}, nr[KN_QGEMM_IMPL_COUNT] = {8, 16, 32};
  float dummy[4] = {0};
  for (uint32_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
    kn_qgemm_impl impl = (kn_qgemm_impl)sc[i].impl;
    int v = sc[i].v;
    if (kn_qgemm_mr(impl) != mr[impl] || kn_qgemm_nr(impl) != nr[impl]) continue;
    kn_qgemm_args g = {.m = sc[i].m, .n = sc[i].n, .k = sc[i].k,
                       .a = v == 0 || v == 3 ? (const uint8_t *)dummy : NULL,
                       .a_f32 = v == 1 ? dummy : NULL, .lda = 4096,
                       .a_packed = v == 2 ? dummy : NULL, .a_scale = 1.0f, .b_packed = dummy,
                       .c = v == 0 ? dummy : NULL, .ldc = 4096,
                       .y = v == 1 || v == 3 ? (uint8_t *)dummy : NULL, .ldy = 4096,
                       .s = v == 2 ? (int32_t *)(void *)dummy : NULL, .lds = 4096};
    assert_int_equal(kn_qgemm_scratch_size(impl, &g, 1), sc[i].s1);
    assert_int_equal(kn_qgemm_scratch_size(impl, &g, 3), sc[i].s3);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_qgemm_dispatch),
      cmocka_unit_test(test_qgemm_plan),
      cmocka_unit_test(test_qgemm_quantize),
      cmocka_unit_test(test_qgemm_sampled),
      cmocka_unit_test(test_qgemm_big),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
