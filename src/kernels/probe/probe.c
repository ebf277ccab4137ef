/* ISA dispatch of the probe loops (probe.h). */
#include "probe.h"

#include "core/cpu.h"

kn_probe_ukernels kn_probe_ukernels_for(kn_isa isa, uint64_t features) {
  kn_probe_ukernels k = {kn_probe_fma_f32__portable, NULL, NULL, kn_probe_read__portable,
                         kn_probe_write__portable};
#ifdef KN_HAVE_X86_KERNELS
  if (isa >= KN_ISA_AVX2) {
    k.fma_f32 = kn_probe_fma_f32__avx2;
    k.dot_i8 = kn_probe_dot_i8__avx2;
    k.read = kn_probe_read__avx2;
    k.write = kn_probe_write__avx2;
  }
  if (isa >= KN_ISA_AVX512) {
    k.fma_f32 = kn_probe_fma_f32__avx512;
    k.read = kn_probe_read__avx512;
    k.write = kn_probe_write__avx512;
    if (features & KN_CPU_BIT(AVX512BF16)) k.dot_bf16 = kn_probe_dot_bf16__avx512bf16;
    if (features & KN_CPU_BIT(AVX512VNNI)) k.dot_i8 = kn_probe_dot_i8__avx512vnni;
  }
#else
  (void)isa;
  (void)features;
#endif
  return k;
}
