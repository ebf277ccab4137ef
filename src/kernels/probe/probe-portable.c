/* Probe loops in plain C (probe.h): what a machine without kiln's vector
 * kernels runs.  The compiler vectorises them for the baseline ISA. */
#include "probe.h"

double kn_probe_fma_f32__portable(int64_t iters, float *sink) {
  float acc[4 * KN_PROBE_CHAINS];
  for (int j = 0; j < 4 * KN_PROBE_CHAINS; j++) acc[j] = (float)j * 0.01f;
  for (int64_t i = 0; i < iters; i++)
    for (int j = 0; j < 4 * KN_PROBE_CHAINS; j++) acc[j] = acc[j] * 0.999999f + 1e-6f;
  float s = 0;
  for (int j = 0; j < 4 * KN_PROBE_CHAINS; j++) s += acc[j];
  *sink += s;
  return (double)iters * 4 * KN_PROBE_CHAINS * 2;
}

uint64_t kn_probe_read__portable(const void *buf, size_t bytes, int64_t reps) {
  uint64_t acc[8] = {0};
  const uint64_t *p = buf;
  size_t n = bytes / 8;
  for (int64_t r = 0; r < reps; r++) {
    for (size_t i = 0; i < n; i += 8)
      for (int j = 0; j < 8; j++) acc[j] ^= p[i + j];
    __asm__ volatile("" ::: "memory"); /* every pass reads the buffer again */
  }
  return acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
}

void kn_probe_write__portable(void *buf, size_t bytes, int64_t reps) {
  uint64_t *p = buf;
  size_t n = bytes / 8;
  for (int64_t r = 0; r < reps; r++) {
    for (size_t i = 0; i < n; i++) p[i] = (uint64_t)r + i;
    __asm__ volatile("" ::: "memory"); /* every pass's stores happen */
  }
}
