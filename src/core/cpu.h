/*
 * CPU features, detected with cpuid (and xgetbv: a feature counts only
 * when the OS also saves its register state).  One bit per feature; the
 * bit numbers are part of the engine file format (docs/ENGINE_FORMAT.md),
 * so new features are appended, never renumbered.
 */
#ifndef KN_CPU_H
#define KN_CPU_H

#include "core.h"

/* X(enum suffix, bit, name as in /proc/cpuinfo-style messages) */
#define KN_CPU_FEATURES(X)      \
  X(SSE4_2, 0, "sse4.2")        \
  X(AVX, 1, "avx")              \
  X(AVX2, 2, "avx2")            \
  X(FMA, 3, "fma")              \
  X(F16C, 4, "f16c")            \
  X(AVX512F, 5, "avx512f")      \
  X(AVX512BW, 6, "avx512bw")    \
  X(AVX512VL, 7, "avx512vl")    \
  X(AVX512VNNI, 8, "avx512vnni") \
  X(AVX512BF16, 9, "avx512bf16") \
  X(AMX_TILE, 10, "amx-tile")   \
  X(AMX_INT8, 11, "amx-int8")   \
  X(AMX_BF16, 12, "amx-bf16")   \
  X(AVX512DQ, 13, "avx512dq")

enum {
#define X(id, bit, name) KN_CPU_##id = bit,
  KN_CPU_FEATURES(X)
#undef X
  KN_CPU_FEATURE_COUNT
};

/* Every bit kiln knows. */
#define KN_CPU_KNOWN_MASK ((UINT64_C(1) << KN_CPU_FEATURE_COUNT) - 1)
#define KN_CPU_BIT(id) (UINT64_C(1) << KN_CPU_##id)

/* Features of the machine running this call (0 off x86-64).  AMX bits
 * mean the CPU and OS support the tiles; a thread still asks Linux for
 * permission (arch_prctl ARCH_REQ_XCOMP_PERM) before using them. */
uint64_t kn_cpu_features(void);

/* Features this build of kiln was compiled to assume (from the compiler's
 * target macros: none beyond x86-64 baseline unless built with -march). */
uint64_t kn_cpu_build_features(void);

/* The CPU's vendor string ("AuthenticAMD"), brand string ("AMD EPYC
 * 9B45"; trimmed) and family/model as cpuid reports them; empty strings
 * and zeros off x86-64 or when the CPU gives none. */
void kn_cpu_identity(char *vendor, size_t vendor_len, char *brand, size_t brand_len,
                     int32_t *family, int32_t *model);

/* Name of feature bit `bit` ("avx512f"), NULL when kiln does not know it. */
const char *kn_cpu_feature_name(int bit);

/* The features in `mask` as "avx512f, avx512bw" into buf (unknown bits as
 * "bit 40"); "none" for an empty mask.  Returns buf. */
const char *kn_cpu_features_str(uint64_t mask, char *buf, size_t len);

#endif
