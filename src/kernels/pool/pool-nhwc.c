/*
 * Channels-last pooling drivers (pool.h: kn_f32_pool2d_nhwc,
 * kn_f32_global_pool_nhwc) over the per-ISA kernels of f32-pool-nhwc.h.
 *
 * No strip copy (unlike the NCHW driver): a pixel's channels are
 * contiguous, so each tap is whole vector loads straight from x, and the
 * window is clipped to the image once per output pixel.  No scratch but
 * a global pool's partial results on large maps.
 *
 * Tasks: (image, chunk of output rows) for windows; for global pooling
 * (image, block of GPOOL_BLOCK pixels) on maps larger than a block, whose
 * partial results are then combined in block order, else (image, group of
 * channels).  Every output is computed in one fixed order, so any thread
 * count gives the same bits.
 */
#include <math.h>

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

/* Pixels per partial result of a global pool on a large map: a block's
 * pixels are summed (or maxed) by one task and the blocks then added in
 * order, so the result depends on the map's size only, never on the thread
 * count.  The block's rows were written, in a model, by the thread that
 * wrote those output rows of the step before (tasks there are numbered by
 * output position too): EfficientNet-B0's squeeze-and-excite pool of
 * 112x112x32, one channel group, ran on one thread reading half of the map
 * from the other core, 15 us on 1 thread and 30 on 2. */
#define GPOOL_BLOCK 1024

static int64_t gpool_blocks(int64_t size) { return (size + GPOOL_BLOCK - 1) / GPOOL_BLOCK; }

size_t kn_f32_global_pool_nhwc_scratch(int64_t n, int64_t size, int64_t c) {
  int64_t nb = gpool_blocks(size);
  return nb > 1 ? (size_t)(n * nb * c) * sizeof(float) : 64;
}

typedef struct gpooln_job {
  kn_gpooln_fn fn;
  bool is_max;
  int64_t size, c, groups, group_c, blocks;
  const float *x;
  float *y, *part; /* part: [n][blocks][c] with blocks > 1 */
} gpooln_job;

static void gpooln_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const gpooln_job *j = arg;
  if (j->blocks > 1) { /* (image, block of pixels), every channel */
    int64_t b = task / j->blocks, k = task % j->blocks, p0 = k * GPOOL_BLOCK;
    int64_t p1 = p0 + GPOOL_BLOCK < j->size ? p0 + GPOOL_BLOCK : j->size;
    j->fn(j->is_max, p1 - p0, j->c, j->x + (b * j->size + p0) * j->c, j->part + task * j->c, 0,
          j->c, 1);
    return;
  }
  int64_t b = task / j->groups, c0 = task % j->groups * j->group_c;
  int64_t c1 = c0 + j->group_c < j->c ? c0 + j->group_c : j->c;
  j->fn(j->is_max, j->size, j->c, j->x + b * j->size * j->c, j->y + b * j->c, c0, c1, j->size);
}

void kn_f32_global_pool_nhwc(kn_isa isa, kn_pool *pool, bool is_max, int64_t n, int64_t size,
                             int64_t c, const float *x, float *y, void *scratch) {
  if (n * c == 0) return;
  gpooln_job j = {.fn = pooln_fns(isa)->global, .is_max = is_max, .size = size, .c = c,
                  .x = x, .y = y, .part = scratch, .blocks = gpool_blocks(size)};
  /* Small inputs (7x7 x 1280) stay on the calling thread: waking the
   * workers costs more. */
  int32_t threads = kn_pool_threads(pool);
  if (threads <= 1 || n * size * c < (1 << 16)) pool = NULL;
  if (j.blocks > 1) {
    kn_pool_for(pool, n * j.blocks, gpooln_task, &j);
    for (int64_t b = 0; b < n; b++) { /* the blocks in order */
      const float *pp = j.part + b * j.blocks * c;
      float *yb = y + b * c;
      for (int64_t ch = 0; ch < c; ch++) yb[ch] = pp[ch];
      for (int64_t k = 1; k < j.blocks; k++)
        for (int64_t ch = 0; ch < c; ch++)
          yb[ch] = is_max ? fmaxf(yb[ch], pp[k * c + ch]) : yb[ch] + pp[k * c + ch];
      if (!is_max)
        for (int64_t ch = 0; ch < c; ch++) yb[ch] /= (float)size;
    }
    return;
  }
  /* Groups of 64 channels (a multiple of every ISA's 4-vector block, so
   * the blocks are the same for any split). */
  j.group_c = c;
  if (pool) {
    int64_t want = (4 * (int64_t)threads + n - 1) / n;
    j.group_c = (c + want - 1) / want;
    j.group_c = (j.group_c + 63) / 64 * 64;
  }
  j.groups = (c + j.group_c - 1) / j.group_c;
  kn_pool_for(pool, n * j.groups, gpooln_task, &j);
}
