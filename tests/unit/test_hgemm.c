/* The bf16 / fp16 GEMM family (src/kernels/hgemm): kn_hgemm against a
 * double-precision reference on the same rounded inputs (A and B rounded to
 * bf16 / fp16 first, then exact products summed in double), for every ISA
 * this machine has (and vdpbf16ps where the CPU has AVX512_BF16; said when
 * skipped), over sampled shapes (1, primes, every vector width's tails, odd
 * k for the bf16 pairs, GEMV rows, shapes crossing cache blocks and thread
 * tiles), A fp32 or half, C fp32 or half, every epilogue, tiny cache blocks
 * and 1 and 2 threads (bit-identical).  C is pre-filled with NaN so that an
 * unwritten element fails, and the padding past n must stay untouched.
 *
 * Tolerance: each kernel sums the exact products of the rounded inputs in
 * fp32 in some order, so |C - ref| <= (k + 4) * 2^-23 * |alpha| * sum|a*b|
 * (the recursive-summation bound with room for a pair step and alpha),
 * times 1.25 for an activation's slope, plus 1e-5 * (1 + |ref|) for the
 * activations (the portable ones in float on the reference, as
 * test_gemm.c does, against the ISA's approximations).  A half C is checked
 * bit for bit against the reference conversion (kn_f32_to_f16 /
 * kn_f32_to_bf16) of the same run's fp32 C.  The conversions themselves
 * are checked on every fp16 value and on fp32 specials (NaN, Inf,
 * denormals, ties, overflow).
 *
 * Weight-only int8 (S8W) runs the same cases (fp32 A and C) against a
 * reference on the dequantized weights w_scale[j] * q, q and w_scale from
 * a scalar quantization here, which the packed block must hold exactly
 * (scales, q values, zero padding); some cases have an all-zero column
 * (scale 1).  round_a (F16 and S8W) against a reference whose A went
 * through kn_f32_to_f16. */
#include "testkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/hgemm/hgemm.h"

typedef struct hcase {
  kn_hgemm_type type;
  bool dot;
  bool round_a; /* fp32 A rounded to fp16 while packing */
  int64_t m, n, k;
  bool a_half, c_half;
  float alpha;
  int bias; /* 0 none, 1 per row, 2 per column */
  int res;  /* 0 none, 1 after the activation, 2 before */
  kn_act act;
  bool tiny;
  int64_t pad;
  bool rows;
} hcase;

typedef struct rows_arg {
  int32_t *calls;
  int64_t n;
  size_t esz;
  char *snap; /* what each row held when it was reported final */
  int64_t ldc;
} rows_arg;

static void rows_done(void *arg, void *c, int64_t ldc, int64_t r0, int64_t rows, int64_t n) {
  rows_arg *ra = arg;
  assert_int_equal(n, ra->n);
  assert_int_equal(ldc, ra->ldc);
  for (int64_t r = 0; r < rows; r++) {
    __atomic_fetch_add(&ra->calls[r0 + r], 1, __ATOMIC_RELAXED);
    memcpy(ra->snap + (size_t)((r0 + r) * ldc) * ra->esz, (char *)c + (size_t)(r * ldc) * ra->esz,
           (size_t)n * ra->esz);
  }
}

static uint16_t to_half(kn_hgemm_type t, float f) {
  return t == KN_HGEMM_BF16 ? kn_f32_to_bf16(f) : kn_f32_to_f16(f);
}
static float from_half(kn_hgemm_type t, uint16_t h) {
  return t == KN_HGEMM_BF16 ? kn_bf16_to_f32(h) : kn_f16_to_f32(h);
}

static void *xalloc(size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  assert_non_null(p);
  return p;
}

static const char *type_name(kn_hgemm_type t) {
  return t == KN_HGEMM_BF16 ? "bf16" : t == KN_HGEMM_F16 ? "f16" : "s8w";
}

/* S8W's quantization of column j of B (k x n, row-major), scalar: the
 * contract of hgemm.h, independent of the packer's loops */
static float quant_col(const float *b, int64_t k, int64_t n, int64_t j, int8_t *q) {
  float mx = 0.0f;
  for (int64_t p = 0; p < k; p++) {
    float v = fabsf(b[p * n + j]);
    if (v > mx) mx = v;
  }
  float w = mx == 0.0f ? 1.0f : mx / 127.0f;
  for (int64_t p = 0; p < k; p++) {
    float v = nearbyintf(b[p * n + j] / w);
    q[p] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : v);
  }
  return w;
}

/* The packed S8W block against quant_col: scales, q, padding zero;
 * returns the dequantized B (k x n) for the reference. */
