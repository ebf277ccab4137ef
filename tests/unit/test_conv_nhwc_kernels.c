/* The channels-last convolution (kn_f32_conv_nhwc, conv_igemm_nhwc in
 * src/kernels/conv) on every ISA this machine has, 1 and 2 threads,
 * against the reference NCHW Conv (kn_conv_forward_f32) on transposed
 * inputs, followed by the epilogue computed in double.
 *
 * Shapes: ResNet-50 and MobileNetV2 layers at reduced sizes (1x1, 3x3,
 * the 7x7 stride-2 stem with 3 channels, 1x1 stride 2), output channel
 * counts hitting every tail of every ISA's vector and panel widths (1, 3,
 * 8, 15, 16, 17, 24, 40, 63, 64, 65, 96, 144, 200), pixel counts that are
 * and are not multiples of the row tiles, prime channel counts, 1 channel,
 * 1x1 images, strides 2 and 3, dilation 2, asymmetric pads, groups 2 and
 * 4, batch 2, depths split into blocks; every epilogue form (no bias, bias, each activation, a
 * residual before or after the activation) and the input-channel scale s.
 * Outputs start full of NaNs, so an element the kernel does not write
 * fails, and the 1- and 2-thread results must be bit-identical.  Written
 * as a channel slice of a wider output (kn_conv2d.ldy, a Concat filled in
 * place), the result must be the same bits on 1, 2 and 3 threads with
 * every float outside the slice left as it was. */
#include <math.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "kernels/conv/conv.h"
#include "ops/conv_ref.h"
#include "testkit.h"

typedef struct nc_case {
  int64_t n, c, h, w, m, group, kh, kw, sh, sw, dh, dw;
  int64_t pads[4]; /* top, left, bottom, right */
  bool bias;
  kn_act act;
  int res; /* 0 none, 1 after the activation, 2 before */
  bool scale;
} nc_case;

/* Output slices: the extra floats between one output pixel's m channels
 * and the next (ldy = m + extra) when the conv writes its channels of a
 * Concat in place (kn_conv2d.ldy). */
static const int64_t slice_extras[] = {0, 1, 5, 16, 37};

/* Runs the conv of g (weights packed in wp) with ldy = m + extra into a
 * buffer of sentinels, y at channel `off` of each wider pixel; asserts the
 * slice holds exactly `plain` (the same kernel's result at ldy 0, [np, m])
 * and every float around it is still the sentinel. */
static void check_slice(kn_isa isa, kn_pool *pool, const kn_conv2d *g0, const float *x,
                        const float *s, const float *wp, const kn_epilogue *ep,
                        const float *plain, int64_t extra, int64_t off, const char *what) {
  static const float sentinel = 12345.0f;
  kn_conv2d g = *g0;
  g.ldy = g.m + extra;
  int64_t np = g.n * g.oh * g.ow;
  float *buf = tk_slice_buffer(np, g.ldy, sentinel);
  int32_t threads = kn_pool_threads(pool);
  size_t sb = kn_f32_conv_nhwc_scratch(isa, &g, threads, s != NULL, NULL);
  void *scratch = aligned_alloc(64, (sb + 63) / 64 * 64 + 64);
  assert_non_null(scratch);
  kn_f32_conv_nhwc(isa, pool, &g, x, s, wp, ep, buf + off, scratch, NULL);
  free(scratch);
  tk_check_slice(buf, np, g.m, g.ldy, off, plain, sentinel, what, kn_isa_name(isa), threads);
  free(buf);
}

static void run_case_at(const nc_case *k, kn_pool *pool2, kn_pool *pool3, bool slices);

static void run_case(const nc_case *k, kn_pool *pool2) { run_case_at(k, pool2, NULL, false); }

/* With `slices` (no residual: a slice takes none), the result of each ISA
 * is also written as a channel slice of wider outputs, which must give
 * the same bits: every extra of slice_extras at a middle offset (0 at 0)
 * on 1, 2 and 3 threads (pool3), at its first and last offsets on 1;
 * past 16k outputs only extras 1 and 37 at the middle offset on 1 and 2
 * threads (time). */
