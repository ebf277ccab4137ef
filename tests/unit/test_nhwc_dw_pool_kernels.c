/* The channels-last depthwise convolution and pooling kernels
 * (kn_f32_dwconv_nhwc, kn_f32_pool2d_nhwc, kn_f32_global_pool_nhwc) on
 * every ISA this machine has, 1 and 2 threads, against the NCHW kernels
 * and references with inputs and outputs transposed:
 *
 *   depthwise  vs the reference Conv (kn_conv_forward_f32) on x * s, the
 *              epilogue then computed in double (tolerance), and vs the
 *              NCHW kernel kn_f32_dwconv of the same ISA, which accumulates
 *              in the same order: equal up to float rounding of a few ulp
 *              (in practice bit-equal; the bound is loose for safety);
 *   pooling    vs kn_f32_pool2d of the same ISA (max exactly, average to a
 *              few ulp) and a scalar reference in double;
 *   global     vs kn_f32_global_pool (sums in a different order).
 *
 * Shapes: MobileNetV2 / EfficientNet-B0 depthwise layers (3x3 and 5x5,
 * stride 1 and 2, 32..1152 channels, 56x56 down to 7x7) and odd ones:
 * channels 1..3, primes, tails of every vector width (7, 9, 15, 17, 31,
 * 33, 47, 65), 1x1 images, kernels 1, 2, 4, 7 and non-square, stride 3,
 * dilation 2, asymmetric and wide pads, batch 2, ceil_mode,
 * count_include_pad, every epilogue form, the input-channel scale.
 * Outputs start full of NaNs, so an element a kernel does not write
 * fails, and the 1- and 2-thread results must be bit-identical. */
#include <math.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "kernels/conv/conv.h"
#include "kernels/pool/pool-kernels.h"
#include "ops/conv_ref.h"
#include "testkit.h"

static void *scratch_of(size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
  assert_non_null(p);
  return p;
}

/* [n, c, hw] <-> [n, hw, c] */
static void to_nhwc(const float *src, float *dst, int64_t n, int64_t c, int64_t hw) {
  for (int64_t b = 0; b < n; b++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t i = 0; i < hw; i++) dst[(b * hw + i) * c + ch] = src[(b * c + ch) * hw + i];
}
static void to_nchw(const float *src, float *dst, int64_t n, int64_t c, int64_t hw) {
  for (int64_t b = 0; b < n; b++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t i = 0; i < hw; i++) dst[(b * c + ch) * hw + i] = src[(b * hw + i) * c + ch];
}

static bool close_ulps(float a, float b, float ulps) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (a == b) return true;
  float scale = fmaxf(fabsf(a), fabsf(b));
  return fabsf(a - b) <= ulps * scale * 0x1p-23f;
}

/* ---- depthwise ----------------------------------------------------------- */

typedef struct dw_case {
  int64_t n, c, h, w, kh, kw, sh, sw, dh, dw;
  int64_t pads[4]; /* top, left, bottom, right */
  bool bias;
  kn_act act;
  int res;    /* 0 none, 1 after the activation, 2 before */
  bool scale; /* input-channel scale s */
  int64_t q;  /* narrow groups: channels per group (0 or 1: depthwise) */
} dw_case;

