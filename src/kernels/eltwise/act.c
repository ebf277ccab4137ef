/* The fused epilogue and activations: ISA dispatch.  The per-ISA loops are
 * in act-<isa>.c; this portable version is the fallback and the oracle the
 * vector versions are tested against (besides the ops' reference kernels). */
#include "kernels/kernels.h"

#include <math.h>

static inline float act1(const kn_act_params *a, float x) {
  switch (a->act) {
  case KN_ACT_NONE: return x;
  case KN_ACT_RELU: return x > 0.0f ? x : 0.0f;
  case KN_ACT_CLIP: return fminf(fmaxf(x, a->lo), a->hi);
  case KN_ACT_LEAKYRELU: return x < 0.0f ? a->alpha * x : x;
  case KN_ACT_HARDSIGMOID: return fmaxf(0.0f, fminf(1.0f, a->alpha * x + a->beta));
  case KN_ACT_HARDSWISH: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
  case KN_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case KN_ACT_SILU: return x / (1.0f + expf(-x));
  case KN_ACT_TANH: return tanhf(x);
  case KN_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  case KN_ACT_GELU_TANH: {
    float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
  }
  default: return x;
  }
}

static void act_portable(const kn_act_params *a, const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = act1(a, x[i]);
}

void kn_f32_act(kn_isa isa, const kn_act_params *a, const float *x, float *y, int64_t n) {
  (void)isa;
  if (a->act == KN_ACT_NONE) {
    if (x != y) memmove(y, x, (size_t)n * sizeof *y);
    return;
  }
  act_portable(a, x, y, n);
}

void kn_f32_epilogue(kn_isa isa, const kn_epilogue *ep, float *c, int64_t ldc, int64_t r0,
                     int64_t m, int64_t c0, int64_t n) {
  for (int64_t i = 0; i < m; i++) {
    float *row = c + i * ldc;
    const float *res = ep->res ? ep->res + (r0 + i) * ep->ldr + c0 : NULL;
    if (ep->bias) {
      if (ep->bias_per_row) {
        float b = ep->bias[r0 + i];
        for (int64_t j = 0; j < n; j++) row[j] += b;
      } else {
        const float *b = ep->bias + c0;
        for (int64_t j = 0; j < n; j++) row[j] += b[j];
      }
    }
    if (res && ep->res_first)
      for (int64_t j = 0; j < n; j++) row[j] += res[j];
    kn_f32_act(isa, &ep->act, row, row, n);
    if (res && !ep->res_first)
      for (int64_t j = 0; j < n; j++) row[j] += res[j];
  }
}
