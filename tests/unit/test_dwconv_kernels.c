/* The depthwise convolution kernel (kn_f32_dwconv, src/kernels/conv) on
 * every ISA this machine has, 1 and 2 threads, against the reference Conv
 * (kn_conv_forward_f32) followed by the epilogue computed in double.
 *
 * Shapes: kernels 3, 5, 7 (and non-square ones), strides 1 and 2 (and 3),
 * dilations 1 and 2, asymmetric pads, planes of 1, 2, 7, 13, 14, 28, 57
 * (and non-square ones), channels 1, 16, 17, 33, batch 1 and 2; every
 * epilogue form (no bias, bias, each activation, a residual before or
 * after the activation).  Outputs start full of NaNs, so an element the
 * kernel does not write fails, and the 1- and 2-thread results must be
 * bit-identical. */
#include <math.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "kernels/conv/conv.h"
#include "ops/conv_ref.h"
#include "testkit.h"

typedef struct dw_case {
  int64_t n, c, h, w, kh, kw, sh, sw, dh, dw;
  int64_t pads[4]; /* top, left, bottom, right */
  bool bias;
  kn_act act;
  int res; /* 0 none, 1 after the activation, 2 before */
} dw_case;

static void run_case(const dw_case *dc, kn_pool *pool2) {
  int64_t ekh = (dc->kh - 1) * dc->dh + 1, ekw = (dc->kw - 1) * dc->dw + 1;
  int64_t oh = (dc->h + dc->pads[0] + dc->pads[2] - ekh) / dc->sh + 1;
  int64_t ow = (dc->w + dc->pads[1] + dc->pads[3] - ekw) / dc->sw + 1;
  assert_true(oh >= 1 && ow >= 1);
  kn_conv2d g = {.n = dc->n, .c = dc->c, .h = dc->h, .w = dc->w, .m = dc->c, .oh = oh,
                 .ow = ow, .group = dc->c, .kh = dc->kh, .kw = dc->kw, .sh = dc->sh,
                 .sw = dc->sw, .dh = dc->dh, .dw = dc->dw, .pt = dc->pads[0],
                 .pl = dc->pads[1]};
  int64_t nx = dc->n * dc->c * dc->h * dc->w, ny = dc->n * dc->c * oh * ow;
  float *x = tk_rand_buf(nx, 7), *w = tk_rand_buf(dc->c * dc->kh * dc->kw, 8);
  float *bias = tk_rand_buf(dc->c, 9), *res = tk_rand_buf(ny, 10);
  /* the reference Conv, then the epilogue in double */
  kn_conv_geom rg;
  memset(&rg, 0, sizeof rg);
  rg.nd = 2;
  rg.n = dc->n, rg.c = rg.m = rg.group = dc->c;
  rg.x_sp[0] = dc->h, rg.x_sp[1] = dc->w, rg.y_sp[0] = oh, rg.y_sp[1] = ow;
  rg.k[0] = dc->kh, rg.k[1] = dc->kw, rg.s[0] = dc->sh, rg.s[1] = dc->sw;
  rg.d[0] = dc->dh, rg.d[1] = dc->dw;
  rg.pb[0] = dc->pads[0], rg.pb[1] = dc->pads[1], rg.pe[0] = dc->pads[2],
  rg.pe[1] = dc->pads[3];
  rg.ksz = dc->kh * dc->kw, rg.x_size = dc->h * dc->w, rg.y_size = oh * ow;
  float *ref = calloc((size_t)ny, sizeof(float));
  assert_non_null(ref);
  assert_true(kn_conv_forward_f32(&rg, x, w, ref, NULL, NULL));
  kn_epilogue ep = {.act = {.act = dc->act, .alpha = 0.1f, .beta = 0.6f, .lo = -0.5f,
                            .hi = 0.75f},
                    .bias = dc->bias ? bias : NULL, .bias_per_row = true,
                    .res = dc->res ? res : NULL, .res_first = dc->res == 2};
  double *want = malloc((size_t)ny * sizeof(double));
  assert_non_null(want);
  for (int64_t i = 0; i < ny; i++) {
    int64_t ch = i / (oh * ow) % dc->c;
    double v = ref[i];
    if (ep.bias) v += bias[ch];
    if (dc->res == 2) v += res[i];
    v = tk_act_ref(&ep.act, v);
    if (dc->res == 1) v += res[i];
    want[i] = v;
  }
  double tol = 3e-6 * (4.0 + sqrt((double)(dc->kh * dc->kw)));
  char what[200];
  snprintf(what, sizeof what,
           "dwconv n%lld c%lld %lldx%lld k%lldx%lld s%lldx%lld d%lldx%lld pads %lld,%lld,%lld,"
           "%lld bias %d act %s res %d",
           (long long)dc->n, (long long)dc->c, (long long)dc->h, (long long)dc->w,
           (long long)dc->kh, (long long)dc->kw, (long long)dc->sh, (long long)dc->sw,
           (long long)dc->dh, (long long)dc->dw, (long long)dc->pads[0], (long long)dc->pads[1],
           (long long)dc->pads[2], (long long)dc->pads[3], (int)dc->bias,
           kn_act_name(dc->act)[0] ? kn_act_name(dc->act) : "none", dc->res);
  uint64_t feat = kn_cpu_features();
  float *y1 = malloc((size_t)ny * sizeof(float)), *y2 = malloc((size_t)ny * sizeof(float));
  assert_true(y1 && y2);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    for (int threads = 1; threads <= 2; threads++) {
      float *y = threads == 1 ? y1 : y2;
      for (int64_t i = 0; i < ny; i++) y[i] = NAN;
      size_t sb = kn_f32_dwconv_scratch((kn_isa)isa, &g, threads, NULL);
      void *scratch = aligned_alloc(64, (sb + 63) / 64 * 64);
      assert_non_null(scratch);
      kn_f32_dwconv((kn_isa)isa, threads == 2 ? pool2 : NULL, &g, x, w, &ep, y, scratch, NULL);
      free(scratch);
      for (int64_t i = 0; i < ny; i++)
        if (!(fabs((double)y[i] - want[i]) <= tol * (1.0 + fabs(want[i]))))
          fail_msg("%s [%s, %d threads]: element %lld is %.9g, reference %.9g", what,
                   kn_isa_name((kn_isa)isa), threads, (long long)i, (double)y[i], want[i]);
    }
    if (memcmp(y1, y2, (size_t)ny * sizeof(float)))
      fail_msg("%s [%s]: 1 and 2 threads differ", what, kn_isa_name((kn_isa)isa));
  }
  free(y1);
  free(y2);
  free(want);
  free(ref);
  free(x);
  free(w);
  free(bias);
  free(res);
}

