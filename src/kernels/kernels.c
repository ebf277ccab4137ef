#include "kernels.h"

#include "core/cpu.h"

static const char *const isa_names[KN_ISA_COUNT] = {
    [KN_ISA_PORTABLE] = "portable", [KN_ISA_AVX2] = "avx2", [KN_ISA_AVX512] = "avx512"};

static const char *const act_names[KN_ACT_COUNT] = {
#define X(id, name) [KN_ACT_##id] = name,
    KN_ACTS(X)
#undef X
};

const char *kn_isa_name(kn_isa isa) {
  return (unsigned)isa < KN_ISA_COUNT ? isa_names[isa] : "?";
}

bool kn_isa_available(kn_isa isa, uint64_t f) {
  switch (isa) {
  case KN_ISA_PORTABLE:
    return true;
#ifdef KN_HAVE_X86_KERNELS
  case KN_ISA_AVX2:
    return (f & KN_CPU_BIT(AVX2)) && (f & KN_CPU_BIT(FMA)) && (f & KN_CPU_BIT(F16C));
  case KN_ISA_AVX512:
    return kn_isa_available(KN_ISA_AVX2, f) && (f & KN_CPU_BIT(AVX512F)) &&
           (f & KN_CPU_BIT(AVX512BW)) && (f & KN_CPU_BIT(AVX512VL)) &&
           (f & KN_CPU_BIT(AVX512DQ)); /* the AVX-512 units are built with -mavx512dq */
#endif
  default:
    return false;
  }
}

kn_isa kn_isa_detect(uint64_t f) {
  kn_isa cap = KN_ISA_AVX512;
  const char *e = getenv("KILN_ISA");
  if (e && *e)
    for (int i = 0; i < KN_ISA_COUNT; i++)
      if (!strcmp(e, isa_names[i])) cap = (kn_isa)i;
  for (int i = cap; i > 0; i--)
    if (kn_isa_available((kn_isa)i, f)) return (kn_isa)i;
  return KN_ISA_PORTABLE;
}

void *kn_rt_scratch(kn_rt *rt, size_t bytes) {
  if (bytes <= rt->scratch_bytes) return rt->scratch;
  free(rt->scratch);
  size_t sz = (bytes + 63) & ~(size_t)63;
  rt->scratch = aligned_alloc(64, sz);
  rt->scratch_bytes = rt->scratch ? sz : 0;
  return rt->scratch;
}

int kn_act_from_name(const char *name) {
  for (int i = 0; i < KN_ACT_COUNT; i++)
    if (!strcmp(name ? name : "", act_names[i])) return i;
  return -1;
}

const char *kn_act_name(kn_act a) {
  return (unsigned)a < KN_ACT_COUNT ? act_names[a] : "?";
}
