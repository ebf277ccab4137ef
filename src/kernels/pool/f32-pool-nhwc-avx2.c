/* Channels-last pooling (f32-pool-nhwc-impl.h) for AVX2: 8 channels a ymm,
 * 32 per block. */
#define NHWC_AVX2
#include "kernels/conv/f32-nhwc-vec.h"

#define POOLN_FNS kn_f32_pool_nhwc__avx2

#include "kernels/pool/f32-pool-nhwc-impl.h"
