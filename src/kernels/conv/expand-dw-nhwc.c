/*
 * conv_expand_dw_nhwc (conv.h): the pointwise expansion and the depthwise
 * conv of an inverted-residual block (MobileNetV2/V3, EfficientNet,
 * MnasNet, the backbones of SSDLite and other mobile detectors) in one
 * pass, so the expanded tensor, the largest of the block (t times its
 * input: MobileNetV2's 16 -> 96 channels at 112x112 is 4.8 MB), is never
 * written to memory and read back.
 *
 * Tasks are bands of output rows of one image.  A task slides a window of
 * expanded rows down its band: for each group of R output rows it needs
 * the expanded rows [lo, hi) their taps reach; the rows it already holds
 * from the previous group (kh - sh of them for a kxk window) move to the
 * front of the buffer, only the new ones are computed (conv_igemm_nhwc on
 * those rows of x, with its epilogue), and the depthwise rows kernel
 * reads the window as a short image whose top padding is shifted by lo.
 * Rows outside the image are never in the window, so the kernel's zero
 * padding is exactly the image's.  Only the first group of a task
 * recomputes rows its neighbour also computed.
 *
 * The window is sized to three eighths of the L2 (kn_caches: 384 KiB of
 * a 1 MiB L2, about a third), leaving room for the expansion's weights
 * and the rows of x; it holds at least the rows one output row reads,
 * whatever the L2.  Each output element is computed as the two separate
 * kernels compute it (the same micro-kernels in the same order over the
 * same depth, with the same capacities), so the result is bit-identical
 * to running conv_igemm_nhwc then conv_depthwise_nhwc, whatever the
 * thread count.
 */
#include "kernels/conv/conv.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static size_t align64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Bytes of expanded rows the window is sized to (see the file comment). */
static int64_t window_bytes(const kn_caches *caches) {
  return (int64_t)(kn_caches_or_common(caches).l2 / 8 * 3);
}

bool kn_f32_expand_dw_nhwc_fits(const kn_conv2d *ge, const kn_conv2d *gd) {
  return ge->kh == 1 && ge->kw == 1 && ge->sh == 1 && ge->sw == 1 && ge->pt == 0 &&
         ge->pl == 0 && ge->group == 1 && ge->oh == ge->h && ge->ow == ge->w &&
         (ge->ldy == 0 || ge->ldy == ge->m) && gd->n == ge->n && gd->h == ge->h &&
         gd->w == ge->w && gd->c == ge->m && gd->m == gd->c && gd->group == gd->c &&
         (gd->ldy == 0 || gd->ldy == gd->m) && gd->kh >= 1 && gd->sh >= 1 && gd->dh >= 1;
}

typedef struct edw_plan {
  int64_t reach;   /* expanded rows one output row reads: (kh - 1) dh + 1 */
  int64_t band;    /* output rows per group */
  int64_t win;     /* rows the window holds */
  int64_t chunks;  /* tasks per image */
  int64_t chunk_rows;
  kn_conv2d ge_win; /* the expansion of a full window (scratch size) */
  size_t win_bytes, gemm_bytes, thread_bytes;
} edw_plan;

static void make_plan(kn_isa isa, const kn_conv2d *ge, const kn_conv2d *gd, int32_t threads,
                      const kn_caches *caches, edw_plan *p) {
  memset(p, 0, sizeof *p);
  int64_t row = max64(1, gd->w * gd->c) * (int64_t)sizeof(float);
  p->reach = (gd->kh - 1) * gd->dh + 1;
  /* R output rows read (R - 1) sh + reach expanded rows */
  int64_t rows = max64(p->reach, window_bytes(caches) / row);
  p->band = max64(1, (rows - p->reach) / gd->sh + 1);
  p->band = min64(p->band, max64(gd->oh, 1));
  p->win = min64((p->band - 1) * gd->sh + p->reach, max64(gd->h, 1));
  /* one task per image on one thread; else about 3 per thread (each
   * recomputes the reach - sh rows above its first group) */
  p->chunks = 1;
  if (threads > 1)
    p->chunks = min64(max64(gd->oh, 1), (3 * (int64_t)threads + ge->n - 1) / ge->n);
  p->chunk_rows = (gd->oh + p->chunks - 1) / p->chunks;
  if (p->chunk_rows < 1) p->chunk_rows = 1;
  p->chunks = (gd->oh + p->chunk_rows - 1) / p->chunk_rows;
  p->ge_win = *ge;
  p->ge_win.n = 1;
  p->ge_win.h = p->ge_win.oh = p->win;
  p->ge_win.ldy = 0;
  p->win_bytes = align64((size_t)(p->win * gd->w * gd->c) * sizeof(float));
  /* the expansion runs on 1 to win rows, and its scratch is not monotonic
   * in the rows (fewer pixels can make one larger chunk): the largest */
  size_t gb = 0;
  for (int64_t r = 1; r <= p->win; r++) {
    kn_conv2d g1 = p->ge_win;
    g1.h = g1.oh = r;
    size_t b = kn_f32_conv_nhwc_scratch(isa, &g1, 1, false, caches);
    gb = b > gb ? b : gb;
  }
  p->gemm_bytes = align64(gb);
  p->thread_bytes = p->win_bytes + p->gemm_bytes;
}

