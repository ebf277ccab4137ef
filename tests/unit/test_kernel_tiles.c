/* Tiles from the cache capacities (kn_caches, kernels.h): the channels-last
 * kernels whose blocks are shares of the L1d or L2 (conv_igemm_nhwc,
 * conv_winograd_nhwc, conv_depthwise_nhwc, conv_expand_dw_nhwc, and the
 * tap-row pooling) run on representative MobileNetV2 / ResNet-50 /
 * EfficientNet-B0 layers with the common capacities (NULL) and with a
 * small machine's (16 KiB L1d, 256 KiB L2), on every ISA this machine
 * has, 1 and 2 threads, each against a direct convolution in double.
 * Each case also checks that the small capacities change the tiling (the
 * scratch size, or the tile the kernel reports), so a kernel that ignored
 * them would fail here; and, with the small capacities too, that the
 * expand + depthwise kernel gives the bits of its two kernels run one
 * after the other, and that 1 and 2 threads give the same bits. */
#include <math.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/f32-dwconv-nhwc.h"
#include "kernels/pool/pool-kernels.h"
#include "testkit.h"

static const kn_caches small = {.l1d = (size_t)16 << 10, .l2 = (size_t)256 << 10};

/* The two capacities of every case: common, small. */
static const kn_caches *const capacities[2] = {NULL, &small};
static const char *const capacity_names[2] = {"common caches", "16 KiB L1d, 256 KiB L2"};

static void *scratch_of(size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  assert_non_null(p);
  return p;
}

static float *packed_of(size_t floats) {
  float *p = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64 + 64);
  assert_non_null(p);
  return p;
}

/* y [n, oh, ow, m] = act(conv(x [n, h, w, c], w [m, c/group, kh, kw]) +
 * bias), in double. */
static void ref_conv(const kn_conv2d *g, const double *x, const float *w, const float *bias,
                     const kn_act_params *act, double *y) {
  int64_t cg = g->c / g->group, mg = g->m / g->group;
  for (int64_t b = 0; b < g->n; b++)
    for (int64_t oy = 0; oy < g->oh; oy++)
      for (int64_t ox = 0; ox < g->ow; ox++)
        for (int64_t o = 0; o < g->m; o++) {
          int64_t gi = o / mg;
          double s = bias ? bias[o] : 0.0;
          for (int64_t ky = 0; ky < g->kh; ky++) {
            int64_t iy = oy * g->sh - g->pt + ky * g->dh;
            if (iy < 0 || iy >= g->h) continue;
            for (int64_t kx = 0; kx < g->kw; kx++) {
              int64_t ix = ox * g->sw - g->pl + kx * g->dw;
              if (ix < 0 || ix >= g->w) continue;
              const double *xp = x + ((b * g->h + iy) * g->w + ix) * g->c + gi * cg;
              const float *wp = w + (o * cg * g->kh + ky) * g->kw + kx;
              for (int64_t ci = 0; ci < cg; ci++) s += xp[ci] * wp[ci * g->kh * g->kw];
            }
          }
          y[((b * g->oh + oy) * g->ow + ox) * g->m + o] = tk_act_ref(act, s);
        }
}

static double *to_double(const float *x, int64_t n) {
  double *d = malloc((size_t)n * sizeof(double));
  assert_non_null(d);
  for (int64_t i = 0; i < n; i++) d[i] = x[i];
  return d;
}

static void expect_close(const float *y, const double *want, int64_t n, int64_t m, double tol,
                         const char *what, kn_isa isa, int ci, int threads) {
  for (int64_t i = 0; i < n; i++)
    if (!(fabs((double)y[i] - want[i]) <= tol * (1.0 + fabs(want[i]))))
      fail_msg("%s [%s, %s, %d threads]: element %lld (pixel %lld, channel %lld) is %.9g, "
               "reference %.9g",
               what, kn_isa_name(isa), capacity_names[ci], threads, (long long)i,
               (long long)(i / m), (long long)(i % m), (double)y[i], want[i]);
}

static kn_conv2d geom(int64_t n, int64_t c, int64_t h, int64_t w, int64_t m, int64_t group,
                      int64_t k, int64_t stride, int64_t pad) {
  kn_conv2d g = {.n = n, .c = c, .h = h, .w = w, .m = m, .group = group, .kh = k, .kw = k,
                 .sh = stride, .sw = stride, .dh = 1, .dw = 1, .pt = pad, .pl = pad};
  g.oh = (h + 2 * pad - k) / stride + 1;
  g.ow = (w + 2 * pad - k) / stride + 1;
  return g;
}