static double *check_s8w_block(kn_isa isa, const float *b, int64_t k, int64_t n,
                               const uint16_t *bp, const char *what) {
  int64_t nr = kn_hgemm_nr(isa), cols = (n + nr - 1) / nr * nr;
  const float *sc = (const float *)(const void *)bp;
  const int8_t *qp = (const int8_t *)(const void *)bp + kn_hgemm_s8w_panels_offset(isa, n);
  assert_true(kn_hgemm_s8w_panels_offset(isa, n) % 64 == 0);
  assert_true(kn_hgemm_s8w_panels_offset(isa, n) + (size_t)(cols * k) <=
              kn_hgemm_pack_b_size(isa, KN_HGEMM_S8W, k, n) * 2);
  double *deq = xalloc((size_t)(k * n) * 8 + 8);
  int8_t *q = xalloc((size_t)k + 1);
  for (int64_t j = 0; j < cols; j++) {
    float w = j < n ? quant_col(b, k, n, j, q) : 0.0f;
    if (memcmp(&sc[j], &w, 4))
      fail_msg("%s: w_scale[%lld] = %.9g, want %.9g", what, (long long)j, (double)sc[j],
               (double)w);
    int maxq = 0;
    for (int64_t p = 0; p < k; p++) {
      int8_t want = j < n ? q[p] : 0, got = qp[(j / nr) * nr * k + p * nr + j % nr];
      if (got != want)
        fail_msg("%s: q[%lld][%lld] = %d, want %d", what, (long long)p, (long long)j, got, want);
      if (abs(got) > maxq) maxq = abs(got);
      if (j < n) deq[p * n + j] = (double)w * got;
    }
    if (j < n && k > 0 && !(w == 1.0f ? maxq == 0 || maxq == 127 : maxq == 127))
      fail_msg("%s: column %lld's largest |q| is %d", what, (long long)j, maxq);
  }
  free(q);
  return deq;
}

static const char *isa_label(kn_isa isa, const hcase *hc) {
  if (hc->type == KN_HGEMM_BF16 && hc->dot) return "avx512bf16";
  return kn_isa_name(isa);
}

/* Runs one case on 1 and 2 threads, C fp32 or half as asked (a half C also
 * runs once with fp32 C, for the exact rounding check). */