static void run_case_at(const nc_case *k, kn_pool *pool2, kn_pool *pool3, bool slices) {
  int64_t ekh = (k->kh - 1) * k->dh + 1, ekw = (k->kw - 1) * k->dw + 1;
  int64_t oh = (k->h + k->pads[0] + k->pads[2] - ekh) / k->sh + 1;
  int64_t ow = (k->w + k->pads[1] + k->pads[3] - ekw) / k->sw + 1;
  assert_true(oh >= 1 && ow >= 1);
  kn_conv2d g = {.n = k->n, .c = k->c, .h = k->h, .w = k->w, .m = k->m, .oh = oh, .ow = ow,
                 .group = k->group, .kh = k->kh, .kw = k->kw, .sh = k->sh, .sw = k->sw,
                 .dh = k->dh, .dw = k->dw, .pt = k->pads[0], .pl = k->pads[1]};
  int64_t hw = k->h * k->w, ohw = oh * ow, cg = k->c / k->group;
  int64_t nx = k->n * k->c * hw, ny = k->n * k->m * ohw;
  float *x = tk_rand_buf(nx, 7), *w = tk_rand_buf(k->m * cg * k->kh * k->kw, 8);
  float *bias = tk_rand_buf(k->m, 9), *s = tk_rand_buf(k->n * k->c, 11);
  float *res = tk_rand_buf(ny, 10); /* NHWC */
  /* NCHW copies for the reference: x scaled by s */
  float *xr = malloc((size_t)nx * sizeof(float)), *xh = malloc((size_t)nx * sizeof(float));
  assert_true(xr && xh);
  for (int64_t b = 0; b < k->n; b++)
    for (int64_t ch = 0; ch < k->c; ch++)
      for (int64_t i = 0; i < hw; i++) {
        float v = x[(b * k->c + ch) * hw + i];
        xh[(b * hw + i) * k->c + ch] = v;
        xr[(b * k->c + ch) * hw + i] = k->scale ? v * s[b * k->c + ch] : v;
      }
  kn_conv_geom rg;
  memset(&rg, 0, sizeof rg);
  rg.nd = 2;
  rg.n = k->n, rg.c = k->c, rg.m = k->m, rg.group = k->group;
  rg.x_sp[0] = k->h, rg.x_sp[1] = k->w, rg.y_sp[0] = oh, rg.y_sp[1] = ow;
  rg.k[0] = k->kh, rg.k[1] = k->kw, rg.s[0] = k->sh, rg.s[1] = k->sw;
  rg.d[0] = k->dh, rg.d[1] = k->dw;
  rg.pb[0] = k->pads[0], rg.pb[1] = k->pads[1], rg.pe[0] = k->pads[2], rg.pe[1] = k->pads[3];
  rg.ksz = k->kh * k->kw, rg.x_size = hw, rg.y_size = ohw;
  float *ref = calloc((size_t)ny, sizeof(float));
  assert_non_null(ref);
  assert_true(kn_conv_forward_f32(&rg, xr, w, ref, NULL, NULL));
  kn_epilogue ep = {.act = {.act = k->act, .alpha = 0.1f, .beta = 0.6f, .lo = -0.5f,
                            .hi = 0.75f},
                    .bias = k->bias ? bias : NULL, .res = k->res ? res : NULL,
                    .res_first = k->res == 2};
  /* the expected output in NHWC */
  double *want = malloc((size_t)ny * sizeof(double));
  assert_non_null(want);
  for (int64_t b = 0; b < k->n; b++)
    for (int64_t o = 0; o < k->m; o++)
      for (int64_t i = 0; i < ohw; i++) {
        int64_t at = (b * ohw + i) * k->m + o;
        double v = ref[(b * k->m + o) * ohw + i];
        if (ep.bias) v += bias[o];
        if (k->res == 2) v += res[at];
        v = tk_act_ref(&ep.act, v);
        if (k->res == 1) v += res[at];
        want[at] = v;
      }
  double tol = 2e-6 * (4.0 + sqrt((double)(cg * k->kh * k->kw)) * 2.0);
  char what[240];
  snprintf(what, sizeof what,
           "conv_nhwc n%lld c%lld %lldx%lld m%lld g%lld k%lldx%lld s%lldx%lld d%lldx%lld "
           "pads %lld,%lld,%lld,%lld bias %d act %s res %d scale %d",
           (long long)k->n, (long long)k->c, (long long)k->h, (long long)k->w, (long long)k->m,
           (long long)k->group, (long long)k->kh, (long long)k->kw, (long long)k->sh,
           (long long)k->sw, (long long)k->dh, (long long)k->dw, (long long)k->pads[0],
           (long long)k->pads[1], (long long)k->pads[2], (long long)k->pads[3], (int)k->bias,
           kn_act_name(k->act)[0] ? kn_act_name(k->act) : "none", k->res, (int)k->scale);
  uint64_t feat = kn_cpu_features();
  float *y1 = malloc((size_t)ny * sizeof(float)), *y2 = malloc((size_t)ny * sizeof(float));
  assert_true(y1 && y2);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    size_t pb = kn_f32_conv_nhwc_pack_size((kn_isa)isa, &g);
    float *wp = malloc((pb > 0 ? pb : 1) * sizeof(float));
    assert_non_null(wp);
    kn_f32_conv_nhwc_pack((kn_isa)isa, &g, w, wp);
    for (int threads = 1; threads <= 2; threads++) {
      float *y = threads == 1 ? y1 : y2;
      for (int64_t i = 0; i < ny; i++) y[i] = NAN;
      size_t sb = kn_f32_conv_nhwc_scratch((kn_isa)isa, &g, threads, k->scale, NULL);
      void *scratch = aligned_alloc(64, (sb + 63) / 64 * 64 + 64);
      assert_non_null(scratch);
      kn_f32_conv_nhwc((kn_isa)isa, threads == 2 ? pool2 : NULL, &g, xh, k->scale ? s : NULL,
                       wp, &ep, y, scratch, NULL);
      free(scratch);
      for (int64_t i = 0; i < ny; i++)
        if (!(fabs((double)y[i] - want[i]) <= tol * (1.0 + fabs(want[i]))))
          fail_msg("%s [%s, %d threads]: element %lld (pixel %lld, channel %lld) is %.9g, "
                   "reference %.9g",
                   what, kn_isa_name((kn_isa)isa), threads, (long long)i,
                   (long long)(i / k->m), (long long)(i % k->m), (double)y[i], want[i]);
    }
    if (memcmp(y1, y2, (size_t)ny * sizeof(float)))
      fail_msg("%s [%s]: 1 and 2 threads differ", what, kn_isa_name((kn_isa)isa));
    for (size_t e = 0; slices && e < sizeof slice_extras / sizeof slice_extras[0]; e++) {
      int64_t extra = slice_extras[e];
      const int64_t offs[3] = {0, (extra + 1) / 2, extra};
      bool large = ny > 16384;
      if (large && extra != 1 && extra != 37) continue;
      for (int o = 0; o < 3; o++) {
        if ((o > 0 && offs[o] == offs[o - 1]) || (large && o != 1)) continue;
        kn_pool *pools[3] = {NULL, pool2, pool3};
        for (int t = 0; t < (o != 1 && extra > 0 ? 1 : large ? 2 : 3); t++)
          check_slice((kn_isa)isa, pools[t], &g, xh, k->scale ? s : NULL, wp, &ep, y1, extra,
                      offs[o], what);
      }
    }
    free(wp);
  }
  free(y1);
  free(y2);
  free(want);
  free(ref);
  free(xr);
  free(xh);
  free(x);
  free(w);
  free(bias);
  free(s);
  free(res);
}

