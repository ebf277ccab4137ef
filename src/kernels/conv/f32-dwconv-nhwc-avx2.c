/* Channels-last depthwise convolution (f32-dwconv-nhwc-impl.h) for AVX2 +
 * FMA: 8 channels a ymm, blocks of 4 output pixels (4 accumulators and a
 * 3x3 stride-1 block's 6 input vectors fit the 16 ymm). */
#define NHWC_AVX2
#include "kernels/conv/f32-nhwc-vec.h"

#define DWN_ENTRY kn_f32_dwconv_nhwc_rows__avx2
#define DWN_P 4

#include "kernels/conv/f32-dwconv-nhwc-impl.h"
