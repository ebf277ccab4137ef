/* The fp32 GEMM family (src/kernels/gemm): kn_sgemm against a naive
 * double-precision triple loop for every ISA this machine has, over sampled
 * shapes (1, primes, tails of every vector width), transposes, operands raw,
 * prepacked or from a B-panel callback, every epilogue, tiny cache blocks
 * (many k/m/n blocks on small shapes) and 1, 2 and 3 threads (results must
 * be bit-identical); then MatMul, Gemm and FusedGemm on their fast tactics
 * against their reference kernels. */
#include "testkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/gemm/gemm.h"
#include "ops/tactic.h"

static const int64_t sizes[] = {1, 2, 3, 7, 13, 15, 16, 17, 31, 32, 33, 64, 97, 128, 257};
#define N_SIZES ((uint32_t)(sizeof sizes / sizeof sizes[0]))
static const float sentinel = 1234.5f;

typedef struct gcase {
  int64_t m, n, k;
  bool ta, tb;
  int amode;   /* 0 raw, 1 prepacked */
  int bmode;   /* 0 raw, 1 prepacked, 2 panel callback */
  float alpha;
  int bias;    /* 0 none, 1 per row, 2 per column */
  int res;     /* 0 none, 1 after the activation, 2 before */
  kn_act act;
  bool tiny;   /* tiny cache blocks */
  int64_t pad; /* extra leading-dimension elements */
  bool rows;   /* a row epilogue (rows_done): row r becomes 2 * C[r] + r */
} gcase;

/* rows_done for the test: counts each row's calls, and transforms it, so
 * that a call before the row's values are final shows in the result. */
typedef struct rows_arg {
  int32_t *calls;
  int64_t n;
} rows_arg;

static void rows_done(void *arg, float *c, int64_t ldc, int64_t r0, int64_t rows, int64_t n) {
  rows_arg *ra = arg;
  assert_int_equal(n, ra->n);
  for (int64_t r = 0; r < rows; r++) {
    __atomic_fetch_add(&ra->calls[r0 + r], 1, __ATOMIC_RELAXED);
    for (int64_t j = 0; j < n; j++) c[r * ldc + j] = 2.0f * c[r * ldc + j] + (float)(r0 + r);
  }
}

typedef struct panel_arg {
  const float *b;
  int64_t ldb;
  bool trans;
  int32_t nr;
} panel_arg;

/* The b_panel contract of gemm.h, written independently of the packer. */
static void b_panel(void *arg, int64_t k0, int64_t kc, int64_t n0, int64_t nr, float *dst) {
  const panel_arg *p = arg;
  for (int64_t kk = 0; kk < kc; kk++)
    for (int64_t j = 0; j < p->nr; j++)
      dst[kk * p->nr + j] =
          j < nr ? (p->trans ? p->b[(n0 + j) * p->ldb + k0 + kk] : p->b[(k0 + kk) * p->ldb + n0 + j])
                 : 0.0f;
}

static float *alloc_floats(size_t n) {
  float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64 + 64);
  assert_non_null(p);
  return p;
}

static void fill(float *p, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) p[i] = tk_pseudo(&seed);
}

