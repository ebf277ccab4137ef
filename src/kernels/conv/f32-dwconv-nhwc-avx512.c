/* Channels-last depthwise convolution (f32-dwconv-nhwc-impl.h) for
 * AVX-512: 16 channels a zmm, blocks of 8 output pixels (8 accumulators
 * + up to 19 input vectors of a 5x5 stride-2 block fit the 32 zmm). */
#define NHWC_AVX512
#include "kernels/conv/f32-nhwc-vec.h"

#define DWN_ENTRY kn_f32_dwconv_nhwc_rows__avx512
#define DWN_P 8

#include "kernels/conv/f32-dwconv-nhwc-impl.h"