static void dw_run(const dw_case *dc, kn_pool *pool2) {
  int64_t ekh = (dc->kh - 1) * dc->dh + 1, ekw = (dc->kw - 1) * dc->dw + 1;
  int64_t oh = (dc->h + dc->pads[0] + dc->pads[2] - ekh) / dc->sh + 1;
  int64_t ow = (dc->w + dc->pads[1] + dc->pads[3] - ekw) / dc->sw + 1;
  assert_true(oh >= 1 && ow >= 1);
  const int64_t n = dc->n, c = dc->c, hw = dc->h * dc->w, ohw = oh * ow;
  const int64_t q = dc->q > 1 ? dc->q : 1;
  kn_conv2d g = {.n = n, .c = c, .h = dc->h, .w = dc->w, .m = c, .oh = oh, .ow = ow,
                 .group = c / q, .kh = dc->kh, .kw = dc->kw, .sh = dc->sh, .sw = dc->sw,
                 .dh = dc->dh, .dw = dc->dw, .pt = dc->pads[0], .pl = dc->pads[1]};
  int64_t nx = n * c * hw, ny = n * c * ohw;
  float *x = tk_rand_buf(nx, 7), *w = tk_rand_buf(c * q * dc->kh * dc->kw, 8);
  float *bias = tk_rand_buf(c, 9), *res = tk_rand_buf(ny, 10), *s = tk_rand_buf(n * c, 11);
  for (int64_t i = 0; i < n * c; i++) s[i] += 1.25f; /* [0.25, 2.25] */
  /* x * s as the conv reads it (float products), NCHW */
  float *xs = malloc((size_t)nx * sizeof(float));
  assert_non_null(xs);
  for (int64_t i = 0; i < nx; i++) xs[i] = dc->scale ? x[i] * s[i / hw] : x[i];
  float *xn = malloc((size_t)nx * sizeof(float)), *resn = malloc((size_t)ny * sizeof(float));
  assert_true(xn && resn);
  to_nhwc(x, xn, n, c, hw);
  to_nhwc(res, resn, n, c, ohw);
  /* the reference Conv, then the epilogue in double */
  kn_conv_geom rg;
  memset(&rg, 0, sizeof rg);
  rg.nd = 2;
  rg.n = n, rg.c = rg.m = c, rg.group = c / q;
  rg.x_sp[0] = dc->h, rg.x_sp[1] = dc->w, rg.y_sp[0] = oh, rg.y_sp[1] = ow;
  rg.k[0] = dc->kh, rg.k[1] = dc->kw, rg.s[0] = dc->sh, rg.s[1] = dc->sw;
  rg.d[0] = dc->dh, rg.d[1] = dc->dw;
  rg.pb[0] = dc->pads[0], rg.pb[1] = dc->pads[1], rg.pe[0] = dc->pads[2],
  rg.pe[1] = dc->pads[3];
  rg.ksz = dc->kh * dc->kw, rg.x_size = hw, rg.y_size = ohw;
  float *ref = calloc((size_t)ny, sizeof(float));
  assert_non_null(ref);
  assert_true(kn_conv_forward_f32(&rg, xs, w, ref, NULL, NULL));
  kn_epilogue ep = {.act = {.act = dc->act, .alpha = 0.1f, .beta = 0.6f, .lo = -0.5f,
                            .hi = 0.75f},
                    .bias = dc->bias ? bias : NULL, .bias_per_row = true,
                    .res = dc->res ? res : NULL, .res_first = dc->res == 2};
  double *want = malloc((size_t)ny * sizeof(double));
  assert_non_null(want);
  for (int64_t i = 0; i < ny; i++) {
    int64_t ch = i / ohw % c;
    double v = ref[i];
    if (ep.bias) v += bias[ch];
    if (dc->res == 2) v += res[i];
    v = tk_act_ref(&ep.act, v);
    if (dc->res == 1) v += res[i];
    want[i] = v;
  }
  kn_epilogue epn = ep;
  epn.res = dc->res ? resn : NULL;
  double tol = 3e-6 * (4.0 + sqrt((double)(dc->kh * dc->kw * q)));
  char what[240];
  snprintf(what, sizeof what,
           "dwconv_nhwc q%lld n%lld c%lld %lldx%lld k%lldx%lld s%lldx%lld d%lldx%lld pads %lld,%lld,"
           "%lld,%lld bias %d act %s res %d scale %d",
           (long long)q, (long long)n, (long long)c, (long long)dc->h, (long long)dc->w, (long long)dc->kh,
           (long long)dc->kw, (long long)dc->sh, (long long)dc->sw, (long long)dc->dh,
           (long long)dc->dw, (long long)dc->pads[0], (long long)dc->pads[1],
           (long long)dc->pads[2], (long long)dc->pads[3], (int)dc->bias,
           kn_act_name(dc->act)[0] ? kn_act_name(dc->act) : "none", dc->res, (int)dc->scale);
  uint64_t feat = kn_cpu_features();
  float *y1 = malloc((size_t)ny * sizeof(float)), *y2 = malloc((size_t)ny * sizeof(float));
  float *yt = malloc((size_t)ny * sizeof(float)), *yc = malloc((size_t)ny * sizeof(float));
  assert_true(y1 && y2 && yt && yc);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    /* the NCHW kernel on x * s, same ISA (depthwise only) */
    void *sc;
    if (q == 1) {
      sc = scratch_of(kn_f32_dwconv_scratch((kn_isa)isa, &g, 1, NULL));
      kn_f32_dwconv((kn_isa)isa, NULL, &g, xs, w, &ep, yc, sc, NULL);
      free(sc);
    }
    float *wp = malloc(kn_f32_dwconv_nhwc_pack_size((kn_isa)isa, &g) * sizeof(float));
    assert_non_null(wp);
    kn_f32_dwconv_nhwc_pack((kn_isa)isa, &g, w, wp);
    for (int threads = 1; threads <= 2; threads++) {
      float *y = threads == 1 ? y1 : y2;
      for (int64_t i = 0; i < ny; i++) y[i] = NAN;
      sc = scratch_of(kn_f32_dwconv_nhwc_scratch((kn_isa)isa, &g, threads, NULL));
      kn_f32_dwconv_nhwc((kn_isa)isa, threads == 2 ? pool2 : NULL, &g, xn, dc->scale ? s : NULL,
                         wp, &epn, y, sc, NULL);
      free(sc);
      to_nchw(y, yt, n, c, ohw);
      for (int64_t i = 0; i < ny; i++) {
        if (!(fabs((double)yt[i] - want[i]) <= tol * (1.0 + fabs(want[i]))))
          fail_msg("%s [%s, %d threads]: element %lld (NCHW order) is %.9g, reference %.9g",
                   what, kn_isa_name((kn_isa)isa), threads, (long long)i, (double)yt[i],
                   want[i]);
        if (q == 1 && !close_ulps(yt[i], yc[i], 4.0f))
          fail_msg("%s [%s, %d threads]: element %lld (NCHW order) is %.9g, NCHW kernel %.9g",
                   what, kn_isa_name((kn_isa)isa), threads, (long long)i, (double)yt[i],
                   (double)yc[i]);
      }
    }
    if (memcmp(y1, y2, (size_t)ny * sizeof(float)))
      fail_msg("%s [%s]: 1 and 2 threads differ", what, kn_isa_name((kn_isa)isa));
    free(wp);
  }
  free(y1), free(y2), free(yt), free(yc), free(want), free(ref), free(x), free(xs), free(xn);
  free(w), free(bias), free(res), free(resn), free(s);
}