static void run_case(kn_isa isa, const gcase *gc, kn_pool *pool2, kn_pool *pool3) {
  int64_t m = gc->m, n = gc->n, k = gc->k;
  int64_t lda = (gc->ta ? m : k) + gc->pad, ldb = (gc->tb ? k : n) + gc->pad;
  int64_t ldc = n + gc->pad;
  float *a = alloc_floats((size_t)((gc->ta ? k : m) * lda + 1));
  float *b = alloc_floats((size_t)((gc->tb ? n : k) * ldb + 1));
  float *bias = alloc_floats((size_t)(m > n ? m : n));
  float *res = alloc_floats((size_t)(m * ldc));
  float *ref = alloc_floats((size_t)(m * ldc));
  float *c[3];
  fill(a, (gc->ta ? k : m) * lda, 1 + (uint32_t)m);
  fill(b, (gc->tb ? n : k) * ldb, 2 + (uint32_t)n);
  fill(bias, m > n ? m : n, 3);
  fill(res, m * ldc, 4);
  for (int i = 0; i < 3; i++) c[i] = alloc_floats((size_t)(m * ldc));

  /* reference: double sums, then the portable epilogue */
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t p = 0; p < k; p++)
        s += (double)(gc->ta ? a[p * lda + i] : a[i * lda + p]) *
             (double)(gc->tb ? b[j * ldb + p] : b[p * ldb + j]);
      ref[i * ldc + j] = (float)(gc->alpha * s);
    }
  kn_epilogue ep;
  memset(&ep, 0, sizeof ep);
  ep.act.act = gc->act;
  ep.act.alpha = 0.1f;
  ep.act.beta = 0.5f;
  ep.act.lo = -0.25f;
  ep.act.hi = 0.5f;
  if (gc->act == KN_ACT_RELU) ep.act.lo = 0.0f, ep.act.hi = INFINITY;
  ep.bias = gc->bias ? bias : NULL;
  ep.bias_per_row = gc->bias == 1;
  ep.res = gc->res ? res : NULL;
  ep.ldr = ldc;
  ep.res_first = gc->res == 2;
  bool any_ep = gc->bias || gc->res || gc->act != KN_ACT_NONE;
  /* the epilogue's definition (kernels.h), element by element */
  for (int64_t i = 0; any_ep && i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float v = ref[i * ldc + j];
      if (ep.bias) v += ep.bias_per_row ? bias[i] : bias[j];
      if (ep.res && ep.res_first) v += res[i * ldc + j];
      kn_f32_act(KN_ISA_PORTABLE, &ep.act, &v, &v, 1);
      if (ep.res && !ep.res_first) v += res[i * ldc + j];
      ref[i * ldc + j] = v;
    }
  for (int64_t i = 0; gc->rows && i < m; i++)
    for (int64_t j = 0; j < n; j++) ref[i * ldc + j] = 2.0f * ref[i * ldc + j] + (float)i;

  float *ap = NULL, *bp = NULL;
  if (gc->amode == 1) {
    ap = alloc_floats(kn_sgemm_pack_a_size(isa, m, k));
    kn_sgemm_pack_a(isa, m, k, a, lda, gc->ta, ap);
  }
  if (gc->bmode == 1) {
    bp = alloc_floats(kn_sgemm_pack_b_size(isa, k, n));
    kn_sgemm_pack_b(isa, k, n, b, ldb, gc->tb, bp);
  }
  panel_arg pa = {b, ldb, gc->tb, kn_sgemm_nr(isa)};
  int32_t mr = kn_sgemm_mr(isa), nr = kn_sgemm_nr(isa);
  kn_sgemm_blocking tiny = {8 + (int64_t)(k % 3) * 4, 2 * mr, 2 * nr};
  kn_sgemm_args g = {.m = m, .n = n, .k = k, .alpha = gc->alpha,
                     .a = gc->amode == 0 ? a : NULL, .lda = lda, .trans_a = gc->ta,
                     .a_packed = ap,
                     .b = gc->bmode == 0 ? b : NULL, .ldb = ldb, .trans_b = gc->tb,
                     .b_packed = bp,
                     .b_panel = gc->bmode == 2 ? b_panel : NULL,
                     .b_panel_arg = &pa,
                     .ldc = ldc, .ep = any_ep ? &ep : NULL,
                     .blocking = gc->tiny ? &tiny : NULL};
  int32_t *calls = calloc((size_t)m + 1, sizeof *calls);
  assert_non_null(calls);
  rows_arg ra = {calls, n};
  if (gc->rows) {
    g.rows_done = rows_done;
    g.rows_arg = &ra;
  }
  kn_pool *pools[3] = {NULL, pool2, pool3};
  for (int t = 0; t < 3; t++) {
    if (t == 2 && !pool3) continue;
    for (int64_t i = 0; i < m * ldc; i++) c[t][i] = sentinel;
    memset(calls, 0, (size_t)m * sizeof *calls);
    g.c = c[t];
    size_t sz = kn_sgemm_scratch_size(isa, &g, kn_pool_threads(pools[t]));
    void *scratch = aligned_alloc(64, (sz + 63) / 64 * 64);
    assert_non_null(scratch);
    kn_sgemm(isa, pools[t], &g, scratch);
    free(scratch);
    for (int64_t i = 0; gc->rows && i < m; i++)
      if (calls[i] != 1)
        fail_msg("%s m%lld n%lld k%lld, %d threads: row %lld finished %d times", kn_isa_name(isa),
                 (long long)m, (long long)n, (long long)k, t + 1, (long long)i, (int)calls[i]);
  }
  free(calls);
  char what[200];
  snprintf(what, sizeof what,
           "%s m%lld n%lld k%lld ta%d tb%d a%d b%d alpha %g bias %d res %d act %s tiny %d pad %lld "
           "rows %d",
           kn_isa_name(isa), (long long)m, (long long)n, (long long)k, gc->ta, gc->tb, gc->amode,
           gc->bmode, gc->alpha, gc->bias, gc->res, kn_act_name(gc->act), gc->tiny,
           (long long)gc->pad, gc->rows);
  double tol = 1e-5 + 4e-7 * (double)k * (fabs(gc->alpha) + 1.0);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < ldc; j++) {
      float got = c[0][i * ldc + j];
      if (j >= n) {
        if (got != sentinel) fail_msg("%s: wrote C[%lld][%lld] past n", what, (long long)i, (long long)j);
        continue;
      }
      float want = ref[i * ldc + j];
      if (!(fabs((double)got - (double)want) <= tol * (1.0 + fabs((double)want))))
        fail_msg("%s: C[%lld][%lld] = %.8g, want %.8g", what, (long long)i, (long long)j,
                 (double)got, (double)want);
    }
  if (memcmp(c[0], c[1], (size_t)(m * ldc) * sizeof(float)))
    fail_msg("%s: 2 threads differ from 1", what);
  if (pool3 && memcmp(c[0], c[2], (size_t)(m * ldc) * sizeof(float)))
    fail_msg("%s: 3 threads differ from 1", what);
  free(a);
  free(b);
  free(bias);
  free(res);
  free(ref);
  free(ap);
  free(bp);
  for (int i = 0; i < 3; i++) free(c[i]);
}

