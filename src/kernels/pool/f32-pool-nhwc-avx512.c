/* Channels-last pooling (f32-pool-nhwc-impl.h) for AVX-512: 16 channels a
 * zmm, 64 per block. */
#define NHWC_AVX512
#include "kernels/conv/f32-nhwc-vec.h"

#define POOLN_FNS kn_f32_pool_nhwc__avx512

#include "kernels/pool/f32-pool-nhwc-impl.h"