typedef enum { K_IGEMM, K_WINOGRAD } gemm_kind;

/* conv_igemm_nhwc or conv_winograd_nhwc on g; `differs`: the small
 * capacities must give another scratch size on every ISA. */
static void run_gemm_conv(gemm_kind kind, const kn_conv2d *g, kn_act act, bool differs,
                          kn_pool *pool2) {
  const char *what = kind == K_IGEMM ? "conv_igemm_nhwc" : "conv_winograd_nhwc";
  int64_t nx = g->n * g->h * g->w * g->c, ny = g->n * g->oh * g->ow * g->m;
  int64_t nw = g->m * (g->c / g->group) * g->kh * g->kw;
  float *x = tk_rand_buf(nx, 21), *w = tk_rand_buf(nw, 22), *bias = tk_rand_buf(g->m, 23);
  double *xd = to_double(x, nx), *want = malloc((size_t)ny * sizeof(double));
  float *y[2] = {malloc((size_t)ny * sizeof(float)), malloc((size_t)ny * sizeof(float))};
  assert_true(want && y[0] && y[1]);
  kn_epilogue ep = {.act = {.act = act, .lo = 0.0f, .hi = 6.0f}, .bias = bias};
  ref_conv(g, xd, w, bias, &ep.act, want);
  double k = (double)(g->c / g->group * g->kh * g->kw);
  double tol = 2e-6 * (4.0 + sqrt(k)) * (kind == K_WINOGRAD ? 10 : 2);
  uint64_t feat = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    size_t np = kind == K_IGEMM ? kn_f32_conv_nhwc_pack_size((kn_isa)isa, g)
                                : kn_f32_conv_winograd_nhwc_pack_size((kn_isa)isa, g);
    float *wp = packed_of(np);
    if (kind == K_IGEMM) kn_f32_conv_nhwc_pack((kn_isa)isa, g, w, wp);
    else kn_f32_conv_winograd_nhwc_pack((kn_isa)isa, g, w, wp);
    size_t sizes[2];
    for (int ci = 0; ci < 2; ci++) {
      const kn_caches *ca = capacities[ci];
      for (int threads = 1; threads <= 2; threads++) {
        size_t sb = kind == K_IGEMM
                        ? kn_f32_conv_nhwc_scratch((kn_isa)isa, g, threads, false, ca)
                        : kn_f32_conv_winograd_nhwc_scratch((kn_isa)isa, g, threads, ca);
        if (threads == 1) sizes[ci] = sb;
        void *s = scratch_of(sb);
        float *yt = y[threads - 1];
        for (int64_t i = 0; i < ny; i++) yt[i] = NAN;
        kn_pool *pool = threads == 2 ? pool2 : NULL;
        if (kind == K_IGEMM)
          kn_f32_conv_nhwc((kn_isa)isa, pool, g, x, NULL, wp, &ep, yt, s, ca);
        else
          kn_f32_conv_winograd_nhwc((kn_isa)isa, pool, g, x, NULL, wp, &ep, yt, s, ca);
        free(s);
        expect_close(yt, want, ny, g->m, tol, what, (kn_isa)isa, ci, threads);
      }
      if (memcmp(y[0], y[1], (size_t)ny * sizeof(float)))
        fail_msg("%s [%s, %s]: 1 and 2 threads differ", what, kn_isa_name((kn_isa)isa),
                 capacity_names[ci]);
    }
    if (differs && sizes[0] == sizes[1])
      fail_msg("%s c%lld %lldx%lld m%lld [%s]: the small L2 left the tiling as it was "
               "(%zu scratch bytes)",
               what, (long long)g->c, (long long)g->h, (long long)g->w, (long long)g->m,
               kn_isa_name((kn_isa)isa), sizes[0]);
    free(wp);
  }
  free(x);
  free(w);
  free(bias);
  free(xd);
  free(want);
  free(y[0]);
  free(y[1]);
}

/* ResNet-50's 3x3 on 128 channels and 1x1 on 1024 (depth split into
 * blocks with the small L2, by taps and by channels), a MobileNetV2
 * projection (chunks of fewer pixels), the 3x3 stride-2 stem. */