static void run_case(kn_isa isa, const hcase *hc, kn_pool *pool2) {
  const int64_t m = hc->m, n = hc->n, k = hc->k, lda = k + hc->pad, ldc = n + hc->pad;
  const kn_hgemm_type t = hc->type;
  float *a = xalloc((size_t)(m * lda) * 4), *b = xalloc((size_t)(k * n) * 4 + 4);
  uint16_t *ah = xalloc((size_t)(m * lda) * 2);
  float *bias = xalloc((size_t)(m > n ? m : n) * 4), *res = xalloc((size_t)(m * ldc) * 4);
  double *ref = xalloc((size_t)(m * ldc) * 8), *mag = xalloc((size_t)(m * ldc) * 8);
  uint32_t seed = 7u + (uint32_t)(m * 131 + n * 17 + k);
  for (int64_t i = 0; i < m * lda; i++) {
    a[i] = tk_pseudo(&seed);
    ah[i] = to_half(t, a[i]);
  }
  for (int64_t i = 0; i < k * n; i++) b[i] = 2.0f * tk_pseudo(&seed);
  const bool s8 = t == KN_HGEMM_S8W;
  if (s8 && n > 2 && (m + n + k) % 2 == 0) /* an all-zero column: scale 1, q 0 */
    for (int64_t p = 0; p < k; p++) b[p * n + n / 2] = 0.0f;
  if (s8 && n > 3) /* a column of one large value, the rest far smaller */
    for (int64_t p = 0; p < k; p++) b[p * n + 1] = p == k / 2 ? 300.0f : 1e-3f * b[p * n + 1];
  for (int64_t i = 0; i < (m > n ? m : n); i++) bias[i] = tk_pseudo(&seed);
  for (int64_t i = 0; i < m * ldc; i++) res[i] = tk_pseudo(&seed);

  char what[240];
  snprintf(what, sizeof what,
           "%s %s m%lld n%lld k%lld a_half %d c_half %d round_a %d alpha %g bias %d res %d "
           "act %s tiny %d pad %lld rows %d",
           isa_label(isa, hc), type_name(t), (long long)m, (long long)n, (long long)k,
           hc->a_half, hc->c_half, hc->round_a, hc->alpha, hc->bias, hc->res,
           kn_act_name(hc->act), hc->tiny, (long long)hc->pad, hc->rows);

  /* B packed: from fp32 (row-major, or transposed for S8W when pad is 1),
   * or from half values transposed (n x k) when pad is 1 */
  uint16_t *bp = xalloc(kn_hgemm_pack_b_size(isa, t, k, n) * 2);
  if (hc->pad == 1) {
    if (s8) {
      float *bt = xalloc((size_t)(n * k) * 4 + 4);
      for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++) bt[j * k + p] = b[p * n + j];
      kn_hgemm_pack_b(isa, t, k, n, bt, k, true, bp);
      free(bt);
    } else {
      uint16_t *bt = xalloc((size_t)(n * k) * 2 + 2);
      for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++) bt[j * k + p] = to_half(t, b[p * n + j]);
      kn_hgemm_pack_b_half(isa, t, k, n, bt, k, true, bp);
      free(bt);
    }
  } else {
    kn_hgemm_pack_b(isa, t, k, n, b, n, false, bp);
  }
  double *deq = s8 ? check_s8w_block(isa, b, k, n, bp, what) : NULL;

  /* reference on the rounded inputs: A rounded for bf16 always, for fp16
   * when given as fp16 or round_a; B rounded, or dequantized for S8W */
  bool a_rounded = t == KN_HGEMM_BF16 || hc->a_half;
  /* the operands as the reference reads them, converted once (B transposed) */
  double *ar = xalloc((size_t)(m * k) * 8), *brt = xalloc((size_t)(k * n) * 8);
  for (int64_t i = 0; i < m; i++)
    for (int64_t p = 0; p < k; p++)
      ar[i * k + p] = a_rounded    ? from_half(t, ah[i * lda + p])
                      : hc->round_a ? kn_f16_to_f32(kn_f32_to_f16(a[i * lda + p]))
                                    : a[i * lda + p];
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < n; j++)
      brt[j * k + p] = s8 ? deq[p * n + j] : from_half(t, to_half(t, b[p * n + j]));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0, sa = 0;
      const double *ai = ar + i * k, *bj = brt + j * k;
      for (int64_t p = 0; p < k; p++) {
        s += ai[p] * bj[p];
        sa += fabs(ai[p] * bj[p]);
      }
      ref[i * ldc + j] = (double)hc->alpha * s;
      mag[i * ldc + j] = fabs((double)hc->alpha) * sa;
    }
  free(ar);
  free(brt);
  kn_epilogue ep;
  memset(&ep, 0, sizeof ep);
  ep.act.act = hc->act;
  ep.act.alpha = 0.1f;
  ep.act.beta = 0.5f;
  ep.act.lo = -0.25f;
  ep.act.hi = 0.5f;
  if (hc->act == KN_ACT_RELU) ep.act.lo = 0.0f, ep.act.hi = INFINITY;
  ep.bias = hc->bias ? bias : NULL;
  ep.bias_per_row = hc->bias == 1;
  ep.res = hc->res ? res : NULL;
  ep.ldr = ldc;
  ep.res_first = hc->res == 2;
  bool any_ep = hc->bias || hc->res || hc->act != KN_ACT_NONE;
  for (int64_t i = 0; any_ep && i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double v = ref[i * ldc + j];
      if (ep.bias) v += ep.bias_per_row ? bias[i] : bias[j];
      if (ep.res && ep.res_first) v += res[i * ldc + j];
      float fv = (float)v;
      kn_f32_act(KN_ISA_PORTABLE, &ep.act, &fv, &fv, 1);
      v = fv;
      if (ep.res && !ep.res_first) v += res[i * ldc + j];
      ref[i * ldc + j] = v;
    }

  int32_t nr = kn_hgemm_nr(isa);
  kn_sgemm_blocking tiny = {8 + (k % 3) * 8, 2 * 14, 2 * nr};
  kn_hgemm_args g = {.type = t, .bf16_dot = hc->dot, .m = m, .n = n, .k = k,
                     .alpha = hc->alpha, .a = hc->a_half ? (const void *)ah : (const void *)a,
                     .lda = lda, .a_half = hc->a_half, .round_a = hc->round_a,
                     .b_packed = bp, .ldc = ldc,
                     .ep = any_ep ? &ep : NULL, .blocking = hc->tiny ? &tiny : NULL};
  size_t csz = (size_t)(m * ldc);
  float *c32[2];
  uint16_t *c16[2];
  int32_t *calls = calloc((size_t)m + 1, sizeof *calls);
  assert_non_null(calls);
  rows_arg ra = {calls, n, 4, NULL, ldc};
  for (int half = 0; half <= (int)hc->c_half; half++) {
    g.c_half = half;
    size_t esz = half ? 2 : 4;
    ra.esz = esz;
    ra.snap = xalloc(csz * esz);
    if (hc->rows) {
      g.rows_done = rows_done;
      g.rows_arg = &ra;
    }
    for (int th = 0; th < 2; th++) {
      kn_pool *pool = th ? pool2 : NULL;
      void *c = xalloc(csz * esz);
      if (half) {
        c16[th] = c;
        for (size_t i = 0; i < csz; i++) c16[th][i] = 0x7e00 | (uint16_t)(i & 0x1ff);
      } else {
        c32[th] = c;
        for (size_t i = 0; i < csz; i++) c32[th][i] = NAN;
      }
      memset(calls, 0, (size_t)m * sizeof *calls);
      g.c = c;
      size_t sz = kn_hgemm_scratch_size(isa, &g, kn_pool_threads(pool));
      void *scratch = xalloc(sz);
      kn_hgemm(isa, pool, &g, scratch);
      free(scratch);
      for (int64_t i = 0; hc->rows && i < m; i++) {
        if (calls[i] != 1)
          fail_msg("%s, %d threads: row %lld finished %d times", what, th + 1, (long long)i,
                   (int)calls[i]);
        if (memcmp(ra.snap + (size_t)(i * ldc) * esz, (char *)c + (size_t)(i * ldc) * esz,
                   (size_t)n * esz))
          fail_msg("%s, %d threads: row %lld changed after rows_done", what, th + 1,
                   (long long)i);
      }
    }
    free(ra.snap);
    if (memcmp(g.c, half ? (void *)c16[0] : (void *)c32[0], csz * esz))
      fail_msg("%s: 2 threads differ from 1", what);
  }
  /* fp32 C against the reference, padding untouched */
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < ldc; j++) {
      float got = c32[0][i * ldc + j];
      if (j >= n) {
        if (!isnan(got))
          fail_msg("%s: wrote C[%lld][%lld] past n", what, (long long)i, (long long)j);
        continue;
      }
      double want = ref[i * ldc + j];
      double tol = (double)(k + 4) * 0x1p-23 * mag[i * ldc + j] * 1.25 + 1e-5 * (1.0 + fabs(want));
      if (!(fabs((double)got - want) <= tol))
        fail_msg("%s: C[%lld][%lld] = %.9g, want %.9g (tolerance %.3g)", what, (long long)i,
                 (long long)j, (double)got, want, tol);
    }
  /* a half C: exactly the reference rounding of the fp32 C */
  for (int64_t i = 0; hc->c_half && i < m; i++)
    for (int64_t j = 0; j < ldc; j++) {
      uint16_t got = c16[0][i * ldc + j];
      uint16_t want = j < n ? to_half(t, c32[0][i * ldc + j])
                            : (uint16_t)(0x7e00 | (uint16_t)((i * ldc + j) & 0x1ff));
      if (got != want)
        fail_msg("%s: half C[%lld][%lld] = 0x%04x, want 0x%04x (fp32 %.9g)", what, (long long)i,
                 (long long)j, got, want, j < n ? (double)c32[0][i * ldc + j] : 0.0);
    }
  for (int th = 0; th < 2; th++) {
    free(c32[th]);
    if (hc->c_half) free(c16[th]);
  }
  free(calls);
  free(a);
  free(b);
  free(ah);
  free(bias);
  free(res);
  free(ref);
  free(mag);
  free(bp);
  free(deq);
}