static const kn_act acts[] = {KN_ACT_NONE,      KN_ACT_RELU,        KN_ACT_CLIP,
                              KN_ACT_SIGMOID,   KN_ACT_SILU,        KN_ACT_HARDSWISH,
                              KN_ACT_LEAKYRELU, KN_ACT_HARDSIGMOID, KN_ACT_TANH,
                              KN_ACT_GELU};
#define N_ACTS ((int)(sizeof acts / sizeof acts[0]))

/* Kernel size x stride x dilation x plane size; channels (tails of every
 * vector width), batch, pads, epilogue and scale cycle through their
 * values so that each appears with many of the others. */
static void test_dwconv_nhwc_sweep(void **state) {
  (void)state;
  static const int64_t ks[] = {3, 5, 7}, sps[] = {1, 2, 7, 13, 14, 23};
  static const int64_t chans[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 47, 65};
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  int i = 0;
  for (int k = 0; k < 3; k++)
    for (int s = 1; s <= 2; s++)
      for (int d = 1; d <= 2; d++)
        for (int p = 0; p < 6; p++, i++) {
          dw_case dc = {.kh = ks[k], .kw = ks[k], .sh = s, .sw = s, .dh = d, .dw = d};
          dc.h = sps[p];
          dc.w = i % 5 == 4 ? sps[(p + 3) % 6] : sps[p];
          dc.c = chans[i % 15];
          dc.n = 1 + (i / 4) % 2;
          int64_t same = (ks[k] - 1) * d / 2;
          int pm = i % 4;
          dc.pads[0] = pm == 0 ? same : pm == 1 ? same + 1 : pm == 2 ? 0 : same;
          dc.pads[1] = pm == 0 ? same : pm == 1 ? 0 : pm == 2 ? 0 : same + 2;
          dc.pads[2] = pm == 0 ? same : pm == 1 ? same : pm == 2 ? 0 : 1;
          dc.pads[3] = pm == 0 ? same : pm == 1 ? same + 1 : pm == 2 ? 0 : 0;
          int64_t ekh = (dc.kh - 1) * d + 1, ekw = (dc.kw - 1) * d + 1;
          if (dc.h + dc.pads[0] + dc.pads[2] < ekh) dc.pads[0] = dc.pads[2] = ekh / 2 + 1;
          if (dc.w + dc.pads[1] + dc.pads[3] < ekw) dc.pads[1] = dc.pads[3] = ekw / 2 + 1;
          dc.bias = i % 3 != 2;
          dc.act = acts[i % N_ACTS];
          dc.res = (i / 10) % 3;
          dc.scale = i % 7 == 3 || i % 7 == 5;
          dw_run(&dc, pool2);
        }
  kn_pool_free(pool2);
}