static void test_igemm_tiles(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  kn_conv2d a = geom(1, 128, 14, 14, 128, 1, 3, 1, 1);
  run_gemm_conv(K_IGEMM, &a, KN_ACT_RELU, true, pool2);
  kn_conv2d b = geom(1, 1024, 7, 7, 72, 1, 1, 1, 0);
  run_gemm_conv(K_IGEMM, &b, KN_ACT_NONE, false, pool2);
  kn_conv2d c = geom(1, 96, 28, 28, 24, 1, 1, 1, 0);
  run_gemm_conv(K_IGEMM, &c, KN_ACT_NONE, true, pool2);
  kn_conv2d d = geom(1, 3, 56, 56, 32, 1, 3, 2, 1);
  run_gemm_conv(K_IGEMM, &d, KN_ACT_SILU, false, pool2);
  kn_pool_free(pool2);
}

/* Blocks of fewer tiles, and with the small L1d the GEMMs' depth in two
 * passes (c = 160 over kc 80). */
static void test_winograd_tiles(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  kn_conv2d a = geom(2, 160, 20, 20, 96, 1, 3, 1, 1);
  run_gemm_conv(K_WINOGRAD, &a, KN_ACT_RELU, true, pool2);
  kn_conv2d b = geom(1, 64, 28, 28, 64, 1, 3, 1, 1);
  run_gemm_conv(K_WINOGRAD, &b, KN_ACT_SILU, true, pool2);
  kn_pool_free(pool2);
}

/* EfficientNet-B0's depthwise layers (Silu: the pass after the kernel, in
 * chunks of a quarter of the L2; channel groups of half the L1d). */
static void test_dwconv_tiles(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  const kn_conv2d shapes[] = {geom(1, 144, 14, 14, 144, 144, 3, 1, 1),
                              geom(1, 240, 28, 28, 240, 240, 5, 2, 2),
                              geom(2, 96, 17, 17, 96, 96, 3, 2, 1)};
  uint64_t feat = kn_cpu_features();
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const kn_conv2d *g = &shapes[si];
    int64_t nx = g->n * g->h * g->w * g->c, ny = g->n * g->oh * g->ow * g->m;
    float *x = tk_rand_buf(nx, 31), *w = tk_rand_buf(g->c * g->kh * g->kw, 32);
    float *bias = tk_rand_buf(g->c, 33);
    double *xd = to_double(x, nx), *want = malloc((size_t)ny * sizeof(double));
    float *y[2] = {malloc((size_t)ny * sizeof(float)), malloc((size_t)ny * sizeof(float))};
    assert_true(want && y[0] && y[1]);
    kn_epilogue ep = {.act = {.act = KN_ACT_SILU}, .bias = bias};
    ref_conv(g, xd, w, bias, &ep.act, want);
    double tol = 2e-6 * (4.0 + sqrt((double)(g->kh * g->kw))) * 2;
    if (kn_f32_dwconv_nhwc_post_rows(g, NULL) == kn_f32_dwconv_nhwc_post_rows(g, &small))
      fail_msg("conv_depthwise_nhwc c%lld %lldx%lld: the small L2 left the pass after the "
               "kernel at %lld rows",
               (long long)g->c, (long long)g->h, (long long)g->w,
               (long long)kn_f32_dwconv_nhwc_post_rows(g, NULL));
    assert_true(kn_f32_dwconv_nhwc_group_bytes(NULL) == 24 << 10 &&
                kn_f32_dwconv_nhwc_group_bytes(&small) == 8 << 10);
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
      if (!kn_isa_available((kn_isa)isa, feat)) continue;
      float *wp = packed_of(kn_f32_dwconv_nhwc_pack_size((kn_isa)isa, g));
      kn_f32_dwconv_nhwc_pack((kn_isa)isa, g, w, wp);
      for (int ci = 0; ci < 2; ci++) {
        for (int threads = 1; threads <= 2; threads++) {
          void *s = scratch_of(kn_f32_dwconv_nhwc_scratch((kn_isa)isa, g, threads,
                                                          capacities[ci]));
          float *yt = y[threads - 1];
          for (int64_t i = 0; i < ny; i++) yt[i] = NAN;
          kn_f32_dwconv_nhwc((kn_isa)isa, threads == 2 ? pool2 : NULL, g, x, NULL, wp, &ep, yt,
                             s, capacities[ci]);
          free(s);
          expect_close(yt, want, ny, g->m, tol, "conv_depthwise_nhwc", (kn_isa)isa, ci,
                       threads);
        }
        if (memcmp(y[0], y[1], (size_t)ny * sizeof(float)))
          fail_msg("conv_depthwise_nhwc [%s, %s]: 1 and 2 threads differ",
                   kn_isa_name((kn_isa)isa), capacity_names[ci]);
      }
      free(wp);
    }
    free(x);
    free(w);
    free(bias);
    free(xd);
    free(want);
    free(y[0]);
    free(y[1]);
  }
  kn_pool_free(pool2);
}