static uint32_t next(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static const int64_t msizes[] = {1, 1, 2, 3, 5, 6, 7, 13, 14, 15, 17, 29, 33, 64};
static const int64_t nsizes[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65, 100, 129};
static const int64_t ksizes[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 97, 130, 301};
#define NS(x) ((uint32_t)(sizeof x / sizeof x[0]))

/* Every (type, vdpbf16ps) variant this machine runs for `isa`. */
static int variants(kn_isa isa, hcase *out) {
  int nv = 0;
  out[nv++] = (hcase){.type = KN_HGEMM_F16};
  out[nv++] = (hcase){.type = KN_HGEMM_BF16};
  if (kn_hgemm_bf16_dot(isa, kn_cpu_features()))
    out[nv++] = (hcase){.type = KN_HGEMM_BF16, .dot = true};
  out[nv++] = (hcase){.type = KN_HGEMM_F16, .round_a = true};
  out[nv++] = (hcase){.type = KN_HGEMM_S8W};
  out[nv++] = (hcase){.type = KN_HGEMM_S8W, .round_a = true};
  return nv;
}

/* What a variant allows: S8W has fp32 A and C only; round_a an fp32 A. */
static void fit(hcase *hc) {
  if (hc->type == KN_HGEMM_S8W) hc->c_half = false;
  if (hc->type == KN_HGEMM_S8W || hc->round_a) hc->a_half = false;
}

static void test_hgemm(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  uint64_t feat = kn_cpu_features();
  if (!(feat & KN_CPU_BIT(AVX512BF16)))
    print_message("no AVX512_BF16 on this CPU: the vdpbf16ps kernels are not tested here\n");
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) {
      print_message("%s not available here: not tested\n", kn_isa_name((kn_isa)isa));
      continue;
    }
    hcase vars[8];
    int nv = variants((kn_isa)isa, vars);
    for (int v = 0; v < nv; v++) {
      hcase base = vars[v];
      /* fixed: one element, k = 0, GEMV rows, exact tiles, blocks and
       * thread tiles crossed at the default blocking */
      const int64_t fixed[][3] = {{1, 1, 1},     {3, 5, 0},     {1, 257, 257}, {1, 1000, 301},
                                  {14, 32, 33},  {12, 32, 16},  {6, 16, 7},    {129, 200, 600},
                                  {2, 300, 64},  {200, 70, 45}, {1, 777, 4099}, {4, 100, 3001},
                                  {16, 65, 2000}, {8, 96, 768},
                                  /* the vdpbf16ps kernel's A chunks (16 pairs): k tails
                                   * inside and at a chunk, rows past every tile, one
                                   * and several k passes */
                                  {128, 64, 1031}, {43, 96, 95},  {29, 33, 4100},
                                  {15, 31, 63},    {127, 40, 32}, {1, 64, 33}};
      for (size_t f = 0; f < sizeof fixed / sizeof fixed[0]; f++)
        for (int w = 0; w < 3; w++) {
          /* the shapes of a million products and more in one of the three
           * A/C/blocking layouts, in turn (KILN_LONG_TESTS=1: all three) */
          if (tk_short_sweep() && fixed[f][0] * fixed[f][1] * fixed[f][2] > (1 << 20) &&
              w != (int)(f % 3))
            continue;
          hcase hc = base;
          hc.m = fixed[f][0];
          hc.n = fixed[f][1];
          hc.k = fixed[f][2];
          hc.alpha = 1.0f;
          hc.a_half = w == 1;
          hc.c_half = w >= 1;
          hc.tiny = w == 2;
          hc.pad = w;
          hc.rows = w == 2;
          hc.bias = (int)(f % 3);
          hc.act = f >= 10 ? (kn_act)(f % KN_ACT_COUNT) : KN_ACT_NONE;
          hc.res = f >= 10 ? (int)(f % 3) : 0;
          fit(&hc);
          run_case((kn_isa)isa, &hc, pool2);
        }
      /* sampled shapes, every variant rotating through (10; with the fixed
       * shapes above 30 took a minute of the ASan suite: KILN_LONG_TESTS=1
       * samples 30) */
      uint32_t s = 5u + 97u * (uint32_t)isa + 13u * (uint32_t)v;
      int samples = tk_short_sweep() ? 10 : 30;
      for (int it = 0; it < samples; it++) {
        hcase hc = base;
        hc.m = msizes[next(&s) % NS(msizes)];
        hc.n = nsizes[next(&s) % NS(nsizes)];
        hc.k = ksizes[next(&s) % NS(ksizes)];
        uint32_t r = next(&s);
        hc.a_half = r & 1;
        hc.c_half = (r >> 1) & 1;
        hc.alpha = (r >> 2) % 4 == 0 ? 0.5f : 1.0f;
        hc.bias = (int)((r >> 4) % 3);
        hc.res = (int)((r >> 6) % 3);
        hc.act = (kn_act)((r >> 8) % KN_ACT_COUNT);
        hc.tiny = (r >> 12) % 3 == 0;
        hc.pad = (r >> 14) % 3;
        hc.rows = (r >> 16) % 3 == 0;
        fit(&hc);
        run_case((kn_isa)isa, &hc, pool2);
      }
      /* every epilogue on one odd shape, half C and fp32 C */
      for (int act = 0; act < KN_ACT_COUNT; act++)
        for (int res = 0; res < 3; res++) {
          hcase hc = base;
          hc.m = 17;
          hc.n = 33;
          hc.k = 31;
          hc.alpha = 1.0f;
          hc.bias = 1 + (act + res) % 2;
          hc.res = res;
          hc.act = (kn_act)act;
          hc.tiny = res == 1;
          hc.c_half = (act + res) % 2;
          fit(&hc);
          run_case((kn_isa)isa, &hc, pool2);
        }
    }
  }
  kn_pool_free(pool2);
}

