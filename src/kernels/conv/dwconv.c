/*
 * Direct depthwise convolution (group == c == m), NCHW, any kernel size,
 * stride, dilation and padding.
 *
 * Tasks are (plane, chunk of output rows).  A task copies the input rows
 * its chunk reads into a strip of phase rows (taprows.h), so that every tap
 * of every output row is one unit-stride vector read, then runs the ISA's
 * row kernel per output row (bias folded into the accumulator's start),
 * then the activation/residual epilogue on the finished rows while they
 * are in cache.  An output element's value never depends on the chunking,
 * so any thread count gives the same bits.
 */
#include "kernels/conv/conv.h"
#include "kernels/conv/taprows.h"

typedef struct dw_job {
  const kn_conv2d *g;
  const float *x, *w;
  const kn_epilogue *ep;
  float *y;
  kn_isa isa;
  const kn_taprow_fns *fns;
  int64_t rows, chunks, pw;
  size_t strip_floats, per_thread; /* per_thread in bytes */
  char *scratch;
} dw_job;

static void dw_layout(const kn_conv2d *g, int32_t threads, int64_t *pw, int64_t *rows,
                      size_t *strip_floats, size_t *per_thread) {
  *pw = kn_taprow_pw(g->ow, g->kw, g->dw, g->sw);
  *rows = kn_taprow_chunk_rows(g->n * g->c, g->oh, g->sh, g->kh, g->dh, g->sw, *pw, threads);
  int64_t nr = (*rows - 1) * g->sh + (g->kh - 1) * g->dh + 1;
  *strip_floats = (size_t)kn_taprow_round(nr * g->sw * *pw);
  size_t bytes = *strip_floats * sizeof(float) + (size_t)(g->kh * g->kw) * sizeof(float *);
  *per_thread = (bytes + 63) & ~(size_t)63;
}

size_t kn_f32_dwconv_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads) {
  (void)isa;
  int64_t pw, rows;
  size_t sf, per;
  dw_layout(g, threads, &pw, &rows, &sf, &per);
  return per * (size_t)threads;
}

static void dw_task(void *arg, int64_t task, int32_t thread) {
  const dw_job *j = arg;
  const kn_conv2d *g = j->g;
  int64_t plane = task / j->chunks, chunk = task % j->chunks, ch = plane % g->c;
  int64_t oy0 = chunk * j->rows, oy1 = oy0 + j->rows < g->oh ? oy0 + j->rows : g->oh;
  if (oy0 >= oy1) return;
  int64_t sw = g->sw, pw = j->pw, ntaps = g->kh * g->kw;
  int64_t nr = (oy1 - oy0 - 1) * g->sh + (g->kh - 1) * g->dh + 1;
  float *strip = (float *)(j->scratch + (size_t)thread * j->per_thread);
  const float **src = (const float **)(strip + j->strip_floats);
  kn_f32_taprow_strip(j->isa, j->x + plane * g->h * g->w, g->h, g->w, oy0 * g->sh - g->pt, nr, g->pl,
                      sw, pw, 0.0f, strip);
  const float *wt = j->w + ch * ntaps;
  float init = j->ep && j->ep->bias ? j->ep->bias[ch] : 0.0f;
  float *yp = j->y + plane * g->oh * g->ow;
  for (int64_t oy = oy0; oy < oy1; oy++) {
    int64_t t = 0;
    for (int64_t ky = 0; ky < g->kh; ky++) {
      const float *row = strip + ((oy - oy0) * g->sh + ky * g->dh) * sw * pw;
      for (int64_t kx = 0; kx < g->kw; kx++, t++) {
        int64_t off = kx * g->dw;
        src[t] = row + (off % sw) * pw + off / sw;
      }
    }
    j->fns->dw(src, wt, (int32_t)ntaps, init, yp + oy * g->ow, g->ow);
  }
  const kn_epilogue *ep = j->ep;
  if (ep && (ep->act.act != KN_ACT_NONE || ep->res)) {
    kn_epilogue e = *ep;
    e.bias = NULL;
    e.res = ep->res ? ep->res + plane * g->oh * g->ow + oy0 * g->ow : NULL;
    e.ldr = g->ow;
    kn_f32_epilogue(j->isa, &e, yp + oy0 * g->ow, g->ow, 0, oy1 - oy0, 0, g->ow);
  }
}

void kn_f32_dwconv(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                   const float *w, const kn_epilogue *ep, float *y, void *scratch) {
  KN_ASSERT(g->group == g->c && g->m == g->c);
  if (g->n * g->c * g->oh * g->ow == 0) return;
  dw_job j = {.g = g, .x = x, .w = w, .ep = ep, .y = y, .isa = isa,
              .fns = kn_f32_taprow_fns(isa), .scratch = scratch};
  dw_layout(g, kn_pool_threads(pool), &j.pw, &j.rows, &j.strip_floats, &j.per_thread);
  j.chunks = (g->oh + j.rows - 1) / j.rows;
  kn_pool_for(pool, g->n * g->c * j.chunks, dw_task, &j);
}
