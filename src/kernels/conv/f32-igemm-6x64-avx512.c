/*
 * Indirect-GEMM micro-kernels for conv_igemm_nhwc, AVX-512: tiles of 6
 * output pixels x 64 output channels (4 zmm).
 *
 * Why 6 x 64: 24 accumulators + 4 weight vectors + 1 broadcast = 29 zmm.
 * Per depth step: 24 FMAs (12 cycles on two 512-bit FMA pipes) against 4
 * vector loads and 6 broadcasts, and 6 row pointers fit the general
 * registers.  7 x 64 (28 accumulators, XNNPACK's row count) needs 33
 * registers: gcc spills one accumulator, and folding the broadcasts into
 * the FMAs ({1to16} operands) costs 28 loads per step; measured on Zen 5
 * (bench_conv_nhwc, 1 thread, interleaved runs) 6 x 64 was 5-10% faster
 * than either on ResNet-50's and MobileNetV2's layers.  A 7-row variant
 * (with the spill) serves tails of 7 pixels, so 7x7 planes (49 = 6 x 7 +
 * 7) need no 1-row tile.  Narrower variants (16, 32, 48 columns) serve
 * channel tails: a panel wastes at most 15 lanes.
 */
#include "kernels/conv/f32-igemm-avx512.h"

#define MR 7 /* rows of the largest function (the 7-pixel tail) */
#define NV 4
#define KN_IGEMM_TABLE kn_f32_igemm_ukernel_6x64__avx512

#include "kernels/conv/igemm-impl.h"

#define ROWS(N)                                                                            \
  KN_IGEMM_FN(1, N)                                                                        \
  KN_IGEMM_FN(2, N)                                                                        \
  KN_IGEMM_FN(3, N)                                                                        \
  KN_IGEMM_FN(4, N)                                                                        \
  KN_IGEMM_FN(5, N)                                                                        \
  KN_IGEMM_FN(6, N)                                                                        \
  KN_IGEMM_FN(7, N)
ROWS(1)
ROWS(2)
ROWS(3)
ROWS(4)
#undef ROWS

#define ROWS(N)                                                                            \
  {igemm_1x##N, igemm_2x##N, igemm_3x##N, igemm_4x##N, igemm_5x##N, igemm_6x##N, igemm_7x##N}
const kn_igemm_ukernels KN_IGEMM_TABLE = {6, 7, VL, NV, {ROWS(1), ROWS(2), ROWS(3), ROWS(4)}};