/* ---- the conversions --------------------------------------------------- */

/* C = A (m x 1) * B (1 x n) for one variant; a / b fp32 or half bits. */
static void tiny_product(kn_isa isa, const hcase *hc, int64_t m, int64_t n, const void *a,
                         bool a_half, const uint16_t *bh, void *c, bool c_half) {
  uint16_t *bp = xalloc(kn_hgemm_pack_b_size(isa, hc->type, 1, n) * 2);
  kn_hgemm_pack_b_half(isa, hc->type, 1, n, bh, n, false, bp);
  kn_hgemm_args g = {.type = hc->type, .bf16_dot = hc->dot, .m = m, .n = n, .k = 1,
                     .alpha = 1.0f, .a = a, .lda = 1, .a_half = a_half,
                     .round_a = hc->round_a, .b_packed = bp,
                     .c = c, .ldc = n, .c_half = c_half};
  void *scratch = xalloc(kn_hgemm_scratch_size(isa, &g, 1));
  kn_hgemm(isa, NULL, &g, scratch);
  free(scratch);
  free(bp);
}

/* fp32 values that a product by 1 returns exactly, or NaN: what the
 * conversions must get exactly (a zero's sign aside: 0 + -0 = +0). */
static bool same(float got, float want) {
  if (isnan(want)) return isnan(got);
  return got == want;
}