size_t kn_f32_expand_dw_nhwc_scratch(kn_isa isa, const kn_conv2d *ge, const kn_conv2d *gd,
                                     int32_t threads, const kn_caches *caches) {
  edw_plan p;
  int32_t t = threads > 0 ? threads : 1;
  make_plan(isa, ge, gd, t, caches, &p);
  return (size_t)t * p.thread_bytes + 64;
}

typedef struct edw_job {
  kn_isa isa;
  const kn_conv2d *ge, *gd;
  const float *we, *wd, *x;
  const kn_epilogue *ee, *ed;
  float *y;
  char *scratch;
  const kn_caches *caches;
  edw_plan p;
} edw_job;

static void edw_task(void *arg, int64_t task, int32_t thread) {
  const edw_job *j = arg;
  const kn_conv2d *ge = j->ge, *gd = j->gd;
  const edw_plan *p = &j->p;
  int64_t b = task / p->chunks, oy0 = task % p->chunks * p->chunk_rows;
  int64_t oy1 = min64(oy0 + p->chunk_rows, gd->oh);
  char *base = j->scratch + (size_t)thread * p->thread_bytes;
  float *win = (float *)base;
  void *gs = base + p->win_bytes;
  int64_t row = gd->w * gd->c, xrow = ge->w * ge->c;
  const float *xb = j->x + b * ge->h * xrow;
  float *yb = j->y + b * gd->oh * gd->ow * gd->m;
  int64_t lo = 0, hi = 0; /* expanded rows [lo, hi) are in the window */
  for (int64_t o0 = oy0; o0 < oy1; o0 += p->band) {
    int64_t o1 = min64(o0 + p->band, oy1);
    int64_t need_lo = max64(0, o0 * gd->sh - gd->pt);
    int64_t need_hi = min64(gd->h, (o1 - 1) * gd->sh - gd->pt + p->reach);
    if (need_hi < need_lo) need_hi = need_lo; /* the band reads only padding */
    if (hi > need_lo && lo <= need_lo) {
      if (need_lo > lo)
        memmove(win, win + (need_lo - lo) * row, (size_t)((hi - need_lo) * row) * sizeof(float));
      lo = need_lo;
    } else {
      lo = hi = need_lo;
    }
    if (need_hi > hi) {
      kn_conv2d g1 = p->ge_win;
      g1.h = g1.oh = need_hi - hi;
      kn_f32_conv_nhwc(j->isa, NULL, &g1, xb + hi * xrow, NULL, j->we, j->ee,
                       win + (hi - lo) * row, gs, j->caches);
      hi = need_hi;
    }
    kn_conv2d g2 = *gd;
    g2.n = 1;
    g2.h = hi - lo;
    g2.pt = gd->pt + lo; /* window row = image row - lo */
    kn_f32_dwconv_nhwc_rows(j->isa, &g2, win, j->wd, j->ed, yb, 0, o0, o1, j->caches);
  }
}

void kn_f32_expand_dw_nhwc(kn_isa isa, kn_pool *pool, const kn_conv2d *ge, const float *we,
                           const kn_epilogue *ee, const kn_conv2d *gd, const float *wd,
                           const kn_epilogue *ed, const float *x, float *y, void *scratch,
                           const kn_caches *caches) {
  KN_ASSERT(kn_f32_expand_dw_nhwc_fits(ge, gd));
  KN_ASSERT(!(ee && ee->res) && !(ed && ed->res));
  if (gd->n * gd->c * gd->oh * gd->ow == 0) return;
  int32_t threads = kn_pool_threads(pool);
  edw_job j = {.isa = isa, .ge = ge, .gd = gd, .we = we, .wd = wd, .x = x, .ee = ee, .ed = ed,
               .y = y, .scratch = scratch, .caches = caches};
  make_plan(isa, ge, gd, threads, caches, &j.p);
  double flops = 2.0 * (double)(ge->n * ge->h * ge->w) * (double)(ge->c * ge->m) +
                 2.0 * (double)(gd->n * gd->oh * gd->ow * gd->c * gd->kh * gd->kw);
  double bytes = 4.0 * (double)(ge->n * ge->h * ge->w * ge->c + gd->n * gd->oh * gd->ow * gd->m);
  kn_pool *use = kn_pool_worth(pool, flops, bytes);
  if (!use) { /* one task per image */
    j.p.chunks = 1;
    j.p.chunk_rows = gd->oh;
  }
  kn_pool_for(use, gd->n * j.p.chunks, edw_task, &j);
}