static const kn_act acts[] = {KN_ACT_NONE,      KN_ACT_RELU,        KN_ACT_CLIP,
                              KN_ACT_SIGMOID,   KN_ACT_SILU,        KN_ACT_HARDSWISH,
                              KN_ACT_LEAKYRELU, KN_ACT_HARDSIGMOID, KN_ACT_TANH,
                              KN_ACT_GELU};

/* Output channel counts over every tail of 4-, 8- and 16-float vectors and
 * of 8-, 24- and 64-column panels, with pixel counts and input channels
 * cycling through theirs; 1x1 and 3x3 kernels. */
static void test_conv_nhwc_tails(void **state) {
  (void)state;
  static const int64_t ms[] = {1, 3, 8, 15, 16, 17, 24, 40, 63, 64, 65, 96, 144, 200};
  static const int64_t cs[] = {1, 2, 5, 16, 17, 32};
  static const int64_t sp[][2] = {{1, 1}, {7, 7}, {5, 3}, {4, 9}, {14, 14}, {6, 11}};
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  int i = 0;
  for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
    for (int k = 1; k <= 3; k += 2, i++) {
      nc_case c = {.n = 1 + i % 5 / 4, .c = cs[i % 6], .m = ms[mi], .group = 1, .kh = k,
                   .kw = k, .sh = 1, .sw = 1, .dh = 1, .dw = 1};
      c.h = sp[i % 6][0];
      c.w = sp[i % 6][1];
      int64_t pd = k / 2;
      c.pads[0] = c.pads[1] = c.pads[2] = c.pads[3] = pd;
      c.bias = i % 3 != 2;
      c.act = acts[i % 10];
      c.res = i % 3;
      c.scale = i % 4 == 1;
      run_case(&c, pool2);
    }
  kn_pool_free(pool2);
}

