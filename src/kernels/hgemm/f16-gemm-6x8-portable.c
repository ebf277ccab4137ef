/* fp16-weight GEMM micro-kernels, portable C: tile 6 x 8 (hgemm-impl.h).
 * fp16 -> fp32 without F16C: the exponent rebiased in integer lanes,
 * infinities and NaNs (payload kept) moved to fp32's top exponent,
 * subnormals renormalised by one subtraction (exact: both operands and
 * the result are normal fp32); the same bits as kn_f16_to_f32 for all
 * 65536 inputs (tests/unit/test_hgemm.c checks them). */
#include "core/core.h"
#include "hgemm-ukernel.h"
#include "hv-portable.h"

#define HK_F16 1
#define MR 6
#define HK_TABLE kn_f16_gemm_ukernel_6x8__portable

static inline V hv_f16(const uint16_t *p) {
  HU h = {p[0], p[1], p[2], p[3]};
  HU o = (h & 0x7fffu) << 13;
  HU e = o & 0x0f800000u;
  o += (127 - 15) << 23;
  o += (HU)(e == 0x0f800000u) & ((128 - 16) << 23);
  HU sub = (HU)(e == 0);
  o += sub & (1u << 23);
  /* a select, not o - (sub ? magic : 0): that would quieten a signalling NaN */
  HU d = (HU)((V)o - (V)(HU){113u << 23, 113u << 23, 113u << 23, 113u << 23});
  o = (d & sub) | (o & ~sub);
  return (V)(o | ((h & 0x8000u) << 16));
}

static void to_half(const float *x, uint16_t *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = kn_f32_to_f16(x[i]);
}
#define HK_TO_HALF to_half
#define HK_ROUND_HALF hv_round_half

#include "hgemm-impl.h"
