/* CPU feature detection (cpu.h).  Nothing is cached: cpuid costs well
 * under a microsecond and callers ask once per load or build. */
#include "cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

uint64_t kn_cpu_features(void) {
  unsigned a, b, c, d;
  uint64_t f = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  unsigned max_leaf = __get_cpuid_max(0, NULL);
  if (c & (1u << 20)) f |= KN_CPU_BIT(SSE4_2);
  bool osxsave = c & (1u << 27);
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  bool ymm = (xcr0 & 0x6) == 0x6;           /* SSE and AVX state */
  bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;  /* opmask, ZMM_Hi256, Hi16_ZMM */
  bool tiles = (xcr0 & 0x60000) == 0x60000; /* XTILECFG, XTILEDATA */
  if (ymm) {
    if (c & (1u << 28)) f |= KN_CPU_BIT(AVX);
    if (c & (1u << 12)) f |= KN_CPU_BIT(FMA);
    if (c & (1u << 29)) f |= KN_CPU_BIT(F16C);
  }
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  unsigned sub_leaves = a;
  if (ymm && (b & (1u << 5))) f |= KN_CPU_BIT(AVX2);
  if (zmm) {
    if (b & (1u << 16)) f |= KN_CPU_BIT(AVX512F);
    if (b & (1u << 17)) f |= KN_CPU_BIT(AVX512DQ);
    if (b & (1u << 30)) f |= KN_CPU_BIT(AVX512BW);
    if (b & (1u << 31)) f |= KN_CPU_BIT(AVX512VL);
    if (c & (1u << 11)) f |= KN_CPU_BIT(AVX512VNNI);
  }
  if (tiles) {
    if (d & (1u << 24)) f |= KN_CPU_BIT(AMX_TILE);
    if (d & (1u << 25)) f |= KN_CPU_BIT(AMX_INT8);
    if (d & (1u << 22)) f |= KN_CPU_BIT(AMX_BF16);
  }
  if (sub_leaves >= 1 && zmm) {
    __cpuid_count(7, 1, a, b, c, d);
    if (a & (1u << 5)) f |= KN_CPU_BIT(AVX512BF16);
  }
  return f;
}

void kn_cpu_identity(char *vendor, size_t vendor_len, char *brand, size_t brand_len,
                     int32_t *family, int32_t *model) {
  unsigned a, b, c, d;
  char v[13] = {0}, br[49] = {0};
  *family = *model = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    memcpy(v, &b, 4);
    memcpy(v + 4, &d, 4);
    memcpy(v + 8, &c, 4);
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    unsigned fam = (a >> 8) & 0xf, mod = (a >> 4) & 0xf;
    if (fam == 0xf) fam += (a >> 20) & 0xff;
    if (fam == 0x6 || fam >= 0xf) mod |= ((a >> 16) & 0xf) << 4;
    *family = (int32_t)fam;
    *model = (int32_t)mod;
  }
  if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u)
    for (unsigned i = 0; i < 3; i++) {
      __get_cpuid(0x80000002u + i, &a, &b, &c, &d);
      memcpy(br + 16 * i, &a, 4);
      memcpy(br + 16 * i + 4, &b, 4);
      memcpy(br + 16 * i + 8, &c, 4);
      memcpy(br + 16 * i + 12, &d, 4);
    }
  const char *s = br;
  while (*s == ' ') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == 0)) n--;
  snprintf(vendor, vendor_len, "%s", v);
  snprintf(brand, brand_len, "%.*s", (int)n, s);
}
#else
uint64_t kn_cpu_features(void) { return 0; }
void kn_cpu_identity(char *vendor, size_t vendor_len, char *brand, size_t brand_len,
                     int32_t *family, int32_t *model) {
  if (vendor_len) vendor[0] = 0;
  if (brand_len) brand[0] = 0;
  *family = *model = 0;
}
#endif

uint64_t kn_cpu_build_features(void) {
  uint64_t f = 0;
#ifdef __SSE4_2__
  f |= KN_CPU_BIT(SSE4_2);
#endif
#ifdef __AVX__
  f |= KN_CPU_BIT(AVX);
#endif
#ifdef __AVX2__
  f |= KN_CPU_BIT(AVX2);
#endif
#ifdef __FMA__
  f |= KN_CPU_BIT(FMA);
#endif
#ifdef __F16C__
  f |= KN_CPU_BIT(F16C);
#endif
#ifdef __AVX512F__
  f |= KN_CPU_BIT(AVX512F);
#endif
#ifdef __AVX512BW__
  f |= KN_CPU_BIT(AVX512BW);
#endif
#ifdef __AVX512DQ__
  f |= KN_CPU_BIT(AVX512DQ);
#endif
#ifdef __AVX512VL__
  f |= KN_CPU_BIT(AVX512VL);
#endif
#ifdef __AVX512VNNI__
  f |= KN_CPU_BIT(AVX512VNNI);
#endif
#ifdef __AVX512BF16__
  f |= KN_CPU_BIT(AVX512BF16);
#endif
#ifdef __AMX_TILE__
  f |= KN_CPU_BIT(AMX_TILE);
#endif
#ifdef __AMX_INT8__
  f |= KN_CPU_BIT(AMX_INT8);
#endif
#ifdef __AMX_BF16__
  f |= KN_CPU_BIT(AMX_BF16);
#endif
  return f;
}

const char *kn_cpu_feature_name(int bit) {
  switch (bit) {
#define X(id, b, name) \
  case b: return name;
    KN_CPU_FEATURES(X)
#undef X
  default: return NULL;
  }
}

const char *kn_cpu_features_str(uint64_t mask, char *buf, size_t len) {
  size_t o = 0;
  if (len) buf[0] = 0;
  if (!mask) {
    snprintf(buf, len, "none");
    return buf;
  }
  for (int bit = 0; bit < 64; bit++) {
    if (!(mask & (UINT64_C(1) << bit))) continue;
    const char *name = kn_cpu_feature_name(bit);
    int n = name ? snprintf(buf + o, len - o, "%s%s", o ? ", " : "", name)
                 : snprintf(buf + o, len - o, "%sbit %d", o ? ", " : "", bit);
    if (n < 0 || (size_t)n >= len - o) break;
    o += (size_t)n;
  }
  return buf;
}
