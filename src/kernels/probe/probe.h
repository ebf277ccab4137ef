/*
 * Measurement loops for `kiln probe` (src/builder/machine_probe.c): fixed instruction
 * streams whose rate is the machine's, not the compiler's.
 *
 *  - Peak loops keep KN_PROBE_CHAINS independent accumulators in registers
 *    (enough to cover a 4-cycle latency on 2 or 3 pipes) and touch no
 *    memory; each returns the operations it did (a fused multiply-add
 *    counts 2, a bf16 pair-dot 4 per lane, a u8 x s8 quad-dot 8 per lane)
 *    and folds its accumulators into *sink so nothing is optimised away.
 *  - Memory loops read or write a buffer of `bytes` (a multiple of
 *    KN_PROBE_CHUNK, 64-byte aligned) `reps` times with full-width loads
 *    or ordinary stores, as the kernels do.
 * One table per ISA; a NULL entry: the ISA has no such instruction.
 */
#ifndef KN_PROBE_KERNELS_H
#define KN_PROBE_KERNELS_H

#include "kernels/kernels.h"

#define KN_PROBE_CHAINS 12
#define KN_PROBE_CHUNK 512

typedef struct kn_probe_ukernels {
  double (*fma_f32)(int64_t iters, float *sink);
  double (*dot_bf16)(int64_t iters, float *sink);
  double (*dot_i8)(int64_t iters, int32_t *sink);
  uint64_t (*read)(const void *buf, size_t bytes, int64_t reps);
  void (*write)(void *buf, size_t bytes, int64_t reps);
} kn_probe_ukernels;

/* The loops for `isa` on a CPU with `features` (bf16 and int8 entries
 * only where that CPU has the instructions). */
kn_probe_ukernels kn_probe_ukernels_for(kn_isa isa, uint64_t features);

/* Per-ISA entries (probe-*.c). */
double kn_probe_fma_f32__portable(int64_t iters, float *sink);
uint64_t kn_probe_read__portable(const void *buf, size_t bytes, int64_t reps);
void kn_probe_write__portable(void *buf, size_t bytes, int64_t reps);
double kn_probe_fma_f32__avx2(int64_t iters, float *sink);
double kn_probe_dot_i8__avx2(int64_t iters, int32_t *sink);
uint64_t kn_probe_read__avx2(const void *buf, size_t bytes, int64_t reps);
void kn_probe_write__avx2(void *buf, size_t bytes, int64_t reps);
double kn_probe_fma_f32__avx512(int64_t iters, float *sink);
uint64_t kn_probe_read__avx512(const void *buf, size_t bytes, int64_t reps);
void kn_probe_write__avx512(void *buf, size_t bytes, int64_t reps);
double kn_probe_dot_bf16__avx512bf16(int64_t iters, float *sink);
double kn_probe_dot_i8__avx512vnni(int64_t iters, int32_t *sink);

#endif