/* MobileNetV2's inverted-residual blocks: a window of 6 expanded rows
 * instead of 24 with the small L2 (more groups per band, each sliding
 * the window), 3x3 stride 1 and 5x5 stride 2. */
static void test_expand_dw_tiles(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  typedef struct edw_case {
    int64_t n, c, h, w, e, k, stride;
  } edw_case;
  static const edw_case cases[] = {{1, 24, 28, 28, 144, 3, 1}, {1, 16, 30, 26, 96, 5, 2},
                                   {2, 8, 40, 21, 96, 3, 2}};
  uint64_t feat = kn_cpu_features();
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const edw_case *cs = &cases[k];
    kn_conv2d ge = geom(cs->n, cs->c, cs->h, cs->w, cs->e, 1, 1, 1, 0);
    kn_conv2d gd = geom(cs->n, cs->e, cs->h, cs->w, cs->e, cs->e, cs->k, cs->stride, cs->k / 2);
    assert_true(kn_f32_expand_dw_nhwc_fits(&ge, &gd));
    int64_t nx = cs->n * cs->h * cs->w * cs->c, nt = cs->n * cs->h * cs->w * cs->e;
    int64_t ny = gd.n * gd.oh * gd.ow * gd.m;
    float *x = tk_rand_buf(nx, 41), *we = tk_rand_buf(cs->e * cs->c, 42);
    float *wd = tk_rand_buf(cs->e * cs->k * cs->k, 43);
    float *be = tk_rand_buf(cs->e, 44), *bd = tk_rand_buf(cs->e, 45);
    kn_epilogue ee = {.act = {.act = KN_ACT_CLIP, .lo = 0.0f, .hi = 6.0f}, .bias = be};
    kn_epilogue ed = {.act = {.act = KN_ACT_HARDSWISH}, .bias = bd};
    double *xd = to_double(x, nx), *td = malloc((size_t)nt * sizeof(double));
    double *want = malloc((size_t)ny * sizeof(double));
    float *t = malloc((size_t)nt * sizeof(float)), *two = malloc((size_t)ny * sizeof(float));
    float *y[2] = {malloc((size_t)ny * sizeof(float)), malloc((size_t)ny * sizeof(float))};
    assert_true(td && want && t && two && y[0] && y[1]);
    ref_conv(&ge, xd, we, be, &ee.act, td);
    ref_conv(&gd, td, wd, bd, &ed.act, want);
    double tol = 2e-6 * (4.0 + sqrt((double)(cs->c + cs->k * cs->k))) * 4;
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
      if (!kn_isa_available((kn_isa)isa, feat)) continue;
      float *wep = packed_of(kn_f32_conv_nhwc_pack_size((kn_isa)isa, &ge));
      float *wdp = packed_of(kn_f32_dwconv_nhwc_pack_size((kn_isa)isa, &gd));
      kn_f32_conv_nhwc_pack((kn_isa)isa, &ge, we, wep);
      kn_f32_dwconv_nhwc_pack((kn_isa)isa, &gd, wd, wdp);
      size_t sizes[2];
      for (int ci = 0; ci < 2; ci++) {
        const kn_caches *ca = capacities[ci];
        /* the two kernels one after the other, on one thread */
        void *s = scratch_of(kn_f32_conv_nhwc_scratch((kn_isa)isa, &ge, 1, false, ca));
        kn_f32_conv_nhwc((kn_isa)isa, NULL, &ge, x, NULL, wep, &ee, t, s, ca);
        free(s);
        s = scratch_of(kn_f32_dwconv_nhwc_scratch((kn_isa)isa, &gd, 1, ca));
        kn_f32_dwconv_nhwc((kn_isa)isa, NULL, &gd, t, NULL, wdp, &ed, two, s, ca);
        free(s);
        for (int threads = 1; threads <= 2; threads++) {
          size_t sb = kn_f32_expand_dw_nhwc_scratch((kn_isa)isa, &ge, &gd, threads, ca);
          if (threads == 1) sizes[ci] = sb;
          s = scratch_of(sb);
          float *yt = y[threads - 1];
          for (int64_t i = 0; i < ny; i++) yt[i] = NAN;
          kn_f32_expand_dw_nhwc((kn_isa)isa, threads == 2 ? pool2 : NULL, &ge, wep, &ee, &gd,
                                wdp, &ed, x, yt, s, ca);
          free(s);
          expect_close(yt, want, ny, gd.m, tol, "conv_expand_dw_nhwc", (kn_isa)isa, ci,
                       threads);
          if (memcmp(yt, two, (size_t)ny * sizeof(float)))
            fail_msg("conv_expand_dw_nhwc c%lld e%lld %lldx%lld k%lld s%lld [%s, %s, %d "
                     "threads]: not the bits of its two kernels",
                     (long long)cs->c, (long long)cs->e, (long long)cs->h, (long long)cs->w,
                     (long long)cs->k, (long long)cs->stride, kn_isa_name((kn_isa)isa),
                     capacity_names[ci], threads);
        }
      }
      if (sizes[0] == sizes[1])
        fail_msg("conv_expand_dw_nhwc c%lld e%lld %lldx%lld [%s]: the small L2 left the "
                 "window as it was (%zu scratch bytes)",
                 (long long)cs->c, (long long)cs->e, (long long)cs->h, (long long)cs->w,
                 kn_isa_name((kn_isa)isa), sizes[0]);
      free(wep);
      free(wdp);
    }
    free(x);
    free(we);
    free(wd);
    free(be);
    free(bd);
    free(xd);
    free(td);
    free(want);
    free(t);
    free(two);
    free(y[0]);
    free(y[1]);
  }
  kn_pool_free(pool2);
}