/* Every kernel size x stride x dilation x plane size; channels, batch,
 * pads and epilogue cycle through their values so that each appears with
 * many of the others. */
static void test_dwconv_sweep(void **state) {
  (void)state;
  static const int64_t ks[] = {3, 5, 7}, sps[] = {1, 2, 7, 13, 14, 28, 57},
                       chans[] = {1, 16, 17, 33};
  static const kn_act acts[] = {KN_ACT_NONE,      KN_ACT_RELU,        KN_ACT_CLIP,
                                KN_ACT_SIGMOID,   KN_ACT_SILU,        KN_ACT_HARDSWISH,
                                KN_ACT_LEAKYRELU, KN_ACT_HARDSIGMOID, KN_ACT_TANH,
                                KN_ACT_GELU};
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  int i = 0;
  for (int k = 0; k < 3; k++)
    for (int s = 1; s <= 2; s++)
      for (int d = 1; d <= 2; d++)
        for (int p = 0; p < 7; p++, i++) {
          dw_case dc = {.kh = ks[k], .kw = ks[k], .sh = s, .sw = s, .dh = d, .dw = d};
          dc.h = sps[p];
          dc.w = i % 5 == 4 ? sps[(p + 3) % 7] : sps[p];
          dc.c = chans[i % 4];
          dc.n = 1 + (i / 4) % 2;
          /* a big plane with a 7x7 kernel is slow under ASan: fewer channels */
          if (dc.h * dc.w >= 28 * 28 && ks[k] == 7) dc.c = dc.c > 16 ? 3 : dc.c;
          /* pads: "same" for odd sizes, asymmetric, none, or larger */
          int64_t same = (ks[k] - 1) * d / 2;
          int pm = i % 4;
          dc.pads[0] = pm == 0 ? same : pm == 1 ? same + 1 : pm == 2 ? 0 : same;
          dc.pads[1] = pm == 0 ? same : pm == 1 ? 0 : pm == 2 ? 0 : same + 2;
          dc.pads[2] = pm == 0 ? same : pm == 1 ? same : pm == 2 ? 0 : 1;
          dc.pads[3] = pm == 0 ? same : pm == 1 ? same + 1 : pm == 2 ? 0 : 0;
          int64_t ekh = (dc.kh - 1) * d + 1, ekw = (dc.kw - 1) * d + 1;
          /* planes too small for an unpadded window get "same" pads */
          if (dc.h + dc.pads[0] + dc.pads[2] < ekh) dc.pads[0] = dc.pads[2] = ekh / 2 + 1;
          if (dc.w + dc.pads[1] + dc.pads[3] < ekw) dc.pads[1] = dc.pads[3] = ekw / 2 + 1;
          dc.bias = i % 3 != 2;
          dc.act = acts[i % 10];
          dc.res = (i / 10) % 3;
          run_case(&dc, pool2);
        }
  kn_pool_free(pool2);
}

/* Odd geometries the sweep leaves out: non-square kernels, stride 3,
 * different strides per dim, pads wider than the kernel, kernel 1. */
static void test_dwconv_odd(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  const dw_case cases[] = {
      {1, 5, 9, 31, 1, 5, 1, 2, 1, 1, {0, 2, 0, 2}, true, KN_ACT_RELU, 0},
      {2, 3, 17, 40, 3, 1, 2, 1, 1, 1, {1, 0, 1, 0}, true, KN_ACT_CLIP, 1},
      {1, 17, 23, 50, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, false, KN_ACT_NONE, 2},
      {1, 4, 16, 16, 3, 3, 1, 2, 1, 1, {1, 1, 1, 1}, true, KN_ACT_SILU, 0},
      {1, 2, 6, 6, 3, 3, 1, 1, 1, 1, {4, 5, 3, 6}, true, KN_ACT_RELU, 1},
      {1, 33, 7, 7, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, KN_ACT_NONE, 0},
      {2, 16, 12, 96, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 2},
      {1, 3, 64, 64, 5, 5, 2, 2, 1, 1, {2, 2, 2, 2}, true, KN_ACT_RELU, 0},
      {1, 2, 40, 300, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, KN_ACT_CLIP, 0},
      {1, 1, 1, 1, 3, 3, 2, 2, 2, 2, {2, 2, 2, 2}, true, KN_ACT_HARDSWISH, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], pool2);
  kn_pool_free(pool2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dwconv_sweep),
      cmocka_unit_test(test_dwconv_odd),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
