/* Precision names (kiln.h kn_precision): the one table of them. */
#include "core.h"

static const char *const names[KN_PRECISION_COUNT] = {
    [KN_PRECISION_FP32] = "fp32",
    [KN_PRECISION_BF16] = "bf16",
    [KN_PRECISION_FP16] = "fp16",
    [KN_PRECISION_INT8] = "int8",
    [KN_PRECISION_FP16_WEIGHTS] = "fp16-weights",
    [KN_PRECISION_INT8_WEIGHTS] = "int8-weights",
};

const char *kn_precision_name(int32_t p) {
  if (p == KN_PRECISION_BEST) return "best";
  return p >= 0 && p < KN_PRECISION_COUNT ? names[p] : NULL;
}

int32_t kn_precision_from_name(const char *name) {
  if (!name) return -1;
  if (!strcmp(name, "best")) return KN_PRECISION_BEST;
  for (int32_t p = 0; p < KN_PRECISION_COUNT; p++)
    if (!strcmp(names[p], name)) return p;
  return -1;
}
