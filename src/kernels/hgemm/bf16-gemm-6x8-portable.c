/* bf16 GEMM micro-kernels, portable C: tile 6 x 8 (hgemm-impl.h), bf16 B
 * widened by integer shifts on GCC/Clang vectors. */
#include "hgemm-ukernel.h"
#include "hv-portable.h"

#define HK_BF16 1
#define MR 6
#define HK_TABLE kn_bf16_gemm_ukernel_6x8__portable
#define HK_TO_HALF NULL

static inline V hv_bf16_lo(const uint16_t *p) {
  HU x;
  memcpy(&x, p, sizeof x);
  return (V)(x << 16);
}
static inline V hv_bf16_hi(const uint16_t *p) {
  HU x;
  memcpy(&x, p, sizeof x);
  return (V)(x & 0xffff0000u);
}

#include "hgemm-impl.h"
