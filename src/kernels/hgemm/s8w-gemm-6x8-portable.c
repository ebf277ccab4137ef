/* int8-weight GEMM micro-kernels (S8W), portable C: tile 6 x 8
 * (hgemm-impl.h); 4 int8 widened to fp32 lanes (exact) per vector. */
#include "hgemm-ukernel.h"
#include "hv-portable.h"

#define HK_S8 1
#define MR 6
#define HK_TABLE kn_s8w_gemm_ukernel_6x8__portable
#define HK_TO_HALF NULL
#define HK_ROUND_HALF hv_round_half

static inline V hv_s8(const int8_t *p) { return (V){p[0], p[1], p[2], p[3]}; }

#include "hgemm-impl.h"