static void test_conversions(void **state) {
  (void)state;
  uint64_t feat = kn_cpu_features();
  uint16_t *all = xalloc(65536 * 2);
  for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
  float *c = xalloc(65536 * 4);
  const uint16_t one_f16 = 0x3c00, one_bf16 = 0x3f80;
  /* fp32 specials: NaN, Inf, fp32 denormals, bf16 / fp16 ties, fp16
   * overflow (65520 rounds to Inf, 65519 to 65504), fp16 denormals */
  const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -3e-39f,
                            1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-23f, 1.0f + 3 * 0x1p-8f,
                            1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65519.0f, 65520.0f, -70000.0f,
                            0x1p-24f, 0x1p-25f, 0x1.8p-25f, 3 * 0x1p-26f, 0x1p-15f + 0x1p-25f,
                            3.4e38f, 1.17e-38f, -2.5f,
                            /* the largest fp32 denormal: bf16 rounds it up to 2^-126,
                             * a normal (vcvtne2ps2bf16 would read it as zero) */
                            0x1.fffffcp-127f, -0x1.fffffcp-127f};
  const int ns = (int)(sizeof specials / sizeof specials[0]);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    hcase vars[8];
    int nv = variants((kn_isa)isa, vars);
    for (int v = 0; v < nv; v++) {
      const hcase *hc = &vars[v];
      kn_hgemm_type t = hc->type;
      if (t == KN_HGEMM_S8W || hc->round_a) continue; /* test_round_a, test_hgemm */
      const char *name = isa_label((kn_isa)isa, hc);
      const char *tn = t == KN_HGEMM_BF16 ? "bf16" : "f16";
      uint16_t one = t == KN_HGEMM_BF16 ? one_bf16 : one_f16;
      float onef = 1.0f;
      /* every B value widened in the micro-kernel (1 x 65536, A = 1) */
      tiny_product((kn_isa)isa, hc, 1, 65536, &onef, false, all, c, false);
      for (int i = 0; i < 65536; i++) {
        float want = from_half(t, (uint16_t)i);
        if (hc->dot && fabsf(want) < 0x1p-126f) want = 0.0f; /* vdpbf16ps: DAZ */
        if (!same(c[i], want))
          fail_msg("%s %s: B 0x%04x gave %.9g, want %.9g", name, tn, i, (double)c[i], (double)want);
      }
      /* every A value widened while packing (65536 x 1, B = 1) */
      uint16_t one1[1] = {one};
      tiny_product((kn_isa)isa, hc, 65536, 1, all, true, one1, c, false);
      for (int i = 0; i < 65536; i++) {
        float want = from_half(t, (uint16_t)i);
        if (hc->dot && fabsf(want) < 0x1p-126f) want = 0.0f;
        if (!same(c[i], want))
          fail_msg("%s %s: A 0x%04x gave %.9g, want %.9g", name, tn, i, (double)c[i], (double)want);
      }
      /* fp32 A: bf16 rounds it to nearest even while packing, fp16 keeps it */
      tiny_product((kn_isa)isa, hc, ns, 1, specials, false, one1, c, false);
      for (int i = 0; i < ns; i++) {
        float want = t == KN_HGEMM_BF16 ? kn_bf16_to_f32(kn_f32_to_bf16(specials[i])) : specials[i];
        if (hc->dot && fabsf(want) < 0x1p-126f) want = 0.0f;
        if (!same(c[i], want))
          fail_msg("%s %s: fp32 A %.9g gave %.9g, want %.9g", name, tn, (double)specials[i],
                   (double)c[i], (double)want);
      }
      /* a half C rounds to nearest even: the bits of the reference
       * conversion (NaN: any NaN) */
      uint16_t *ch = (uint16_t *)c;
      tiny_product((kn_isa)isa, hc, ns, 1, specials, false, one1, ch, true);
      for (int i = 0; i < ns; i++) {
        float x = t == KN_HGEMM_BF16 ? kn_bf16_to_f32(kn_f32_to_bf16(specials[i])) : specials[i];
        if (hc->dot && fabsf(x) < 0x1p-126f) x = 0.0f;
        if (x == 0.0f) x = 0.0f; /* the product's zero is +0 */
        uint16_t want = to_half(t, x);
        bool nan_ok = isnan(x) && isnan(from_half(t, ch[i]));
        if (!nan_ok && ch[i] != want)
          fail_msg("%s %s: fp32 %.9g stored as 0x%04x, want 0x%04x", name, tn, (double)x, ch[i],
                   want);
      }
    }
  }
  free(all);
  free(c);
}

/* round_a: every fp32 A value becomes kn_f32_to_f16's fp16 value (then
 * widened exactly; NaN: any NaN), here through A (n x 1) * B (1 x 1) = 1 on
 * fp32 specials and on fp32 bit patterns swept over fp16's range (ties,
 * subnormals, overflow), with A rows of every tail of the packing. */
