/* The channels-last Winograd convolution (kn_f32_conv_winograd_nhwc,
 * conv_winograd_nhwc in src/kernels/conv/winograd-nhwc.c) on every ISA this
 * machine has, 1 and 2 threads, against the reference NCHW Conv
 * (kn_conv_forward_f32) on transposed inputs, followed by the epilogue
 * computed in double; tolerance that of the NCHW Winograd test.
 *
 * Shapes: ResNet-50's 3x3 layers (64@56, 128@28, 256@14, 512@7 with batch
 * 2: tile blocks spanning images, few blocks so 2 threads split the output
 * channels); channel counts 1, 3, 17, 33 (every vector tail, panels of one
 * partial NR) against planes 1..9 (tiles cut by the edge in every way),
 * pads 0/1/2 asymmetric (windows wholly in the padding), batch 2; every
 * epilogue form (no bias, bias, each activation, a residual before or
 * after the activation) and the input-channel scale s.  Outputs start full
 * of NaNs, so an element the kernel does not write fails, and the 1- and
 * 2-thread results must be bit-identical. */
#include <math.h>

#include "core/cpu.h"
#include "core/pool.h"
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

static void run_case(const nc_case *k, kn_pool *pool2) {
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
  assert_true(kn_f32_conv_winograd_nhwc_fits(&g));
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
  /* the NCHW Winograd test's bound (test_conv_kernels.c): 10x a direct sum's */
  double tol = 2e-6 * (4.0 + sqrt((double)(cg * k->kh * k->kw))) * 10;
  char what[240];
  snprintf(what, sizeof what,
           "winograd_nhwc n%lld c%lld %lldx%lld m%lld g%lld k%lldx%lld s%lldx%lld d%lldx%lld "
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
    size_t pb = kn_f32_conv_winograd_nhwc_pack_size((kn_isa)isa, &g);
    float *wp = malloc((pb > 0 ? pb : 1) * sizeof(float));
    assert_non_null(wp);
    kn_f32_conv_winograd_nhwc_pack((kn_isa)isa, &g, w, wp);
    for (int threads = 1; threads <= 2; threads++) {
      float *y = threads == 1 ? y1 : y2;
      for (int64_t i = 0; i < ny; i++) y[i] = NAN;
      size_t sb = kn_f32_conv_winograd_nhwc_scratch((kn_isa)isa, &g, threads);
      void *scratch = aligned_alloc(64, (sb + 63) / 64 * 64 + 64);
      assert_non_null(scratch);
      kn_f32_conv_winograd_nhwc((kn_isa)isa, threads == 2 ? pool2 : NULL, &g, xh, k->scale ? s : NULL,
                       wp, &ep, y, scratch);
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

static nc_case base_case(int64_t n, int64_t c, int64_t h, int64_t w, int64_t m) {
  nc_case k = {.n = n, .c = c, .h = h, .w = w, .m = m, .group = 1, .kh = 3, .kw = 3, .sh = 1,
               .sw = 1, .dh = 1, .dw = 1, .pads = {1, 1, 1, 1}};
  return k;
}

/* ResNet-50's 3x3 stride-1 layers at full size. */
static void test_winograd_nhwc_resnet(void **state) {
  (void)state;
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  nc_case k = base_case(1, 64, 56, 56, 64);
  k.bias = true;
  k.act = KN_ACT_RELU;
  run_case(&k, pool2);
  k = base_case(1, 128, 28, 28, 128);
  k.bias = true;
  k.act = KN_ACT_RELU;
  k.res = 2;
  run_case(&k, pool2);
  k = base_case(1, 256, 14, 14, 256);
  k.bias = true;
  k.act = KN_ACT_NONE;
  k.res = 1;
  k.scale = true;
  run_case(&k, pool2);
  k = base_case(2, 512, 7, 7, 512);
  k.bias = true;
  k.act = KN_ACT_CLIP;
  k.res = 1;
  run_case(&k, pool2);
  kn_pool_free(pool2);
}

/* Odd channel counts against small odd planes and pads. */
static void test_winograd_nhwc_odd(void **state) {
  (void)state;
  static const int64_t chans[] = {1, 3, 17, 33};
  static const int64_t sp[][2] = {{1, 1}, {3, 5}, {5, 3}, {7, 7}, {9, 4}, {2, 9}, {6, 8}};
  static const int64_t pads[][4] = {{1, 1, 1, 1}, {0, 0, 0, 0}, {2, 2, 2, 2}, {0, 1, 2, 0},
                                    {2, 0, 1, 2}, {1, 2, 0, 1}};
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  int i = 0;
  for (size_t ci = 0; ci < 4; ci++)
    for (size_t mi = 0; mi < 4; mi++)
      for (int rep = 0; rep < 3; rep++, i++) {
        const int64_t *s = sp[i % 7], *p = pads[i % 6];
        nc_case k = base_case(1 + (i % 3 == 1), chans[ci], s[0], s[1], chans[mi]);
        memcpy(k.pads, p, sizeof k.pads);
        if (s[0] + p[0] + p[2] < 3 || s[1] + p[1] + p[3] < 3) { /* no output: more padding */
          k.pads[2] = 2;
          k.pads[3] = 2;
        }
        k.bias = i % 4 != 3;
        k.act = acts[i % 10];
        k.res = i % 3;
        k.scale = i % 5 == 2;
        run_case(&k, pool2);
      }
  /* more tiles than one block, with tails: 2 images, 3 row panels deep */
  nc_case k = base_case(2, 33, 23, 29, 47);
  k.bias = true;
  k.act = KN_ACT_SILU;
  k.res = 2;
  k.scale = true;
  run_case(&k, pool2);
  k = base_case(1, 0 + 5, 30, 31, 70);
  k.act = KN_ACT_HARDSWISH;
  k.res = 1;
  run_case(&k, pool2);
  kn_pool_free(pool2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_winograd_nhwc_odd),
      cmocka_unit_test(test_winograd_nhwc_resnet),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