/* Max pooling over one large plane (ResNet-50's 3x3 stride-2 pool at 4x
 * the size): the strip of input rows a task copies is an eighth of the L2,
 * so the small one takes shorter row chunks; exact against a direct max. */
static void test_pool_tiles(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  kn_pool2d p = {.planes = 2, .h = 448, .w = 448, .oh = 224, .ow = 224, .kh = 3, .kw = 3,
                 .sh = 2, .sw = 2, .dh = 1, .dw = 1, .pt = 1, .pl = 1, .pb = 0, .pr = 0,
                 .is_max = true};
  int64_t nx = p.planes * p.h * p.w, ny = p.planes * p.oh * p.ow;
  float *x = tk_rand_buf(nx, 51), *want = malloc((size_t)ny * sizeof(float));
  float *y = malloc((size_t)ny * sizeof(float));
  assert_true(want && y);
  for (int64_t q = 0; q < p.planes; q++)
    for (int64_t oy = 0; oy < p.oh; oy++)
      for (int64_t ox = 0; ox < p.ow; ox++) {
        float m = -INFINITY;
        for (int64_t ky = 0; ky < p.kh; ky++)
          for (int64_t kx = 0; kx < p.kw; kx++) {
            int64_t iy = oy * p.sh - p.pt + ky, ix = ox * p.sw - p.pl + kx;
            if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w)
              m = fmaxf(m, x[(q * p.h + iy) * p.w + ix]);
          }
        want[(q * p.oh + oy) * p.ow + ox] = m;
      }
  uint64_t feat = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    size_t sizes[2];
    for (int ci = 0; ci < 2; ci++)
      for (int threads = 1; threads <= 2; threads++) {
        size_t sb = kn_f32_pool2d_scratch((kn_isa)isa, &p, threads, capacities[ci]);
        if (threads == 1) sizes[ci] = sb;
        void *s = scratch_of(sb);
        for (int64_t i = 0; i < ny; i++) y[i] = NAN;
        kn_f32_pool2d((kn_isa)isa, threads == 2 ? pool2 : NULL, &p, x, y, s, capacities[ci]);
        free(s);
        if (memcmp(y, want, (size_t)ny * sizeof(float)))
          fail_msg("pool2d max [%s, %s, %d threads]: not the direct max",
                   kn_isa_name((kn_isa)isa), capacity_names[ci], threads);
      }
    if (sizes[0] == sizes[1])
      fail_msg("pool2d [%s]: the small L2 left the strip as it was (%zu scratch bytes)",
               kn_isa_name((kn_isa)isa), sizes[0]);
  }
  free(x);
  free(want);
  free(y);
  kn_pool_free(pool2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_igemm_tiles),     cmocka_unit_test(test_winograd_tiles),
      cmocka_unit_test(test_dwconv_tiles),    cmocka_unit_test(test_expand_dw_tiles),
      cmocka_unit_test(test_pool_tiles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
