/*
 * Pooling drivers (pool.h).  2-D windows reuse the tap-row machinery of
 * the depthwise convolution (kernels/conv/taprows.h): a task copies the
 * input rows of its chunk into a strip of phase rows padded with -inf
 * (max) or 0 (average), then each output row is one row-kernel call over
 * kh*kw unit-stride taps.
 */
#include "kernels/pool/pool-kernels.h"

#include <math.h>

#include "kernels/conv/taprows.h"

typedef struct pool_job {
  kn_isa isa;
  const kn_pool2d *p;
  const float *x;
  float *y;
  const kn_taprow_fns *fns;
  int64_t rows, chunks, pw;
  size_t strip_floats, per_thread;
  char *scratch;
} pool_job;

static void pool_layout(const kn_pool2d *p, int32_t threads, const kn_caches *caches,
                        int64_t *pw, int64_t *rows, size_t *strip_floats, size_t *per_thread) {
  *pw = kn_taprow_pw(p->ow, p->kw, p->dw, p->sw);
  *rows = kn_taprow_chunk_rows(p->planes, p->oh, p->sh, p->kh, p->dh, p->sw, *pw, threads,
                               caches);
  int64_t nr = (*rows - 1) * p->sh + (p->kh - 1) * p->dh + 1;
  *strip_floats = (size_t)kn_taprow_round(nr * p->sw * *pw);
  size_t bytes = (*strip_floats + (size_t)kn_taprow_round(p->ow)) * sizeof(float) +
                 (size_t)(p->kh * p->kw) * sizeof(float *);
  *per_thread = (bytes + 63) & ~(size_t)63;
}

size_t kn_f32_pool2d_scratch(kn_isa isa, const kn_pool2d *p, int32_t threads,
                             const kn_caches *caches) {
  (void)isa;
  int64_t pw, rows;
  size_t sf, per;
  pool_layout(p, threads, caches, &pw, &rows, &sf, &per);
  return per * (size_t)threads;
}

/* Divisor of one dim of an average window starting at output index o
 * (src/ops/pooling.c's expressions, so edge cases agree). */
static int64_t avg_count(int64_t o, int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb,
                         int64_t pe, bool include_pad) {
  int64_t st = o * s - pb;
  if (include_pad) {
    int64_t hp = (in + pe - 1 - st) / d + 1;
    if (hp > k) hp = k;
    return hp > 0 ? hp : 0;
  }
  int64_t l = st >= 0 ? 0 : (-st + d - 1) / d;
  int64_t h = st >= in ? 0 : (in - 1 - st) / d + 1;
  if (h > k) h = k;
  return h > l ? h - l : 0;
}

static void pool_task(void *arg, int64_t task, int32_t thread) {
  const pool_job *j = arg;
  const kn_pool2d *p = j->p;
  int64_t plane = task / j->chunks, chunk = task % j->chunks;
  int64_t oy0 = chunk * j->rows, oy1 = oy0 + j->rows < p->oh ? oy0 + j->rows : p->oh;
  if (oy0 >= oy1) return;
  int64_t sw = p->sw, pw = j->pw, ntaps = p->kh * p->kw;
  int64_t nr = (oy1 - oy0 - 1) * p->sh + (p->kh - 1) * p->dh + 1;
  float *strip = (float *)(j->scratch + (size_t)thread * j->per_thread);
  float *dx = strip + j->strip_floats;
  const float **src = (const float **)(dx + kn_taprow_round(p->ow));
  kn_f32_taprow_strip(j->isa, j->x + plane * p->h * p->w, p->h, p->w, oy0 * p->sh - p->pt, nr, p->pl,
                      sw, pw, p->is_max ? -INFINITY : 0.0f, strip);
  if (!p->is_max)
    for (int64_t ox = 0; ox < p->ow; ox++)
      dx[ox] = (float)avg_count(ox, p->w, p->kw, p->sw, p->dw, p->pl, p->pr,
                                p->count_include_pad);
  float *yp = j->y + plane * p->oh * p->ow;
  for (int64_t oy = oy0; oy < oy1; oy++) {
    int64_t t = 0;
    for (int64_t ky = 0; ky < p->kh; ky++) {
      const float *row = strip + ((oy - oy0) * p->sh + ky * p->dh) * sw * pw;
      for (int64_t kx = 0; kx < p->kw; kx++, t++) {
        int64_t off = kx * p->dw;
        src[t] = row + (off % sw) * pw + off / sw;
      }
    }
    if (p->is_max) {
      j->fns->max(src, (int32_t)ntaps, yp + oy * p->ow, p->ow);
    } else {
      float dy = (float)avg_count(oy, p->h, p->kh, p->sh, p->dh, p->pt, p->pb,
                                  p->count_include_pad);
      j->fns->avg(src, (int32_t)ntaps, dx, dy, yp + oy * p->ow, p->ow);
    }
  }
}

void kn_f32_pool2d(kn_isa isa, kn_pool *pool, const kn_pool2d *p, const float *x, float *y,
                   void *scratch, const kn_caches *caches) {
  if (p->planes * p->oh * p->ow == 0) return;
  pool_job j = {.isa = isa, .p = p, .x = x, .y = y, .fns = kn_f32_taprow_fns(isa), .scratch = scratch};
  pool_layout(p, kn_pool_threads(pool), caches, &j.pw, &j.rows, &j.strip_floats,
              &j.per_thread);
  j.chunks = (p->oh + j.rows - 1) / j.rows;
  kn_pool_for(pool, p->planes * j.chunks, pool_task, &j);
}

/* ---- global pooling ------------------------------------------------------ */

/* Portable reductions: 8 partial results, combined pairwise at the end. */
static float sum_portable(const float *x, int64_t n) {
  float a[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) a[k] += x[i + k];
  for (int k = 0; i < n; i++, k++) a[k] += x[i];
  return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

static float max_portable(const float *x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

static const kn_reduce_fns reduce_portable = {sum_portable, max_portable};

typedef struct gpool_job {
  const kn_reduce_fns *fns;
  bool is_max;
  int64_t size;
  const float *x;
  float *y;
} gpool_job;

static void gpool_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const gpool_job *j = arg;
  const float *xp = j->x + task * j->size;
  j->y[task] = j->is_max ? j->fns->max(xp, j->size)
                         : (j->size ? j->fns->sum(xp, j->size) / (float)j->size : NAN);
}

void kn_f32_global_pool(kn_isa isa, kn_pool *pool, bool is_max, int64_t planes, int64_t size,
                        const float *x, float *y) {
  const kn_reduce_fns *fns = &reduce_portable;
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) fns = &kn_f32_reduce__avx512;
  else if (isa == KN_ISA_AVX2) fns = &kn_f32_reduce__avx2;
#endif
  (void)isa;
  gpool_job j = {fns, is_max, size, x, y};
  /* one task per plane: small planes (7x7) are cheap, so only split when
   * the whole thing is big enough to pay for waking the workers */
  if (planes * size < (1 << 14)) pool = NULL;
  kn_pool_for(pool, planes, gpool_task, &j);
}
