#include "core.h"

#include <math.h>

enum { KIND_F, KIND_I, KIND_U, KIND_B, KIND_S };

static const struct {
  const char *name;
  size_t size;
  int kind;
} dtype_table[] = {
#define X(e, name, size, kind) [KN_DTYPE_##e] = {name, size, KIND_##kind},
#include "dtypes.inc"
#undef X
};
#define N_DTYPES ((int32_t)(sizeof dtype_table / sizeof dtype_table[0]))

bool kn_dtype_is_valid(int32_t t) {
  return t > 0 && t < N_DTYPES && dtype_table[t].name != NULL;
}
const char *kn_dtype_name(kn_dtype t) {
  return kn_dtype_is_valid(t) ? dtype_table[t].name : NULL;
}
size_t kn_dtype_size(kn_dtype t) {
  return kn_dtype_is_valid(t) ? dtype_table[t].size : 0;
}
bool kn_dtype_is_float(kn_dtype t) {
  return kn_dtype_is_valid(t) && dtype_table[t].kind == KIND_F;
}
bool kn_dtype_is_int(kn_dtype t) {
  return kn_dtype_is_valid(t) &&
         (dtype_table[t].kind == KIND_I || dtype_table[t].kind == KIND_U);
}
bool kn_dtype_is_signed(kn_dtype t) {
  return kn_dtype_is_valid(t) &&
         (dtype_table[t].kind == KIND_I || dtype_table[t].kind == KIND_F);
}

float kn_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: renormalise */
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t kn_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow */
  if (absx < 0x38800000u) { /* subnormal or zero in half */
    if (absx < 0x33000000u) return (uint16_t)sign;
    uint32_t man = (absx & 0x7fffff) | 0x800000;
    int shift = 126 - (int)(absx >> 23); /* 14..24 */
    uint32_t r = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = absx - 0x38000000u; /* rebias exponent */
  uint32_t out = r >> 13, rem = r & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (out & 1))) out++;
  return (uint16_t)(sign | out);
}

float kn_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t kn_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1); /* round to nearest even */
  return (uint16_t)(x >> 16);
}

double kn_load_f64(const void *d, kn_dtype t, int64_t i) {
  switch (t) {
  case KN_DTYPE_F32: return ((const float *)d)[i];
  case KN_DTYPE_F64: return ((const double *)d)[i];
  case KN_DTYPE_F16: return kn_f16_to_f32(((const uint16_t *)d)[i]);
  case KN_DTYPE_BF16: return kn_bf16_to_f32(((const uint16_t *)d)[i]);
  case KN_DTYPE_I8: return ((const int8_t *)d)[i];
  case KN_DTYPE_I16: return ((const int16_t *)d)[i];
  case KN_DTYPE_I32: return ((const int32_t *)d)[i];
  case KN_DTYPE_I64: return (double)((const int64_t *)d)[i];
  case KN_DTYPE_U8: return ((const uint8_t *)d)[i];
  case KN_DTYPE_BOOL: return ((const uint8_t *)d)[i] != 0;
  case KN_DTYPE_U16: return ((const uint16_t *)d)[i];
  case KN_DTYPE_U32: return ((const uint32_t *)d)[i];
  case KN_DTYPE_U64: return (double)((const uint64_t *)d)[i];
  default: KN_ASSERT(!"kn_load_f64: bad dtype");
  }
  return 0;
}

