/* The fused epilogue and activations, and the per-ISA table lookup of the
 * elementwise kernels (eltwise-<isa>.c, all generated from
 * eltwise-impl.h).  The GEMM and convolution kernels call kn_f32_epilogue
 * on every output tile: the per-ISA versions run the whole tile in one
 * pass (bias, residual and activation on each vector while it is in a
 * register), with masked tails for short rows. */
#include "kernels/kernels.h"

#include "eltwise.h"

const kn_ew_ukernels *kn_ew_get(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return &kn_ew_avx512;
  if (isa == KN_ISA_AVX2) return &kn_ew_avx2;
#endif
  (void)isa;
  return &kn_ew_portable;
}

void kn_f32_act(kn_isa isa, const kn_act_params *a, const float *x, float *y, int64_t n) {
  if (n <= 0) return;
  if (a->act == KN_ACT_NONE) {
    if (x != y) memmove(y, x, (size_t)n * sizeof *y);
    return;
  }
  kn_ew_get(isa)->unary((int)a->act, a, x, y, n);
}

void kn_f32_epilogue(kn_isa isa, const kn_epilogue *ep, float *c, int64_t ldc, int64_t r0,
                     int64_t m, int64_t c0, int64_t n) {
  if (m <= 0 || n <= 0) return;
  if (ep->act.act == KN_ACT_NONE && !ep->bias && !ep->res) return;
  kn_ew_get(isa)->epilogue(ep, c, ldc, r0, m, c0, n);
}