static uint32_t next(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

/* The blocking and the per-product plan of the fp32 family as its own
 * driver chose them before the shared GEMM driver (src/kernels/gemm/
 * driver.c) took over its loops, which must reproduce them exactly: the
 * blocking fixes the depth passes, and so the bits (outputs are compared
 * build against build by bench/bench_gemm_bits.c).  Blocking from cache
 * sizes (KiB; 0: the common size), then scratch bytes on 1 and 3 threads
 * (the buffers follow mc, nc, the passes and the operand modes) with the
 * common sizes' blocking.  Rows of an ISA whose tile this build lacks (no
 * x86 kernels) are skipped. */
static bool sgemm_tile_is(kn_isa isa) {
  static const int32_t mr[KN_ISA_COUNT] = {6, 6, 14}, nr[KN_ISA_COUNT] = {8, 16, 32};
  return kn_sgemm_mr(isa) == mr[isa] && kn_sgemm_nr(isa) == nr[isa];
}

static void test_sgemm_plan(void **state) {
  (void)state;
  static const struct {
    int isa;
    size_t l1, l2, l3;
    int32_t mr, nr;
    int64_t kc, mc, nc;
  } blk[] = {
      {0, 0, 0, 0, 6, 8, 512, 252, 512}, {0, 32, 512, 8192, 6, 8, 512, 126, 256},
      {0, 48, 1024, 32768, 6, 8, 512, 252, 512}, {0, 32, 256, 6144, 6, 8, 512, 60, 128},
      {0, 64, 2048, 262144, 6, 8, 512, 384, 1024}, {0, 16, 128, 1024, 6, 8, 336, 48, 96},
      {1, 0, 0, 0, 6, 16, 512, 252, 512}, {1, 32, 512, 8192, 6, 16, 336, 192, 384},
      {1, 48, 1024, 32768, 6, 16, 512, 252, 512}, {1, 32, 256, 6144, 6, 16, 336, 96, 192},
      {1, 64, 2048, 262144, 6, 16, 512, 384, 1024}, {1, 16, 128, 1024, 6, 16, 160, 102, 192},
      {2, 0, 0, 0, 14, 32, 256, 504, 1024}, {2, 32, 512, 8192, 14, 32, 160, 406, 800},
      {2, 48, 1024, 32768, 14, 32, 256, 504, 1024}, {2, 32, 256, 6144, 14, 32, 160, 196, 384},
      {2, 64, 2048, 262144, 14, 32, 336, 770, 1536}, {2, 16, 128, 1024, 14, 32, 80, 196, 384},
  };
  for (uint32_t i = 0; i < sizeof blk / sizeof blk[0]; i++) {
    kn_isa isa = (kn_isa)blk[i].isa;
    if (kn_sgemm_mr(isa) != blk[i].mr || kn_sgemm_nr(isa) != blk[i].nr) continue;
    kn_sgemm_blocking b =
        kn_sgemm_blocking_for(isa, blk[i].l1 << 10, blk[i].l2 << 10, blk[i].l3 << 10);
    assert_int_equal(b.kc, blk[i].kc);
    assert_int_equal(b.mc, blk[i].mc);
    assert_int_equal(b.nc, blk[i].nc);
  }
  /* v: 0 raw A and B, 1 transposed A and B from a callback, 2 both
   * prepacked, 3 raw A and transposed B; leading dimensions 4096 */
  static const struct {
    int isa, v;
    int64_t m, n, k;
    size_t s1, s3;
  } sc[] = {
      {0, 0, 1, 1000, 2048, 64, 192}, {0, 1, 1, 1000, 2048, 4194368, 12583104},
      {0, 2, 1, 1000, 2048, 64, 192}, {0, 3, 1, 1000, 2048, 4194368, 12583104},
      {0, 0, 4, 1024, 256, 20544, 61632}, {0, 1, 4, 1024, 256, 524352, 1573056},
      {0, 2, 4, 1024, 256, 64, 192}, {0, 3, 4, 1024, 256, 536640, 1609920},
      {0, 0, 128, 768, 768, 998464, 2995392}, {0, 1, 128, 768, 768, 998464, 2995392},
      {0, 2, 128, 768, 768, 64, 192}, {0, 3, 128, 768, 768, 998464, 2995392},
      {0, 0, 300, 64, 576, 371008, 1113024}, {0, 1, 300, 64, 576, 371008, 1113024},
      {0, 2, 300, 64, 576, 64, 192}, {0, 3, 300, 64, 576, 371008, 1113024},
      {0, 0, 49, 2048, 4608, 1171520, 3514560}, {0, 1, 49, 2048, 4608, 1171520, 3514560},
      {0, 2, 49, 2048, 4608, 64, 192}, {0, 3, 49, 2048, 4608, 1171520, 3514560},
      {1, 0, 1, 1000, 2048, 64, 192}, {1, 1, 1, 1000, 2048, 4194368, 12583104},
      {1, 2, 1, 1000, 2048, 64, 192}, {1, 3, 1, 1000, 2048, 4194368, 12583104},
      {1, 0, 4, 1024, 256, 28736, 86208}, {1, 1, 4, 1024, 256, 524352, 1573056},
      {1, 2, 4, 1024, 256, 64, 192}, {1, 3, 4, 1024, 256, 536640, 1609920},
      {1, 0, 128, 768, 768, 998464, 2995392}, {1, 1, 128, 768, 768, 998464, 2995392},
      {1, 2, 128, 768, 768, 64, 192}, {1, 3, 128, 768, 768, 998464, 2995392},
      {1, 0, 300, 64, 576, 371008, 1113024}, {1, 1, 300, 64, 576, 371008, 1113024},
      {1, 2, 300, 64, 576, 64, 192}, {1, 3, 300, 64, 576, 371008, 1113024},
      {1, 0, 49, 2048, 4608, 1171520, 3514560}, {1, 1, 49, 2048, 4608, 1171520, 3514560},
      {1, 2, 49, 2048, 4608, 64, 192}, {1, 3, 49, 2048, 4608, 1171520, 3514560},
      {2, 0, 1, 1000, 2048, 64, 192}, {2, 1, 1, 1000, 2048, 8388672, 25166016},
      {2, 2, 1, 1000, 2048, 64, 192}, {2, 3, 1, 1000, 2048, 8388672, 25166016},
      {2, 0, 4, 1024, 256, 61504, 184512}, {2, 1, 4, 1024, 256, 1048640, 3145920},
      {2, 2, 4, 1024, 256, 64, 192}, {2, 3, 4, 1024, 256, 1077312, 3231936},
      {2, 0, 128, 768, 768, 944192, 2832576}, {2, 1, 128, 768, 768, 944192, 2832576},
      {2, 2, 128, 768, 768, 64, 192}, {2, 3, 128, 768, 768, 944192, 2832576},
      {2, 0, 300, 64, 576, 296512, 889536}, {2, 1, 300, 64, 576, 296512, 889536},
      {2, 2, 300, 64, 576, 64, 192}, {2, 3, 300, 64, 576, 296512, 889536},
      {2, 0, 49, 2048, 4608, 1120320, 3360960}, {2, 1, 49, 2048, 4608, 1120320, 3360960},
      {2, 2, 49, 2048, 4608, 64, 192}, {2, 3, 49, 2048, 4608, 1120320, 3360960},
  };
  float dummy[4] = {0};
  for (uint32_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
    kn_isa isa = (kn_isa)sc[i].isa;
    int v = sc[i].v;
    if (!sgemm_tile_is(isa)) continue;
    kn_sgemm_args g = {.m = sc[i].m, .n = sc[i].n, .k = sc[i].k, .alpha = 1.0f,
                       .a = v == 2 ? NULL : dummy, .lda = 4096, .trans_a = v == 1,
                       .a_packed = v == 2 ? dummy : NULL, .b = v == 0 || v == 3 ? dummy : NULL,
                       .ldb = 4096, .trans_b = v == 3, .b_packed = v == 2 ? dummy : NULL,
                       .b_panel = v == 1 ? b_panel : NULL, .c = dummy, .ldc = 4096};
    assert_int_equal(kn_sgemm_scratch_size(isa, &g, 1), sc[i].s1);
    assert_int_equal(kn_sgemm_scratch_size(isa, &g, 3), sc[i].s3);
  }
}

static void test_sgemm(void **state) {
  (void)state;
  kn_pool *pool2, *pool3;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  assert_int_equal(kn_pool_create(3, &pool3, &err), KN_OK);
  uint64_t feat = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    assert_true(kn_sgemm_mr((kn_isa)isa) <= 14 && kn_sgemm_nr((kn_isa)isa) >= 4);
    /* fixed edge cases: one element, GEMV, one column, k = 0, exact tiles */
    const int64_t fixed[][3] = {{1, 1, 1},   {1, 257, 257}, {257, 1, 97}, {7, 13, 0},
                                {14, 32, 33}, {28, 64, 16},  {6, 16, 7},   {4, 16, 3},
                                {2, 1000, 64}, {129, 33, 300}};
    for (size_t f = 0; f < sizeof fixed / sizeof fixed[0]; f++)
      for (int v = 0; v < 4; v++) {
        gcase gc = {.m = fixed[f][0], .n = fixed[f][1], .k = fixed[f][2], .ta = v & 1,
                    .tb = (v >> 1) & 1, .bmode = v % 3, .amode = v == 3, .alpha = 1.0f,
                    .act = KN_ACT_NONE, .tiny = v == 2, .pad = v == 1 ? 3 : 0,
                    .rows = v >= 2};
        run_case((kn_isa)isa, &gc, pool2, f % 3 == 0 ? pool3 : NULL);
      }
    /* one row against a raw B (the GEMV path, gemv-impl.h): widths around
     * each ISA's column blocks and tails, k = 0, every epilogue, A raw,
     * transposed or prepacked, padded leading dims, split over 2 and 3
     * threads (n * k >= 262144) */
    const int64_t gv[][2] = {{64, 1},  {65, 7},    {97, 300},   {257, 33},
                             {300, 0}, {1000, 300}, {2000, 150}, {1500, 5}};
    for (size_t f = 0; f < sizeof gv / sizeof gv[0]; f++)
      for (int v = 0; v < 6; v++) {
        gcase gc = {.m = 1, .n = gv[f][0], .k = gv[f][1], .ta = v & 1, .amode = v == 4,
                    .bmode = 0, .alpha = v == 5 ? 0.5f : 1.0f, .bias = v % 3,
                    .res = (int)((v + f) % 3), .act = (kn_act)((v * 3 + f) % KN_ACT_COUNT),
                    .pad = v == 2 ? 3 : 0, .rows = v == 3};
        run_case((kn_isa)isa, &gc, pool2, pool3);
      }
    /* sampled shapes, with every variant rotating through */
    uint32_t s = 99u + (uint32_t)isa;
    int done = 0;
    for (int it = 0; done < 90 && it < 1000; it++) {
      gcase gc;
      memset(&gc, 0, sizeof gc);
      gc.m = sizes[next(&s) % N_SIZES];
      gc.n = sizes[next(&s) % N_SIZES];
      gc.k = sizes[next(&s) % N_SIZES];
      if (gc.m * gc.n * gc.k > 1500000) continue;
      uint32_t r = next(&s);
      gc.ta = r & 1;
      gc.tb = (r >> 1) & 1;
      gc.amode = (r >> 2) % 4 == 0;
      gc.bmode = (int)((r >> 4) % 3);
      gc.alpha = (r >> 6) % 4 == 0 ? 0.5f : 1.0f;
      gc.bias = (int)((r >> 8) % 3);
      gc.res = (int)((r >> 10) % 3);
      gc.act = (kn_act)((r >> 12) % KN_ACT_COUNT);
      gc.tiny = (r >> 16) % 3 == 0;
      gc.pad = (r >> 18) % 4 == 0 ? 5 : 0;
      gc.rows = (r >> 20) % 3 == 0;
      run_case((kn_isa)isa, &gc, pool2, done % 4 == 0 ? pool3 : NULL);
      done++;
    }
    /* every epilogue on one odd shape, through the tiny blocks */
    for (int act = 0; act < KN_ACT_COUNT; act++)
      for (int res = 0; res < 3; res++) {
        gcase gc = {.m = 17, .n = 33, .k = 31, .alpha = 1.0f, .bias = 1 + (act + res) % 2,
                    .res = res, .act = (kn_act)act, .tiny = res == 1};
        run_case((kn_isa)isa, &gc, pool2, NULL);
      }
  }
  kn_pool_free(pool2);
  kn_pool_free(pool3);
}

