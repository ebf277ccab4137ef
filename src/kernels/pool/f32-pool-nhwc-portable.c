/* Channels-last pooling (f32-pool-nhwc-impl.h) in portable C: 8 channels as
 * a plain array, 32 per block. */
#define NHWC_PORTABLE
#include "kernels/conv/f32-nhwc-vec.h"

#define POOLN_FNS kn_f32_pool_nhwc__portable

#include "kernels/pool/f32-pool-nhwc-impl.h"
