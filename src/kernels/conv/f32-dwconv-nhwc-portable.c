/* Channels-last depthwise convolution (f32-dwconv-nhwc-impl.h) in portable
 * C: 8 channels as a plain array (vectorised by the compiler for the
 * baseline), blocks of 4 pixels.  Only the generic loop: unrolling the
 * specialised ones over arrays costs compile time and gains little
 * without a vector ISA (as for the NCHW portable kernel). */
#define NHWC_PORTABLE
#include "kernels/conv/f32-nhwc-vec.h"

#define DWN_ENTRY kn_f32_dwconv_nhwc_rows__portable
#define DWN_P 4
#define DWN_GENERIC_ONLY

#include "kernels/conv/f32-dwconv-nhwc-impl.h"