/* Geometries: strides, dilations, pads, groups, batch, the stem. */
static void test_conv_nhwc_geometry(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  const nc_case cases[] = {
      /* ResNet-50 shapes, smaller planes */
      {1, 64, 14, 14, 256, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_RELU, 0, false},
      {1, 256, 7, 7, 64, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_NONE, 1, false},
      {1, 64, 14, 14, 64, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_RELU, 0, false},
      {1, 128, 7, 7, 128, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_RELU, 1, false},
      {1, 128, 14, 14, 96, 1, 1, 1, 2, 2, 1, 1, {0, 0, 0, 0}, true, KN_ACT_NONE, 0, false},
      /* the stem: 7x7 stride 2 on 3 channels (row taps), and with s */
      {1, 3, 40, 40, 64, 1, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, true, KN_ACT_RELU, 0, false},
      {2, 3, 23, 19, 24, 1, 7, 7, 2, 2, 1, 1, {3, 2, 1, 3}, true, KN_ACT_CLIP, 2, true},
      {1, 1, 17, 13, 17, 1, 3, 5, 1, 1, 1, 1, {1, 2, 1, 2}, false, KN_ACT_SILU, 1, true},
      {1, 4, 9, 9, 8, 1, 3, 3, 1, 1, 1, 2, {1, 2, 1, 2}, true, KN_ACT_RELU, 0, true},
      /* strides 2 and 3, dilation 2, asymmetric pads */
      {1, 17, 15, 13, 33, 1, 3, 3, 2, 2, 1, 1, {1, 0, 0, 1}, true, KN_ACT_HARDSWISH, 0, false},
      {1, 7, 16, 17, 20, 1, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, true, KN_ACT_RELU, 2, false},
      {1, 5, 12, 12, 29, 1, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, true, KN_ACT_TANH, 1, true},
      {2, 6, 11, 9, 10, 1, 3, 2, 2, 1, 2, 1, {3, 0, 1, 2}, false, KN_ACT_GELU, 2, false},
      {1, 3, 1, 1, 5, 1, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, KN_ACT_SIGMOID, 1, false},
      {1, 9, 1, 1, 70, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_CLIP, 2, true},
      {1, 2, 6, 6, 3, 1, 3, 3, 1, 1, 1, 1, {4, 5, 3, 6}, true, KN_ACT_RELU, 1, false},
      /* a squeeze-and-excitation gate on a projection: many pixels, few
       * output channels (the weights take the scale), and the same on
       * two images (the A rows take it) */
      {1, 40, 24, 24, 16, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_NONE, 1, true},
      {2, 40, 24, 24, 16, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_NONE, 1, true},
      {1, 24, 20, 20, 100, 2, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, KN_ACT_SILU, 0, true},
      /* groups 2 and 4, batch 2 */
      {1, 32, 10, 10, 64, 2, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_RELU, 1, true},
      {2, 16, 9, 7, 40, 4, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, KN_ACT_LEAKYRELU, 2, false},
      {2, 12, 5, 5, 8, 4, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, KN_ACT_HARDSIGMOID, 0, true},
      {2, 8, 8, 8, 6, 2, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, true, KN_ACT_NONE, 1, false},
      /* taps in the padding skipped per block: ASPP's dilation 12 on a
       * 20x20 map (a quarter of the (tap, pixel) pairs read the input),
       * dilation 3 on 5x7 with a scale, a 7x7 on 3x3, batch 2 */
      {1, 24, 20, 20, 40, 1, 3, 3, 1, 1, 12, 12, {12, 12, 12, 12}, true, KN_ACT_RELU, 1, false},
      {1, 9, 5, 7, 17, 1, 3, 3, 1, 1, 3, 3, {3, 3, 3, 3}, true, KN_ACT_SILU, 2, true},
      {2, 8, 3, 3, 20, 1, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, false, KN_ACT_NONE, 0, false},
      {1, 16, 12, 12, 16, 2, 3, 3, 1, 1, 6, 6, {6, 6, 6, 6}, true, KN_ACT_CLIP, 0, false},
      /* depth split into blocks (panels over 256 KiB on AVX-512, 2.7k
       * depth steps on AVX2): by taps, by channels, with every epilogue */
      {1, 128, 5, 6, 80, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_SILU, 2, false},
      {1, 160, 4, 5, 20, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 1, true},
      {1, 3001, 2, 3, 70, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_RELU, 1, true},
      {2, 2900, 3, 2, 17, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_TANH, 2, false},
      /* MobileNetV2 pointwise layers */
      {1, 24, 14, 14, 144, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_CLIP, 0, false},
      {1, 96, 7, 7, 24, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_NONE, 1, true},
      {2, 160, 3, 3, 200, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_SILU, 2, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], pool2);
  kn_pool_free(pool2);
}