/* MobileNetV2 / EfficientNet-B0 depthwise layers (smaller planes for the
 * first ones, to keep ASan runs short), with the models' epilogues. */
static void test_dwconv_nhwc_models(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  const dw_case cases[] = {
      {1, 32, 40, 40, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 0, false},
      {1, 96, 30, 30, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 0, false},
      {1, 144, 28, 28, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 0, false},
      {1, 144, 28, 28, 5, 5, 2, 2, 1, 1, {2, 2, 2, 2}, true, KN_ACT_SILU, 0, true},
      {1, 240, 28, 28, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, true, KN_ACT_SILU, 0, false},
      {1, 240, 28, 28, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, KN_ACT_SILU, 2, false},
      {1, 384, 14, 14, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 1, false},
      {1, 576, 14, 14, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 0, false},
      {1, 672, 14, 14, 5, 5, 2, 2, 1, 1, {2, 2, 2, 2}, true, KN_ACT_SILU, 0, false},
      {2, 480, 14, 14, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, true, KN_ACT_SILU, 1, true},
      {1, 960, 7, 7, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 2, false},
      {1, 1152, 7, 7, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, true, KN_ACT_SILU, 0, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) dw_run(&cases[i], pool2);
  kn_pool_free(pool2);
}

/* Geometries the sweep leaves out: non-square and even kernels, stride 3,
 * different strides per dim, pads wider than the kernel, kernel 1, 1x1
 * images, wide rows (several interior blocks and every remainder). */
static void test_dwconv_nhwc_odd(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  const dw_case cases[] = {
      {1, 5, 9, 31, 1, 5, 1, 2, 1, 1, {0, 2, 0, 2}, true, KN_ACT_RELU, 0, false},
      {2, 3, 17, 40, 3, 1, 2, 1, 1, 1, {1, 0, 1, 0}, true, KN_ACT_CLIP, 1, true},
      {1, 17, 23, 50, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, false, KN_ACT_NONE, 2, false},
      {1, 19, 16, 16, 3, 3, 1, 2, 1, 1, {1, 1, 1, 1}, true, KN_ACT_SILU, 0, false},
      {1, 20, 16, 16, 3, 3, 2, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_GELU, 2, true},
      {1, 2, 6, 6, 3, 3, 1, 1, 1, 1, {4, 5, 3, 6}, true, KN_ACT_RELU, 1, false},
      {1, 33, 7, 7, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_NONE, 0, true},
      {2, 16, 12, 96, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 2, false},
      {1, 3, 64, 64, 5, 5, 2, 2, 1, 1, {2, 2, 2, 2}, true, KN_ACT_RELU, 0, false},
      {1, 2, 10, 301, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 0, false},
      {1, 13, 9, 37, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, true, KN_ACT_TANH, 1, false},
      {1, 11, 9, 38, 5, 5, 2, 2, 1, 1, {1, 2, 3, 0}, true, KN_ACT_HARDSIGMOID, 2, true},
      {1, 1, 1, 1, 3, 3, 2, 2, 2, 2, {2, 2, 2, 2}, true, KN_ACT_HARDSWISH, 1, false},
      {2, 37, 1, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_LEAKYRELU, 0, true},
      {1, 29, 1, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, KN_ACT_SIGMOID, 2, false},
      {1, 24, 11, 13, 2, 4, 1, 1, 1, 1, {0, 1, 1, 2}, true, KN_ACT_RELU, 0, false},
      {1, 41, 15, 15, 3, 3, 3, 3, 2, 2, {2, 2, 2, 2}, true, KN_ACT_CLIP, 1, true},
      {1, 7, 10, 10, 5, 5, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_NONE, 0, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) dw_run(&cases[i], pool2);
  kn_pool_free(pool2);
}

/* Narrow groups (q = 2, 4, 8 channels in and out per group: ResNeXt's
 * 3x3 convs and smaller): channel tails of every vector width in whole
 * groups, strides, dilation, pads, batch 2, every epilogue form. */
static void test_dwconv_nhwc_groups(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  const dw_case cases[] = {
      {1, 128, 14, 14, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, KN_ACT_RELU, 0, false, 4},
      {1, 256, 9, 9, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, false, KN_ACT_RELU, 0, false, 8},
      {2, 12, 7, 11, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 1, false, 4},
      {1, 24, 10, 10, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, true, KN_ACT_SILU, 2, false, 8},
      {1, 6, 13, 9, 5, 5, 2, 1, 1, 1, {2, 0, 1, 2}, true, KN_ACT_NONE, 0, false, 2},
      {1, 40, 5, 19, 3, 3, 1, 1, 1, 1, {0, 1, 2, 0}, true, KN_ACT_GELU, 1, false, 8},
      {1, 36, 6, 6, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_NONE, 2, false, 4},
      {2, 34, 8, 33, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_RELU, 0, false, 2},
      {1, 8, 1, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_HARDSWISH, 1, false, 8},
      {1, 64, 4, 25, 3, 3, 3, 2, 1, 1, {1, 1, 1, 1}, false, KN_ACT_TANH, 0, false, 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) dw_run(&cases[i], pool2);
  kn_pool_free(pool2);
}

/* ---- pooling -------------------------------------------------------------- */

typedef struct pool_case {
  int64_t n, c, h, w, kh, kw, sh, sw, dh, dw;
  int64_t pads[4];
  bool ceil_mode, is_max, count_include_pad;
} pool_case;

/* Output size as src/ops/pooling.c resolves it (NOTSET pads). */
static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                        bool ceil_mode) {
  int64_t ek = (k - 1) * d + 1, total = in + pb + pe;
  int64_t out = ceil_mode ? (total - ek + s - 1) / s + 1 : (total - ek) / s + 1;
  if (ceil_mode && (out - 1) * s >= in + pb) out--;
  return out;
}

static void pool_run(const pool_case *pc, kn_pool *pool2) {
  int64_t oh = pool_out(pc->h, pc->kh, pc->sh, pc->dh, pc->pads[0], pc->pads[2], pc->ceil_mode);
  int64_t ow = pool_out(pc->w, pc->kw, pc->sw, pc->dw, pc->pads[1], pc->pads[3], pc->ceil_mode);
  assert_true(oh >= 1 && ow >= 1);
  const int64_t n = pc->n, c = pc->c, hw = pc->h * pc->w, ohw = oh * ow;
  kn_pool2d p = {.planes = n * c, .h = pc->h, .w = pc->w, .oh = oh, .ow = ow, .kh = pc->kh,
                 .kw = pc->kw, .sh = pc->sh, .sw = pc->sw, .dh = pc->dh, .dw = pc->dw,
                 .pt = pc->pads[0], .pl = pc->pads[1], .pb = pc->pads[2], .pr = pc->pads[3],
                 .is_max = pc->is_max, .count_include_pad = pc->count_include_pad};
  int64_t nx = n * c * hw, ny = n * c * ohw;
  float *x = tk_rand_buf(nx, 21), *xn = malloc((size_t)nx * sizeof(float));
  assert_non_null(xn);
  to_nhwc(x, xn, n, c, hw);
  /* scalar reference in double (src/ops/pooling.c's rules) */
  double *want = malloc((size_t)ny * sizeof(double));
  assert_non_null(want);
  for (int64_t pl = 0; pl < n * c; pl++)
    for (int64_t oy = 0; oy < oh; oy++)
      for (int64_t ox = 0; ox < ow; ox++) {
        double acc = pc->is_max ? -INFINITY : 0.0;
        int64_t cnt = 0, cnt_pad = 0;
        for (int64_t ky = 0; ky < pc->kh; ky++)
          for (int64_t kx = 0; kx < pc->kw; kx++) {
            int64_t iy = oy * pc->sh - pc->pads[0] + ky * pc->dh;
            int64_t ix = ox * pc->sw - pc->pads[1] + kx * pc->dw;
            if (iy < pc->h + pc->pads[2] && ix < pc->w + pc->pads[3]) cnt_pad++;
            if (iy < 0 || iy >= pc->h || ix < 0 || ix >= pc->w) continue;
            double v = x[pl * hw + iy * pc->w + ix];
            acc = pc->is_max ? fmax(acc, v) : acc + v;
            cnt++;
          }
        int64_t div = pc->count_include_pad ? cnt_pad : cnt;
        want[pl * ohw + oy * ow + ox] = pc->is_max ? acc : div ? acc / (double)div : NAN;
      }
  char what[220];
  snprintf(what, sizeof what,
           "pool2d_nhwc %s n%lld c%lld %lldx%lld k%lldx%lld s%lldx%lld d%lldx%lld pads %lld,"
           "%lld,%lld,%lld ceil %d cip %d",
           pc->is_max ? "max" : "avg", (long long)n, (long long)c, (long long)pc->h,
           (long long)pc->w, (long long)pc->kh, (long long)pc->kw, (long long)pc->sh,
           (long long)pc->sw, (long long)pc->dh, (long long)pc->dw, (long long)pc->pads[0],
           (long long)pc->pads[1], (long long)pc->pads[2], (long long)pc->pads[3],
           (int)pc->ceil_mode, (int)pc->count_include_pad);
  uint64_t feat = kn_cpu_features();
  float *y1 = malloc((size_t)ny * sizeof(float)), *y2 = malloc((size_t)ny * sizeof(float));
  float *yt = malloc((size_t)ny * sizeof(float)), *yc = malloc((size_t)ny * sizeof(float));
  assert_true(y1 && y2 && yt && yc);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    void *sc = scratch_of(kn_f32_pool2d_scratch((kn_isa)isa, &p, 1, NULL));
    kn_f32_pool2d((kn_isa)isa, NULL, &p, x, yc, sc, NULL);
    free(sc);
    kn_pool2d pn = p;
    pn.planes = n;
    for (int threads = 1; threads <= 2; threads++) {
      float *y = threads == 1 ? y1 : y2;
      for (int64_t i = 0; i < ny; i++) y[i] = NAN;
      sc = scratch_of(kn_f32_pool2d_nhwc_scratch((kn_isa)isa, &pn, c, threads));
      kn_f32_pool2d_nhwc((kn_isa)isa, threads == 2 ? pool2 : NULL, &pn, c, xn, y, sc);
      free(sc);
      to_nchw(y, yt, n, c, ohw);
      for (int64_t i = 0; i < ny; i++) {
        double wv = want[i];
        bool ok = isnan(wv) ? isnan(yt[i])
                            : fabs((double)yt[i] - wv) <= 1e-6 * (1.0 + fabs(wv)) ||
                                  (isinf(wv) && (double)yt[i] == wv);
        if (!ok)
          fail_msg("%s [%s, %d threads]: element %lld (NCHW order) is %.9g, reference %.9g",
                   what, kn_isa_name((kn_isa)isa), threads, (long long)i, (double)yt[i], wv);
        if (!(pc->is_max ? yt[i] == yc[i] : close_ulps(yt[i], yc[i], 2.0f)))
          fail_msg("%s [%s, %d threads]: element %lld (NCHW order) is %.9g, NCHW kernel %.9g",
                   what, kn_isa_name((kn_isa)isa), threads, (long long)i, (double)yt[i],
                   (double)yc[i]);
      }
    }
    if (memcmp(y1, y2, (size_t)ny * sizeof(float)))
      fail_msg("%s [%s]: 1 and 2 threads differ", what, kn_isa_name((kn_isa)isa));
  }
  free(y1), free(y2), free(yt), free(yc), free(want), free(x), free(xn);
}

static void test_pool2d_nhwc(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  static const int64_t chans[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 47, 64, 65, 129};
  int i = 0;
  /* window x stride x dilation x pads x mode sweep */
  for (int k = 1; k <= 3; k++)
    for (int s = 1; s <= 3; s++)
      for (int d = 1; d <= 2; d++)
        for (int mode = 0; mode < 4; mode++, i++) {
          pool_case pc = {.kh = k, .kw = k == 3 ? 2 : k, .sh = s, .sw = s == 3 ? 2 : s, .dh = d,
                          .dw = d};
          pc.c = chans[i % 15];
          pc.n = 1 + i % 2;
          pc.h = 5 + (i * 7) % 11;
          pc.w = 4 + (i * 5) % 13;
          pc.is_max = mode < 2;
          pc.count_include_pad = mode == 3;
          pc.ceil_mode = i % 3 == 1;
          int64_t pk = (pc.kh - 1) * d / 2 + (i % 2);
          pc.pads[0] = pk, pc.pads[1] = i % 3 ? 0 : pk;
          pc.pads[2] = i % 4 ? pk : 0, pc.pads[3] = pk + (i % 5 == 0);
          /* ONNX requires pads smaller than the kernel */
          for (int q = 0; q < 4; q++) {
            int64_t kk = q % 2 ? pc.kw : pc.kh;
            if (pc.pads[q] >= kk) pc.pads[q] = kk - 1;
          }
          pool_run(&pc, pool2);
        }
  /* model shapes: ResNet's stem max pool, an average pool, 1x1 images */
  const pool_case cases[] = {
      {1, 64, 56, 56, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, false, true, false},
      {2, 40, 28, 28, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, false, true},
      {1, 96, 14, 14, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, true, true, false},
      {1, 257, 9, 9, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, false, false},
      {1, 33, 1, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, false},
      {2, 5, 1, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false, true, false},
      {1, 6, 1, 1, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, false, true},
      {1, 23, 7, 11, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, false, false, false},
      {1, 19, 10, 10, 2, 2, 3, 3, 2, 2, {1, 0, 1, 1}, true, false, true},
  };
  for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) pool_run(&cases[q], pool2);
  kn_pool_free(pool2);
}

