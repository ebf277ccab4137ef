/*
 * Channels-last pooling drivers (pool.h: kn_f32_pool2d_nhwc,
 * kn_f32_global_pool_nhwc) over the per-ISA kernels of f32-pool-nhwc.h.
 *
 * No strip copy (unlike the NCHW driver): a pixel's channels are
 * contiguous, so each tap is whole vector loads straight from x, and the
 * window is clipped to the image once per output pixel.  No scratch.
 *
 * Tasks: (image, chunk of output rows) for windows, (image, group of
 * channels) for global pooling.  Every output is computed by one task in
 * one fixed order, so any thread count gives the same bits.
 */
#include "kernels/pool/f32-pool-nhwc.h"

static const kn_pooln_fns *pooln_fns(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return &kn_f32_pool_nhwc__avx512;
  if (isa == KN_ISA_AVX2) return &kn_f32_pool_nhwc__avx2;
#endif
  (void)isa;
  return &kn_f32_pool_nhwc__portable;
}

size_t kn_f32_pool2d_nhwc_scratch(kn_isa isa, const kn_pool2d *p, int64_t c, int32_t threads) {
  (void)isa, (void)p, (void)c, (void)threads;
  return 64; /* nothing (never a request for zero bytes) */
}

typedef struct pooln_job {
  kn_pooln_args a;
  kn_pooln_rows_fn rows;
  int64_t chunks, chunk_rows;
} pooln_job;

static void pooln_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const pooln_job *j = arg;
  int64_t b = task / j->chunks, oy0 = task % j->chunks * j->chunk_rows;
  int64_t oy1 = oy0 + j->chunk_rows < j->a.p->oh ? oy0 + j->chunk_rows : j->a.p->oh;
  if (oy0 < oy1) j->rows(&j->a, b, oy0, oy1);
}

void kn_f32_pool2d_nhwc(kn_isa isa, kn_pool *pool, const kn_pool2d *p, int64_t c,
                        const float *x, float *y, void *scratch) {
  (void)scratch;
  if (p->planes * c * p->oh * p->ow == 0) return;
  pooln_job j = {.a = {.p = p, .c = c, .x = x, .y = y}, .rows = pooln_fns(isa)->rows};
  /* one task per image on one thread, else at least 4 per thread */
  int32_t threads = kn_pool_threads(pool);
  int64_t chunks = 1;
  if (threads > 1) {
    chunks = (4 * (int64_t)threads + p->planes - 1) / p->planes;
    if (chunks > p->oh) chunks = p->oh;
  }
  j.chunk_rows = (p->oh + chunks - 1) / chunks;
  j.chunks = (p->oh + j.chunk_rows - 1) / j.chunk_rows;
  double bytes = 4.0 * (double)(p->planes * c * (p->h * p->w + p->oh * p->ow));
  double ops = (double)(p->planes * c * p->oh * p->ow * p->kh * p->kw);
  kn_pool_for(kn_pool_worth(pool, ops, bytes), p->planes * j.chunks, pooln_task, &j);
}

typedef struct gpooln_job {
  kn_gpooln_fn fn;
  bool is_max;
  int64_t size, c, groups, group_c;
  const float *x;
  float *y;
} gpooln_job;

static void gpooln_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const gpooln_job *j = arg;
  int64_t b = task / j->groups, c0 = task % j->groups * j->group_c;
  int64_t c1 = c0 + j->group_c < j->c ? c0 + j->group_c : j->c;
  j->fn(j->is_max, j->size, j->c, j->x + b * j->size * j->c, j->y + b * j->c, c0, c1);
}

void kn_f32_global_pool_nhwc(kn_isa isa, kn_pool *pool, bool is_max, int64_t n, int64_t size,
                             int64_t c, const float *x, float *y) {
  if (n * c == 0) return;
  gpooln_job j = {.fn = pooln_fns(isa)->global, .is_max = is_max, .size = size, .c = c,
                  .x = x, .y = y};
  /* Groups of 64 channels (a multiple of every ISA's 4-vector block, so
   * the blocks are the same for any split).  Small inputs (7x7 x 1280)
   * stay on the calling thread: waking the workers costs more. */
  int32_t threads = kn_pool_threads(pool);
  j.group_c = c;
  if (threads > 1 && n * size * c >= (1 << 16)) {
    int64_t want = (4 * (int64_t)threads + n - 1) / n;
    j.group_c = (c + want - 1) / want;
    j.group_c = (j.group_c + 63) / 64 * 64;
  } else {
    pool = NULL;
  }
  j.groups = (c + j.group_c - 1) / j.group_c;
  kn_pool_for(pool, n * j.groups, gpooln_task, &j);
}