static void test_round_a(void **state) {
  (void)state;
  uint64_t feat = kn_cpu_features();
  enum { N = 70001 };
  float *a = xalloc(N * 4), *c = xalloc(N * 4);
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f + 0x1p-11f,
                            1.0f + 3 * 0x1p-11f, 65519.0f, 65520.0f, -70000.0f, 0x1p-24f,
                            0x1p-25f, 0x1.8p-25f, 0x1p-15f + 0x1p-25f, 1e-45f, 3.4e38f};
  const int ns = (int)(sizeof specials / sizeof specials[0]);
  uint32_t seed = 99;
  for (int i = 0; i < N; i++) {
    if (i < ns) {
      a[i] = specials[i];
      continue;
    }
    /* exponents 2^-26 .. 2^17, low mantissa bits often a tie (0x1000) */
    uint32_t r = next(&seed), e = 101u + r % 44u, mant = next(&seed) & 0x7fffffu;
    if (r & 0x100) mant = (mant & ~0x1fffu) | 0x1000u;
    uint32_t bits = (r & 0x200 ? 0x80000000u : 0u) | e << 23 | mant;
    memcpy(&a[i], &bits, 4);
  }
  const uint16_t one_f16 = 0x3c00;
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    hcase hc = {.type = KN_HGEMM_F16, .round_a = true};
    const int64_t counts[] = {N, 1, 15, 17, 33};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
      int64_t m = counts[ci];
      tiny_product((kn_isa)isa, &hc, m, 1, a + (ci ? ns : 0), false, &one_f16, c, false);
      for (int64_t i = 0; i < m; i++) {
        float x = a[i + (ci ? ns : 0)], want = kn_f16_to_f32(kn_f32_to_f16(x));
        uint32_t xb;
        memcpy(&xb, &x, 4);
        if (!same(c[i], want))
          fail_msg("%s round_a: fp32 A %.9g (0x%08x) gave %.9g, want %.9g",
                   kn_isa_name((kn_isa)isa), (double)x, (unsigned)xb, (double)c[i],
                   (double)want);
      }
    }
  }
  free(a);
  free(c);
}

/* The blocking and the per-product plan of this family as its own driver
 * chose them before the shared GEMM driver (src/kernels/gemm/driver.c)
 * took over its loops, which must reproduce them exactly (test_gemm.c's
 * test_sgemm_plan says why and how); NR of each row's ISA checked, x86
 * rows skipped in builds without those kernels. */