/* Channel slices of wider outputs (a Concat written in place): every
 * tail of the vector and panel widths, 1x1 and 3x3, bias with Relu or
 * Clip in the micro-kernel's registers and Silu, Sigmoid, HardSwish in
 * the pass after it, the input-channel scale (in the A rows and in the
 * weights), groups 2 and 4, strides, batch 2, the row-tap stem and depths
 * split into blocks: the slice bit-identical to the unstrided result, the
 * floats around it untouched. */
static void test_conv_nhwc_slices(void **state) {
  (void)state;
  static const int64_t ms[] = {1, 3, 7, 8, 15, 16, 17, 24, 31, 33, 40, 63, 64, 65};
  static const int64_t cs[] = {1, 3, 16, 17, 8};
  static const int64_t sp[][2] = {{1, 1}, {5, 3}, {4, 9}, {6, 11}, {7, 7}};
  static const kn_act slice_acts[] = {KN_ACT_RELU, KN_ACT_CLIP,      KN_ACT_SILU,
                                      KN_ACT_NONE, KN_ACT_SIGMOID,   KN_ACT_RELU,
                                      KN_ACT_CLIP, KN_ACT_HARDSWISH};
  kn_pool *pool2, *pool3;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  assert_int_equal(kn_pool_create(3, &pool3, &err), KN_OK);
  int i = 0;
  for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
    for (int k = 1; k <= 3; k += 2, i++) {
      nc_case c = {.n = 1 + i % 3 / 2, .c = cs[i % 5], .m = ms[mi], .group = 1, .kh = k,
                   .kw = k, .sh = 1, .sw = 1, .dh = 1, .dw = 1};
      c.h = sp[i % 5][0];
      c.w = sp[i % 5][1];
      c.pads[0] = c.pads[1] = c.pads[2] = c.pads[3] = k / 2;
      c.bias = i % 4 != 3;
      c.act = slice_acts[i % 8];
      c.scale = i % 3 == 1;
      run_case_at(&c, pool2, pool3, true);
    }
  const nc_case cases[] = {
      /* SqueezeNet's fire expand convs (1x1 and 3x3 with Relu) */
      {1, 16, 13, 13, 64, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_RELU, 0, false},
      {1, 16, 13, 13, 64, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_RELU, 0, false},
      /* groups 2 and 4, with strides, dilation, batch 2 and the scale */
      {1, 32, 10, 10, 64, 2, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_RELU, 0, true},
      {2, 16, 9, 7, 40, 4, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, KN_ACT_SILU, 0, false},
      {2, 12, 5, 5, 12, 4, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, KN_ACT_CLIP, 0, true},
      {2, 8, 8, 8, 6, 2, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, true, KN_ACT_SIGMOID, 0, false},
      {1, 24, 20, 20, 100, 2, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, KN_ACT_SILU, 0, true},
      /* the stem's row taps (3 channels, 7x7 stride 2, asymmetric pads) */
      {2, 3, 23, 19, 24, 1, 7, 7, 2, 2, 1, 1, {3, 2, 1, 3}, true, KN_ACT_CLIP, 0, true},
      {1, 17, 15, 13, 33, 1, 3, 3, 2, 2, 1, 1, {1, 0, 0, 1}, true, KN_ACT_HARDSWISH, 0, false},
      /* the scale folded into the weights (many pixels, few channels) */
      {1, 40, 24, 24, 16, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_RELU, 0, true},
      {2, 40, 12, 12, 17, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_SILU, 0, true},
      /* depth split into blocks: the epilogue on the last block only */
      {1, 128, 5, 6, 80, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_SILU, 0, false},
      {1, 160, 4, 5, 20, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 0, true},
      {2, 2900, 3, 2, 17, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_RELU, 0, false},
  };
  for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++)
    run_case_at(&cases[j], pool2, pool3, true);
  kn_pool_free(pool2);
  kn_pool_free(pool3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_nhwc_tails),
      cmocka_unit_test(test_conv_nhwc_geometry),
      cmocka_unit_test(test_conv_nhwc_slices),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