/* Float -> integer conversion that saturates instead of invoking UB. */
static int64_t f64_to_i64(double v) {
  if (isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}
static uint64_t f64_to_u64(double v) {
  if (isnan(v) || v <= 0) return v <= -1 ? (uint64_t)f64_to_i64(v) : 0;
  if (v >= 1.8446744073709552e19) return UINT64_MAX;
  return (uint64_t)v;
}

void kn_store_f64(void *d, kn_dtype t, int64_t i, double v) {
  switch (t) {
  case KN_DTYPE_F32: ((float *)d)[i] = (float)v; break;
  case KN_DTYPE_F64: ((double *)d)[i] = v; break;
  case KN_DTYPE_F16: ((uint16_t *)d)[i] = kn_f32_to_f16((float)v); break;
  case KN_DTYPE_BF16: ((uint16_t *)d)[i] = kn_f32_to_bf16((float)v); break;
  case KN_DTYPE_I8: ((int8_t *)d)[i] = (int8_t)f64_to_i64(v); break;
  case KN_DTYPE_I16: ((int16_t *)d)[i] = (int16_t)f64_to_i64(v); break;
  case KN_DTYPE_I32: ((int32_t *)d)[i] = (int32_t)f64_to_i64(v); break;
  case KN_DTYPE_I64: ((int64_t *)d)[i] = f64_to_i64(v); break;
  case KN_DTYPE_U8: ((uint8_t *)d)[i] = (uint8_t)f64_to_u64(v); break;
  case KN_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
  case KN_DTYPE_U16: ((uint16_t *)d)[i] = (uint16_t)f64_to_u64(v); break;
  case KN_DTYPE_U32: ((uint32_t *)d)[i] = (uint32_t)f64_to_u64(v); break;
  case KN_DTYPE_U64: ((uint64_t *)d)[i] = f64_to_u64(v); break;
  default: KN_ASSERT(!"kn_store_f64: bad dtype");
  }
}

int64_t kn_load_i64(const void *d, kn_dtype t, int64_t i) {
  switch (t) {
  case KN_DTYPE_I8: return ((const int8_t *)d)[i];
  case KN_DTYPE_I16: return ((const int16_t *)d)[i];
  case KN_DTYPE_I32: return ((const int32_t *)d)[i];
  case KN_DTYPE_I64: return ((const int64_t *)d)[i];
  case KN_DTYPE_U8: return ((const uint8_t *)d)[i];
  case KN_DTYPE_BOOL: return ((const uint8_t *)d)[i] != 0;
  case KN_DTYPE_U16: return ((const uint16_t *)d)[i];
  case KN_DTYPE_U32: return ((const uint32_t *)d)[i];
  case KN_DTYPE_U64: return (int64_t)((const uint64_t *)d)[i];
  default: return f64_to_i64(kn_load_f64(d, t, i));
  }
}

void kn_store_i64(void *d, kn_dtype t, int64_t i, int64_t v) {
  switch (t) {
  case KN_DTYPE_I8: ((int8_t *)d)[i] = (int8_t)v; break;
  case KN_DTYPE_I16: ((int16_t *)d)[i] = (int16_t)v; break;
  case KN_DTYPE_I32: ((int32_t *)d)[i] = (int32_t)v; break;
  case KN_DTYPE_I64: ((int64_t *)d)[i] = v; break;
  case KN_DTYPE_U8: ((uint8_t *)d)[i] = (uint8_t)v; break;
  case KN_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
  case KN_DTYPE_U16: ((uint16_t *)d)[i] = (uint16_t)v; break;
  case KN_DTYPE_U32: ((uint32_t *)d)[i] = (uint32_t)v; break;
  case KN_DTYPE_U64: ((uint64_t *)d)[i] = (uint64_t)v; break;
  default: kn_store_f64(d, t, i, (double)v); break;
  }
}

void kn_convert(const void *src, kn_dtype s, void *dst, kn_dtype d, int64_t n) {
  KN_ASSERT(s != KN_DTYPE_STRING && d != KN_DTYPE_STRING);
  if (n <= 0) return;
  if (s == d) {
    memcpy(dst, src, (size_t)n * kn_dtype_size(s));
  } else if (s == KN_DTYPE_F16 && d == KN_DTYPE_F32) {
    for (int64_t i = 0; i < n; i++)
      ((float *)dst)[i] = kn_f16_to_f32(((const uint16_t *)src)[i]);
  } else if (s == KN_DTYPE_BF16 && d == KN_DTYPE_F32) {
    for (int64_t i = 0; i < n; i++)
      ((float *)dst)[i] = kn_bf16_to_f32(((const uint16_t *)src)[i]);
  } else if (s == KN_DTYPE_F32 && d == KN_DTYPE_F16) {
    for (int64_t i = 0; i < n; i++)
      ((uint16_t *)dst)[i] = kn_f32_to_f16(((const float *)src)[i]);
  } else if (s == KN_DTYPE_F32 && d == KN_DTYPE_BF16) {
    for (int64_t i = 0; i < n; i++)
      ((uint16_t *)dst)[i] = kn_f32_to_bf16(((const float *)src)[i]);
  } else if (s == KN_DTYPE_F32 && d == KN_DTYPE_F64) {
    for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = ((const float *)src)[i];
  } else if (s == KN_DTYPE_F64 && d == KN_DTYPE_F32) {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)((const double *)src)[i];
  } else if (s == KN_DTYPE_I64 && d == KN_DTYPE_F32) {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)((const int64_t *)src)[i];
  } else if (s == KN_DTYPE_I32 && d == KN_DTYPE_F32) {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)((const int32_t *)src)[i];
  } else if (s == KN_DTYPE_U64 && d == KN_DTYPE_F32) {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)((const uint64_t *)src)[i];
  } else if (!kn_dtype_is_float(s) && !kn_dtype_is_float(d)) {
    for (int64_t i = 0; i < n; i++) kn_store_i64(dst, d, i, kn_load_i64(src, s, i));
  } else {
    for (int64_t i = 0; i < n; i++) kn_store_f64(dst, d, i, kn_load_f64(src, s, i));
  }
}