/* ---- the ops on their fast tactics ---------------------------------------- */

static void compare_fast(kn_ir_model *m, const char *op, int32_t want_tactic) {
  uint64_t feat = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    assert_int_equal(tk_fast_tactic(m, op, isa), want_tactic);
    for (int threads = 1; threads <= 2; threads++) {
      tk_results ref = tk_run(m, TK_FILL_SEEDED);
      tk_results fast = tk_run_fast(m, TK_FILL_SEEDED, isa, threads);
      tk_assert_close(&fast, &ref, false);
    }
  }
}

static void test_matmul_op(void **state) {
  (void)state;
  /* {rank, dims of A}, {rank, dims of B}, B constant */
  static const struct {
    int32_t ra;
    int64_t a[4];
    int32_t rb;
    int64_t b[4];
    bool bconst;
  } cases[] = {
      {2, {33, 70}, 2, {70, 45}, true},        {2, {1, 64}, 2, {64, 100}, true},
      {3, {2, 5, 31}, 2, {31, 17}, true},      {2, {7, 13}, 2, {13, 40}, false},
      {4, {2, 3, 9, 16}, 3, {3, 16, 11}, false}, {2, {9, 16}, 3, {4, 16, 20}, false},
      {1, {37}, 2, {37, 19}, true},            {3, {3, 6, 20}, 1, {20}, false},
      {3, {5, 1, 8}, 3, {1, 8, 33}, false},    {2, {3, 0}, 2, {0, 5}, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t in[2];
    in[0] = tk_input(g, "a", cases[i].ra, cases[i].a);
    in[1] = cases[i].bconst ? tk_const_rand(g, cases[i].rb, cases[i].b, 7, 0.0f)
                            : tk_input(g, "b", cases[i].rb, cases[i].b);
    tk_output(g, tk_node(g, "MatMul", 2, in));
    tk_prepare(m);
    compare_fast(m, "MatMul",
                 cases[i].bconst && cases[i].rb == 2 ? KN_TACTIC_gemm_packed : KN_TACTIC_gemm);
    kn_ir_model_free(m);
  }
}

static void test_gemm_op(void **state) {
  (void)state;
  const int64_t M = 19, N = 37, K = 29;
  /* C shapes: none, scalar, [N], [1,N], [M,1], [M,N], [1,1] */
  const int32_t crank[] = {-1, 0, 1, 2, 2, 2, 2};
  const int64_t cdims[][2] = {{0, 0}, {0, 0}, {N, 0}, {1, N}, {M, 1}, {M, N}, {1, 1}};
  for (int v = 0; v < 7 * 4; v++) {
    int ci = v % 7, tr = v / 7;
    bool ta = tr & 1, tb = tr >> 1;
    float beta = v % 3 == 0 ? 1.0f : 0.5f;
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int64_t ad[2] = {ta ? K : M, ta ? M : K}, bd[2] = {tb ? N : K, tb ? K : N};
    int32_t in[3], nin = 2;
    in[0] = tk_input(g, "a", 2, ad);
    in[1] = v % 2 ? tk_const_rand(g, 2, bd, 3, 0.0f) : tk_input(g, "b", 2, bd);
    if (crank[ci] >= 0) in[nin++] = tk_const_rand(g, crank[ci], cdims[ci], 9, 0.5f);
    tk_output(g, tk_node(g, "Gemm", nin, in));
    kn_node *n = tk_last(g);
    assert_true(kn_node_set_int(n, "transA", ta));
    assert_true(kn_node_set_int(n, "transB", tb));
    assert_true(kn_node_set_float(n, "alpha", v % 4 == 1 ? 0.75f : 1.0f));
    assert_true(kn_node_set_float(n, "beta", beta));
    tk_prepare(m);
    compare_fast(m, "Gemm", v % 2 ? KN_TACTIC_gemm_packed : KN_TACTIC_gemm);
    kn_ir_model_free(m);
  }
}

static void test_fused_gemm_op(void **state) {
  (void)state;
  const int64_t N = 35, K = 21;
  for (int v = 0; v < KN_ACT_COUNT * 2; v++) {
    kn_act act = (kn_act)(v % KN_ACT_COUNT);
    int zkind = v / KN_ACT_COUNT + (v % 3 == 0); /* 0 none, 1 exact shape, 2 broadcast [N] */
    int ckind = v % 4;                           /* none, [N], [2,3,1], scalar */
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int64_t ad[3] = {2, 3, K}, bd[2] = {K, N}, yd[3] = {2, 3, N}, cd[3] = {2, 3, 1};
    int32_t in[4], nin = 2;
    in[0] = tk_input(g, "a", 3, ad);
    in[1] = v % 2 ? tk_const_rand(g, 2, bd, 3, 0.0f) : tk_input(g, "b", 2, bd);
    in[2] = ckind == 1 ? tk_const_rand(g, 1, &N, 5, 0.0f)
            : ckind == 2 ? tk_const_rand(g, 3, cd, 5, 0.0f)
            : ckind == 3 ? tk_const_scalar(g, 0.25f)
                         : -1;
    if (ckind || zkind) nin = 3;
    if (zkind == 1) in[nin++] = tk_input(g, "z", 3, yd);
    if (zkind == 2) in[nin++] = tk_const_rand(g, 1, &N, 6, 0.0f);
    int32_t y = kn_graph_add_fresh_value(g, "y");
    assert_true(kn_graph_new_node(g, "FusedGemm", KN_DOMAIN, "fg", nin, in, 1, &y) >= 0);
    kn_node *n = tk_last(g);
    assert_true(kn_node_set_string(n, "activation", kn_act_name(act)));
    assert_true(kn_node_set_float(n, "beta", v % 5 == 0 ? 0.5f : 1.0f));
    if (act == KN_ACT_CLIP) {
      assert_true(kn_node_set_float(n, "activation_min", -0.5f));
      assert_true(kn_node_set_float(n, "activation_max", 0.75f));
    }
    if (v % 2) assert_true(kn_node_set_int(n, "residual_before_activation", 1));
    tk_output(g, y);
    tk_prepare(m);
    compare_fast(m, "FusedGemm", v % 2 ? KN_TACTIC_gemm_packed : KN_TACTIC_gemm);
    kn_ir_model_free(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sgemm_plan),
      cmocka_unit_test(test_sgemm),
      cmocka_unit_test(test_matmul_op),
      cmocka_unit_test(test_gemm_op),
      cmocka_unit_test(test_fused_gemm_op),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