static void test_hgemm_plan(void **state) {
  (void)state;
  static const struct {
    int isa;
    size_t l1, l2, l3;
    int32_t nr;
    int64_t kc, mc, nc;
  } blk[] = {
      {0, 0, 0, 0, 8, 512, 126, 1024}, {0, 32, 512, 8192, 8, 512, 60, 1024},
      {0, 48, 1024, 32768, 8, 512, 126, 1024}, {0, 32, 256, 6144, 8, 512, 30, 1024},
      {0, 64, 2048, 262144, 8, 512, 192, 1024}, {0, 16, 128, 1024, 8, 512, 12, 1024},
      {1, 0, 0, 0, 16, 512, 126, 1040}, {1, 32, 512, 8192, 16, 512, 60, 1088},
      {1, 48, 1024, 32768, 16, 512, 126, 1040}, {1, 32, 256, 6144, 16, 512, 30, 1088},
      {1, 64, 2048, 262144, 16, 512, 192, 1360}, {1, 16, 128, 1024, 16, 336, 24, 672},
      {2, 0, 0, 0, 32, 512, 126, 1024}, {2, 32, 512, 8192, 32, 336, 84, 768},
      {2, 48, 1024, 32768, 32, 512, 126, 1024}, {2, 32, 256, 6144, 32, 336, 42, 768},
      {2, 64, 2048, 262144, 32, 512, 252, 1024}, {2, 16, 128, 1024, 32, 160, 42, 384},
  };
  for (uint32_t i = 0; i < sizeof blk / sizeof blk[0]; i++) {
    kn_isa isa = (kn_isa)blk[i].isa;
    if (kn_hgemm_nr(isa) != blk[i].nr) continue;
    kn_sgemm_blocking b =
        kn_hgemm_blocking_for(isa, blk[i].l1 << 10, blk[i].l2 << 10, blk[i].l3 << 10);
    assert_int_equal(b.kc, blk[i].kc);
    assert_int_equal(b.mc, blk[i].mc);
    assert_int_equal(b.nc, blk[i].nc);
  }
  /* v: 0 bf16, 1 bf16 on vdpbf16ps, 2 fp16 with half A and C, 3 fp16
   * weights with round_a, 4 S8W; leading dimensions 4096 */
  static const struct {
    int isa, v;
    int64_t m, n, k;
    size_t s1, s3;
  } sc[] = {
      {0, 0, 1, 1000, 2048, 49216, 147648}, {0, 2, 1, 1000, 2048, 73216, 219648},
      {0, 3, 1, 1000, 2048, 49216, 147648}, {0, 4, 1, 1000, 2048, 64, 192},
      {0, 0, 4, 1024, 256, 6208, 18624}, {0, 2, 4, 1024, 256, 30784, 92352},
      {0, 3, 4, 1024, 256, 6208, 18624}, {0, 4, 4, 1024, 256, 6208, 18624},
      {0, 0, 128, 768, 768, 193600, 580800}, {0, 2, 128, 768, 768, 580672, 1742016},
      {0, 3, 128, 768, 768, 193600, 580800}, {0, 4, 128, 768, 768, 193600, 580800},
      {0, 0, 300, 64, 576, 145216, 435648}, {0, 2, 300, 64, 576, 177472, 532416},
      {0, 3, 300, 64, 576, 145216, 435648}, {0, 4, 300, 64, 576, 145216, 435648},
      {0, 0, 49, 2048, 4608, 110656, 331968}, {0, 2, 49, 2048, 4608, 331840, 995520},
      {0, 3, 49, 2048, 4608, 110656, 331968}, {0, 4, 49, 2048, 4608, 110656, 331968},
      {1, 0, 1, 1000, 2048, 41024, 123072}, {1, 2, 1, 1000, 2048, 73408, 220224},
      {1, 3, 1, 1000, 2048, 49216, 147648}, {1, 4, 1, 1000, 2048, 64, 192},
      {1, 0, 4, 1024, 256, 5184, 15552}, {1, 2, 4, 1024, 256, 30784, 92352},
      {1, 3, 4, 1024, 256, 6208, 18624}, {1, 4, 4, 1024, 256, 6208, 18624},
      {1, 0, 128, 768, 768, 192064, 576192}, {1, 2, 128, 768, 768, 580672, 1742016},
      {1, 3, 128, 768, 768, 193600, 580800}, {1, 4, 128, 768, 768, 193600, 580800},
      {1, 0, 300, 64, 576, 144064, 432192}, {1, 2, 300, 64, 576, 177472, 532416},
      {1, 3, 300, 64, 576, 145216, 435648}, {1, 4, 300, 64, 576, 145216, 435648},
      {1, 0, 49, 2048, 4608, 102464, 307392}, {1, 2, 49, 2048, 4608, 335296, 1005888},
      {1, 3, 49, 2048, 4608, 110656, 331968}, {1, 4, 49, 2048, 4608, 110656, 331968},
      {2, 0, 1, 1000, 2048, 98368, 295104}, {2, 1, 1, 1000, 2048, 57408, 172224},
      {2, 2, 1, 1000, 2048, 172096, 516288}, {2, 3, 1, 1000, 2048, 114752, 344256},
      {2, 4, 1, 1000, 2048, 64, 192}, {2, 0, 4, 1024, 256, 12352, 37056},
      {2, 1, 4, 1024, 256, 7232, 21696}, {2, 2, 4, 1024, 256, 71744, 215232},
      {2, 3, 4, 1024, 256, 14400, 43200}, {2, 4, 4, 1024, 256, 14400, 43200},
      {2, 0, 128, 768, 768, 184384, 553152}, {2, 1, 128, 768, 768, 193600, 580800},
      {2, 2, 128, 768, 768, 580672, 1742016}, {2, 3, 128, 768, 768, 193600, 580800},
      {2, 4, 128, 768, 768, 193600, 580800}, {2, 0, 300, 64, 576, 138304, 414912},
      {2, 1, 300, 64, 576, 145216, 435648}, {2, 2, 300, 64, 576, 177472, 532416},
      {2, 3, 300, 64, 576, 145216, 435648}, {2, 4, 300, 64, 576, 145216, 435648},
      {2, 0, 49, 2048, 4608, 122944, 368832}, {2, 1, 49, 2048, 4608, 516160, 1548480},
      {2, 2, 49, 2048, 4608, 344128, 1032384}, {2, 3, 49, 2048, 4608, 114752, 344256},
      {2, 4, 49, 2048, 4608, 114752, 344256},
  };
  static const int32_t nr[KN_ISA_COUNT] = {8, 16, 32};
  float dummy[4] = {0};
  for (uint32_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
    kn_isa isa = (kn_isa)sc[i].isa;
    int v = sc[i].v;
    if (kn_hgemm_nr(isa) != nr[isa]) continue;
    kn_hgemm_args g = {.type = v <= 1   ? KN_HGEMM_BF16
                               : v <= 3 ? KN_HGEMM_F16
                                        : KN_HGEMM_S8W,
                       .bf16_dot = v == 1, .m = sc[i].m, .n = sc[i].n, .k = sc[i].k,
                       .alpha = 1.0f, .a = dummy, .lda = 4096, .a_half = v == 2,
                       .round_a = v == 3, .b_packed = (const uint16_t *)(void *)dummy,
                       .c = dummy, .ldc = 4096, .c_half = v == 2};
    assert_int_equal(kn_hgemm_scratch_size(isa, &g, 1), sc[i].s1);
    assert_int_equal(kn_hgemm_scratch_size(isa, &g, 3), sc[i].s3);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conversions),
      cmocka_unit_test(test_hgemm_plan),
      cmocka_unit_test(test_round_a),
      cmocka_unit_test(test_hgemm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
