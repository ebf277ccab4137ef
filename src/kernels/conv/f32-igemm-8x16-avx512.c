/*
 * Indirect-GEMM micro-kernels for conv_igemm_nhwc, AVX-512: tiles of 8
 * output pixels x 16 output channels (1 zmm), for convolutions with at
 * most 16 output channels per group (SqueezeNet's squeeze layers, the
 * 16-channel projections of MobileNetV2 and EfficientNet, small stems).
 *
 * Why 8 rows: the 6 x 64 tile on a 16-wide panel keeps only 6
 * accumulators, one FMA each per depth step, and an FMA's 4-cycle latency
 * on two pipes needs 8 independent chains: 6 rows run at 3/4 of the FMA
 * rate.  8 rows fill both pipes; per step 1 weight load and 8 broadcasts
 * for 8 FMAs, and 8 row pointers still fit the general registers.
 */
#include "kernels/conv/f32-igemm-avx512.h"

#define MR 8
#define NV 1
#define KN_IGEMM_TABLE kn_f32_igemm_ukernel_8x16__avx512

#include "kernels/conv/igemm-impl.h"

KN_IGEMM_FN(1, 1)
KN_IGEMM_FN(2, 1)
KN_IGEMM_FN(3, 1)
KN_IGEMM_FN(4, 1)
KN_IGEMM_FN(5, 1)
KN_IGEMM_FN(6, 1)
KN_IGEMM_FN(7, 1)
KN_IGEMM_FN(8, 1)

const kn_igemm_ukernels KN_IGEMM_TABLE = {
    8, 8, VL, NV, {{igemm_1x1, igemm_2x1, igemm_3x1, igemm_4x1, igemm_5x1, igemm_6x1, igemm_7x1,
                    igemm_8x1}}};