static void test_global_pool_nhwc(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  static const int64_t cases[][3] = {
      {1, 49, 1280}, {2, 49, 1152}, {1, 196, 17}, {2, 1, 33},   {1, 3, 1},   {1, 64, 2048},
      {1, 7, 65},    {2, 25, 129},  {1, 2, 7},    {3, 9, 15},   {1, 3136, 64}, {1, 0, 9},
      /* pixel blocks (more than 1024 pixels): a block and one pixel, partial last blocks */
      {1, 12544, 32}, {2, 1025, 17}, {3, 2100, 144}, {1, 3136, 1},
  };
  uint64_t feat = kn_cpu_features();
  for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
    int64_t n = cases[q][0], size = cases[q][1], c = cases[q][2];
    float *x = tk_rand_buf(n * size * c, 31), *xn = malloc((size_t)(n * size * c + 1) * sizeof(float));
    float *yc = malloc((size_t)(n * c) * sizeof(float)), *yt = malloc((size_t)(n * c) * sizeof(float));
    float *y[2] = {malloc((size_t)(n * c) * sizeof(float)), malloc((size_t)(n * c) * sizeof(float))};
    assert_true(xn && yc && yt && y[0] && y[1]);
    to_nhwc(x, xn, n, c, size);
    for (int is_max = 0; is_max <= 1; is_max++)
      for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
        if (!kn_isa_available((kn_isa)isa, feat)) continue;
        kn_f32_global_pool((kn_isa)isa, NULL, is_max, n * c, size, x, yc);
        for (int threads = 1; threads <= 2; threads++) {
          float *yy = y[threads - 1];
          for (int64_t i = 0; i < n * c; i++) yy[i] = NAN;
          float *part = malloc(kn_f32_global_pool_nhwc_scratch(n, size, c));
          assert_non_null(part);
          kn_f32_global_pool_nhwc((kn_isa)isa, threads == 2 ? pool2 : NULL, is_max, n, size, c,
                                  xn, yy, part);
          free(part);
          for (int64_t i = 0; i < n * c; i++) {
            bool ok = is_max ? yy[i] == yc[i]
                             : (isnan(yc[i]) ? isnan(yy[i])
                                             : fabsf(yy[i] - yc[i]) <= 2e-6f * (1.0f + sqrtf((float)size)) * 0.5f);
            if (!ok)
              fail_msg("global_pool_nhwc %s n%lld size %lld c%lld [%s, %d threads]: [%lld] is "
                       "%.9g, NCHW kernel %.9g",
                       is_max ? "max" : "avg", (long long)n, (long long)size, (long long)c,
                       kn_isa_name((kn_isa)isa), threads, (long long)i, (double)yy[i],
                       (double)yc[i]);
          }
        }
        if (memcmp(y[0], y[1], (size_t)(n * c) * sizeof(float)))
          fail_msg("global_pool_nhwc n%lld size %lld c%lld [%s]: 1 and 2 threads differ",
                   (long long)n, (long long)size, (long long)c, kn_isa_name((kn_isa)isa));
      }
    free(x), free(xn), free(yc), free(yt), free(y[0]), free(y[1]);
  }
  kn_pool_free(pool2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dwconv_nhwc_sweep),
      cmocka_unit_test(test_dwconv_nhwc_models),
      cmocka_unit_test(test_dwconv_nhwc_odd),
      cmocka_unit_test(test_dwconv_nhwc_groups),
      cmocka_unit_test(test_pool2d_nhwc),
      cmocka_unit_test(test_global_pool_nhwc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
