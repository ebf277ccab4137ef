/*
 * conv_igemm_nhwc: channels-last convolution as an indirect GEMM per group
 * (XNNPACK's igemm):
 *
 *   C [pixels, m/group] = A [pixels, taps x c/group] x B [taps x c/group, m/group]
 *
 * C's rows are output pixels (row stride m: a pixel's channels), B is the
 * group's weights packed once into panels of the ISA's tile width, laid
 * out [tap][input channel][panel column], and A is never formed: for each
 * output pixel and tap the micro-kernel gets a pointer to the input
 * pixel's channels of the group (igemm.h), or to a zero row where the
 * window leaves the image.  Accumulators stay in registers over the whole
 * depth, so every output element is one fixed sum whatever the tiling or
 * the thread count, and the epilogue (bias, Relu/Clip, residual) runs on
 * the registers; other activations run on the tile's rows while in L1.
 *
 * Row taps: with few input channels (the 7x7 stem, c = 3) a tap's 3 floats
 * would leave the micro-kernel mostly pointer loads.  When dilation_w is 1
 * and group is 1, a whole kernel row (kw * c contiguous floats of a
 * horizontally zero-padded copy of the input in scratch) is one tap: the
 * stem's 49 taps of depth 3 become 7 of depth 21.  The packed weights are
 * the same ([ky][kx][ci] is the order of both).
 *
 * The input-channel scale s ([n, c], FusedConv's S) is applied to copies:
 * row taps scale while padding; otherwise each task copies the scaled A
 * rows of its pixels (taps x c/group floats per pixel, at most
 * copy_bytes per thread) into scratch and points the kernel at them.  The
 * copy costs about 1/(panel width) of the task's FMAs per panel.
 *
 * Threads: tasks are (group, chunk of pixels, range of panels).  Inside a
 * task the panels are the outer loop and the chunk's pixel blocks stream
 * past each panel, so a panel (taps x c/group x 64 floats) stays in L2 and
 * the chunk's input (at most copy_bytes of A rows) stays there too.
 *
 * The byte budgets of these blocks are shares of the L2 (kn_caches, the
 * caller's; with Zen 4/5's 1 MiB: 256, 256 and 512 KiB): tile_budgets.
 */
#include <math.h>
#include <stdio.h>

#include "kernels/conv/conv.h"
#include "kernels/conv/igemm.h"
#include "kernels/eltwise/eltwise.h"

/* Byte budgets of the blocks, from the L2:
 *   copy   A rows of a task's pixel chunk, a quarter of the L2: the
 *          scaled-copy buffer per thread, and the input a chunk touches
 *          while the panels pass over it;
 *   depth  weights of one panel per depth block at most, a quarter of the
 *          L2: larger panels (3x3 on 512 channels: 1.2 MB) would stream
 *          from L3 once per pixel block, so their depth is split into
 *          blocks that stay in L2, the partial sums accumulating in C (in
 *          L2 too);
 *   psum   partial sums of a chunk with the depth split, at most half the
 *          L2: they are read and written once per depth block. */
typedef struct tile_budgets {
  int64_t copy, depth, psum;
} tile_budgets;

static tile_budgets tile_budgets_of(const kn_caches *caches) {
  int64_t l2 = (int64_t)kn_caches_or_common(caches).l2;
  return (tile_budgets){.copy = l2 / 4, .depth = l2 / 4, .psum = l2 / 2};
}
/* Pixel blocks per chunk at most (pointer tables stay small). */
#define MAX_BLOCKS 64
/* Taps a block's list of live taps holds at most (larger kernels run
 * every tap). */
#define SKIP_TAPS_MAX 64
/* Input channels up to which a kernel row is one tap (see above). */
#define ROW_TAP_MAX_C 4

/* The micro-kernels for this ISA and geometry: on AVX-512, 8 x 16 tiles
 * when a group has at most 16 output channels (f32-igemm-8x16-avx512.c
 * says why), else 6 x 64.  The packing follows the choice (panel_geom). */
static const kn_igemm_ukernels *uk_of(kn_isa isa, const kn_conv2d *g) {
  (void)g;
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512 && g->m / g->group <= 16) return &kn_f32_igemm_ukernel_8x16__avx512;
  if (isa == KN_ISA_AVX512) return &kn_f32_igemm_ukernel_6x64__avx512;
  if (isa == KN_ISA_AVX2) return &kn_f32_igemm_ukernel_4x24__avx2;
#endif
  (void)isa;
  return &kn_f32_igemm_ukernel_4x8__portable;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

/* How one call splits its work; a function of the geometry, ISA, thread
 * count and capacities only (the scratch size follows from it). */
typedef struct plan {
  const kn_igemm_ukernels *uk;
  int64_t cg, mg;      /* input and output channels per group */
  bool rows;           /* row taps over a padded copy */
  int64_t taps, kc;    /* taps per pixel, floats per tap */
  int64_t nr;          /* full panel width */
  int64_t npanels;     /* per group */
  int64_t gstride;     /* packed floats per group */
  int64_t np;          /* output pixels of all images */
  int64_t tb, kcb;     /* depth block: tb taps x kcb channels (tb = 1 or kcb = kc) */
  int64_t chunk;       /* pixels per task (a multiple of mr) */
  int64_t nchunks, ppt, npg; /* chunks, panels per task, panel ranges */
  int64_t wp;          /* row taps: padded input width */
  size_t zero_floats;  /* the zero row */
  size_t xp_floats;    /* row taps: the padded copy */
  size_t ptr_count;    /* pointer table entries per thread */
  bool skip;           /* blocks drop the taps all their pixels read as padding */
  bool wscale;         /* the input-channel scale goes into a copy of the weights */
  size_t wscale_floats; /* that copy */
  size_t copy_floats;  /* scaled A rows per thread (0 with row taps or wscale) */
  size_t thread_bytes; /* scratch per thread */
} plan;

static bool row_taps(const kn_conv2d *g) {
  return g->group == 1 && g->dw == 1 && g->kw > 1 && g->c <= ROW_TAP_MAX_C;
}

/* Packed floats of one group's panels. */
static void panel_geom(const kn_igemm_ukernels *uk, const kn_conv2d *g, int64_t *nr,
                       int64_t *npanels, int64_t *gstride) {
  int64_t mg = g->m / g->group, k = g->kh * g->kw * (g->c / g->group);
  *nr = (int64_t)uk->vl * uk->nv;
  *npanels = cdiv(mg, *nr);
  *gstride = k * (mg / *nr * *nr + cdiv(mg % *nr, uk->vl) * uk->vl);
}

static void make_plan(kn_isa isa, const kn_conv2d *g, int32_t threads, bool scaled,
                      const kn_caches *caches, plan *p) {
  memset(p, 0, sizeof *p);
  tile_budgets bud = tile_budgets_of(caches);
  const kn_igemm_ukernels *uk = uk_of(isa, g);
  p->uk = uk;
  p->cg = g->c / g->group;
  p->mg = g->m / g->group;
  p->rows = row_taps(g);
  p->taps = p->rows ? g->kh : g->kh * g->kw;
  p->kc = p->rows ? g->kw * g->c : p->cg;
  panel_geom(uk, g, &p->nr, &p->npanels, &p->gstride);
  p->np = g->n * g->oh * g->ow;
  int64_t col_bytes = p->nr * (int64_t)sizeof(float); /* one depth step of a panel */
  p->tb = p->taps;
  p->kcb = p->kc;
  if (p->taps * p->kc * col_bytes > bud.depth) {
    if (p->kc * col_bytes <= bud.depth) {
      p->tb = bud.depth / (p->kc * col_bytes);
      p->tb = cdiv(p->taps, cdiv(p->taps, p->tb)); /* equal blocks */
    } else {
      p->tb = 1;
      p->kcb = bud.depth / col_bytes;
      if (p->kcb < 1) p->kcb = 1; /* an L2 smaller than a few panel rows */
      p->kcb = cdiv(p->kc, cdiv(p->kc, p->kcb));
    }
  }
  /* A chunk's rows of one depth block stay in L2 while the panels pass
   * over them (the task runs depth blocks outside panels, see conv_task):
   * with the depth split, the chunk is bounded by a block's rows, not by
   * the whole rows (ResNet-50's 3x3 on 512 channels at 7x7: 12 pixels a
   * chunk, and each of 5 chunks streamed all 9.4 MB of weights from L3;
   * now one chunk of 49), and by its partial sums in C. */
  int64_t mr = uk->mr, arow = p->tb * p->kcb * (int64_t)sizeof(float);
  int64_t chunk = bud.copy / (arow > 0 ? arow : 1) / mr * mr;
  if (p->tb < p->taps || p->kcb < p->kc) {
    int64_t crow = p->mg * (int64_t)sizeof(float);
    if (chunk > bud.psum / crow / mr * mr) chunk = bud.psum / crow / mr * mr;
  }
  if (chunk > MAX_BLOCKS * mr) chunk = MAX_BLOCKS * mr;
  if (chunk < mr) chunk = mr;
  int64_t need = threads > 1 ? 8 * (int64_t)threads : 1;
  int64_t nchunks = cdiv(p->np, chunk), npg = 1;
  /* Enough tasks for the threads: split the panels first (each task then
   * rereads its chunk's input, cheaper than rereading a panel), then the
   * pixels.  8 a thread rather than 4: on these shared machines one core
   * often runs 10-20% slower than the other for minutes, and the pool
   * balances only by whole tasks (MobileNetV2, 2 threads, 8 interleaved
   * rounds: 2.50 -> 2.43 ms; SqueezeNet 1.86 -> 1.85; ResNet-50 equal). */
  if (g->group * nchunks < need) {
    npg = cdiv(need, g->group * nchunks);
    if (npg > p->npanels) npg = p->npanels;
  }
  if (g->group * nchunks * npg < need) {
    int64_t want = cdiv(need, g->group * npg);
    chunk = cdiv(cdiv(p->np, want), mr) * mr;
    if (chunk < mr) chunk = mr;
    nchunks = cdiv(p->np, chunk);
  }
  /* equal chunks: 784 pixels in chunks of 384 were 384 + 384 + 16, and
   * with a thread owning each range of tasks one of two threads got most
   * of the work (SqueezeNet's classifier: 126 + 43 pixels) */
  chunk = cdiv(cdiv(p->np, nchunks), mr) * mr;
  nchunks = cdiv(p->np, chunk);
  p->chunk = chunk;
  p->nchunks = nchunks;
  p->ppt = cdiv(p->npanels, npg);
  p->npg = cdiv(p->npanels, p->ppt);
  p->zero_floats = (size_t)p->kc;
  if (p->rows) {
    int64_t right = (g->ow - 1) * g->sw + g->kw; /* padded columns the windows reach */
    p->wp = g->w + g->pl > right ? g->w + g->pl : right;
    p->xp_floats = (size_t)(g->n * g->h * p->wp * g->c);
  }
  p->ptr_count = (size_t)(cdiv(chunk, mr) * p->taps * uk->mr_max);
  /* Taps in the padding: a dilated conv on a small map (ASPP's dilation
   * 12 on 20x20) reads padding through most (tap, pixel) pairs; a block
   * of pixels that reads padding through a tap with every pixel skips it.
   * Worth the per-block check where over a quarter of the pairs are
   * padding (a 3x3 pad-1 conv on 56x56: 2.4%). */
  if (!p->rows && p->taps <= SKIP_TAPS_MAX) {
    double live = 1.0;
    int64_t dims[2][6] = {{g->h, g->oh, g->kh, g->sh, g->dh, g->pt},
                          {g->w, g->ow, g->kw, g->sw, g->dw, g->pl}};
    for (int k = 0; k < 2; k++) {
      int64_t in = dims[k][0], out = dims[k][1], kk = dims[k][2], n = 0;
      for (int64_t o = 0; o < out; o++)
        for (int64_t t = 0; t < kk; t++) {
          int64_t i = o * dims[k][3] - dims[k][5] + t * dims[k][4];
          n += i >= 0 && i < in;
        }
      live *= out * kk > 0 ? (double)n / (double)(out * kk) : 1.0;
    }
    p->skip = live < 0.75;
  }
  /* An input-channel scale (a squeeze-and-excitation gate) on one image
   * whose pixels outnumber a group's packed output channels scales a copy
   * of the weights, k x that many floats, rather than every pixel's A row,
   * np x k (EfficientNet-B0's 32 -> 16 projection at 112x112: 512 weights
   * against 401k inputs).  The products are then x (s w), not (x s) w:
   * one more rounding each, as a reference that folds s into W has. */
  p->wscale = scaled && !p->rows && g->n == 1 && p->np > p->npanels * p->nr;
  p->wscale_floats = p->wscale ? (size_t)(g->group * p->gstride) : 0;
  p->copy_floats = p->rows || p->wscale || !scaled ? 0 : (size_t)(chunk * p->taps * p->kc);
  p->thread_bytes =
      align64(p->ptr_count * sizeof(float *)) + align64(p->copy_floats * sizeof(float));
}

size_t kn_f32_conv_nhwc_pack_size(kn_isa isa, const kn_conv2d *g) {
  int64_t nr, npanels, gstride;
  panel_geom(uk_of(isa, g), g, &nr, &npanels, &gstride);
  return (size_t)(g->group * gstride);
}

void kn_f32_conv_nhwc_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst) {
  const kn_igemm_ukernels *uk = uk_of(isa, g);
  int64_t nr, npanels, gstride;
  panel_geom(uk, g, &nr, &npanels, &gstride);
  int64_t cg = g->c / g->group, mg = g->m / g->group, ksz = g->kh * g->kw, k = ksz * cg;
  for (int64_t gi = 0; gi < g->group; gi++)
    for (int64_t pi = 0; pi < npanels; pi++) {
      int64_t width = mg - pi * nr < nr ? mg - pi * nr : nr;
      int64_t nrs = cdiv(width, uk->vl) * uk->vl;
      float *d = dst + gi * gstride + pi * nr * k;
      for (int64_t t = 0; t < ksz; t++)
        for (int64_t ci = 0; ci < cg; ci++, d += nrs)
          for (int64_t j = 0; j < nrs; j++)
            d[j] = j < width ? w[((gi * mg + pi * nr + j) * cg + ci) * ksz + t] : 0.0f;
    }
}

size_t kn_f32_conv_nhwc_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads, bool scaled,
                                const kn_caches *caches) {
  plan p;
  make_plan(isa, g, threads, scaled, caches, &p);
  return align64(p.zero_floats * sizeof(float)) + align64(p.xp_floats * sizeof(float)) +
         align64(p.wscale_floats * sizeof(float)) + (size_t)threads * p.thread_bytes;
}

/* Output channels in panel pi of a group, and its packed width (whole
 * vectors). */
static int64_t panel_width(const plan *p, int64_t pi, int64_t *nrs) {
  int64_t width = p->mg - pi * p->nr < p->nr ? p->mg - pi * p->nr : p->nr;
  *nrs = cdiv(width, p->uk->vl) * p->uk->vl;
  return width;
}

/* dst = the packed weights with each depth row d (tap t, channel ch of
 * group gi) times s[gi * cg + ch]: the layout of kn_f32_conv_nhwc_pack. */
static void scale_weights(const plan *p, const kn_conv2d *g, const float *w, const float *s,
                          float *dst) {
  int64_t k = p->taps * p->kc;
  for (int64_t gi = 0; gi < g->group; gi++)
    for (int64_t pi = 0; pi < p->npanels; pi++) {
      int64_t nrs;
      panel_width(p, pi, &nrs);
      int64_t off = gi * p->gstride + pi * p->nr * k;
      for (int64_t d = 0; d < k; d++) {
        const float *src = w + off + d * nrs;
        float *out = dst + off + d * nrs, f = s[gi * p->cg + d % p->kc];
        for (int64_t j = 0; j < nrs; j++) out[j] = src[j] * f;
      }
    }
}

/* ---- driver --------------------------------------------------------------- */

typedef struct job {
  kn_isa isa;
  const kn_conv2d *g;
  plan p;
  const float *x, *s, *wp;
  const kn_epilogue *ep;
  float *y;
  const float *zero, *xp; /* the zero row; row taps: the padded input */
  char *thread_scratch;
  kn_igemm_params kp; /* the parts shared by every tile */
  const kn_ew_ukernels *ew; /* the scaled copies */
  bool post_act;      /* an activation the micro-kernel does not do */
  bool kernel_res;    /* the micro-kernel adds the residual */
} job;

/* Row taps: one padded, scaled input row (task = image x row). */
static void pad_row(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const job *j = arg;
  const kn_conv2d *g = j->g;
  int64_t c = g->c, b = task / g->h;
  const float *src = j->x + task * g->w * c;
  float *d = (float *)j->xp + task * j->p.wp * c;
  int64_t left = g->pl * c, n = g->w * c, total = j->p.wp * c;
  memset(d, 0, (size_t)left * sizeof(float));
  if (j->s) {
    const float *sc = j->s + b * c;
    for (int64_t i = 0; i < n; i++) d[left + i] = src[i] * sc[i % c];
  } else {
    memcpy(d + left, src, (size_t)n * sizeof(float));
  }
  memset(d + left + n, 0, (size_t)(total - left - n) * sizeof(float));
}

/* Rows of the block that starts `left` pixels before the chunk's end. */
static int64_t block_rows(const kn_igemm_ukernels *uk, int64_t left) {
  return left <= uk->mr_max && left > uk->mr ? left : left < uk->mr ? left : uk->mr;
}

/* The table of a block whose `rows` pixels lie in one output row (image b,
 * row oy, from column ox), unscaled: a tap's pointers then step by sw * c
 * floats from pixel to pixel, so each tap costs one bounds check instead of
 * one per pixel.  The entries are those of the per-pixel loop below (the
 * 3x3 stride-2 stem on 112x112 outputs spent a third of its time building
 * tables that way: 3 taps per pixel against 27 depth steps of FMAs for 6). */
static void strip_tables(const job *j, int64_t gi, int64_t b, int64_t oy, int64_t ox,
                         int64_t rows, const float **restrict t) {
  /* locals: the stores into t (const float *) could otherwise alias the
   * job's pointers and the geometry, reloaded at every entry */
  const kn_conv2d g = *j->g;
  const float *zero = j->zero;
  int64_t c = g.c, step = g.sw * c, iy0 = oy * g.sh - g.pt, ix0 = ox * g.sw - g.pl;
  for (int64_t ky = 0, tap = 0; ky < g.kh; ky++) {
    int64_t iy = iy0 + ky * g.dh;
    bool yin = iy >= 0 && iy < g.h;
    const float **tt = t + tap * rows;
    if (j->p.rows) { /* the padded copy holds every column a window reaches */
      const float *base = yin ? j->xp + ((b * g.h + iy) * j->p.wp + ox * g.sw) * c : NULL;
      for (int64_t r = 0; r < rows; r++) tt[r] = yin ? base + r * step : zero;
      tap++;
      continue;
    }
    const float *row = yin ? j->x + (b * g.h + iy) * g.w * c + gi * j->p.cg : NULL;
    for (int64_t kx = 0; kx < g.kw; kx++, tap++, tt += rows) {
      int64_t ix = ix0 + kx * g.dw;
      if (yin && ix >= 0 && ix + (rows - 1) * g.sw < g.w) {
        const float *base = row + ix * c;
        for (int64_t r = 0; r < rows; r++) tt[r] = base + r * step;
        continue;
      }
      for (int64_t r = 0; r < rows; r++) {
        int64_t x = ix + r * g.sw;
        tt[r] = yin && x >= 0 && x < g.w ? row + x * c : zero;
      }
    }
  }
}

/* (b, oy, ox) moved on by n output pixels, n not past the row's end. */
static inline void next_pixels(const kn_conv2d *g, int64_t n, int64_t *b, int64_t *oy,
                               int64_t *ox) {
  if ((*ox += n) < g->ow) return;
  *ox = 0;
  if (++*oy == g->oh) {
    *oy = 0;
    ++*b;
  }
}

/* Pointer tables of the blocks of pixels [p0, p1) of group gi: block k's
 * entries start at tab + k * taps * mr_max, [tap][row].  With a scale (and no
 * row taps) the rows are scaled copies in buf. */
static void build_tables(const job *j, int64_t gi, int64_t p0, int64_t p1, const float **tab,
                         float *buf) {
  const kn_conv2d *g = j->g;
  const plan *p = &j->p;
  int64_t ohw = g->oh * g->ow, taps = p->taps, kc = p->kc;
  int64_t b = p0 / ohw, oy = p0 % ohw / g->ow, ox = p0 % g->ow;
  const float **t = tab;
  bool pointwise = taps == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
                   g->oh == g->h && g->ow == g->w && !j->s;
  for (int64_t q0 = p0, rows; q0 < p1; q0 += rows, t += taps * p->uk->mr_max) {
    rows = block_rows(p->uk, p1 - q0);
    if (pointwise) { /* pixel q reads input pixel q */
      for (int64_t r = 0; r < rows; r++) t[r] = j->x + (q0 + r) * g->c + gi * p->cg;
      continue;
    }
    if (!j->s && ox + rows <= g->ow) {
      strip_tables(j, gi, b, oy, ox, rows, t);
      next_pixels(g, rows, &b, &oy, &ox);
      continue;
    }
    for (int64_t r = 0; r < rows; r++) {
      int64_t iy0 = oy * g->sh - g->pt, ix0 = ox * g->sw - g->pl;
      for (int64_t ky = 0, tap = 0; ky < g->kh; ky++) {
        int64_t iy = iy0 + ky * g->dh;
        bool yin = iy >= 0 && iy < g->h;
        if (p->rows) {
          t[tap * rows + r] = yin ? j->xp + ((b * g->h + iy) * p->wp + ox * g->sw) * g->c : j->zero;
          tap++;
          continue;
        }
        for (int64_t kx = 0; kx < g->kw; kx++, tap++) {
          int64_t ix = ix0 + kx * g->dw;
          const float *src = yin && ix >= 0 && ix < g->w
                                 ? j->x + ((b * g->h + iy) * g->w + ix) * g->c + gi * p->cg
                                 : j->zero;
          if (j->s && src != j->zero) {
            /* with the ISA's vectors: this file is compiled for any x86-64,
             * and the loop in SSE was 4% of EfficientNet-B0's time */
            float *d = buf + ((q0 - p0 + r) * taps + tap) * kc;
            const float *sc = j->s + b * g->c + gi * p->cg;
            j->ew->binary(KN_VBIN_MUL, src, 1, sc, 1, d, kc);
            src = d;
          }
          t[tap * rows + r] = src;
        }
      }
      next_pixels(g, 1, &b, &oy, &ox);
    }
  }
}

void kn_f32_conv_nhwc_tiling(kn_isa isa, const kn_conv2d *g, const kn_caches *caches, char *buf,
                             size_t len) {
  plan p;
  make_plan(isa, g, 1, false, caches, &p);
  snprintf(buf, len, "blk %lldx%lld %lldpx %lldc", (long long)p.tb, (long long)p.kcb,
           (long long)p.chunk, (long long)p.nr);
}

static void conv_task(void *arg, int64_t task, int32_t thread) {
  const job *j = arg;
  const kn_conv2d *g = j->g;
  const plan *p = &j->p;
  int64_t pg = task % p->npg, ci = task / p->npg % p->nchunks, gi = task / p->npg / p->nchunks;
  int64_t p0 = ci * p->chunk, p1 = p0 + p->chunk < p->np ? p0 + p->chunk : p->np;
  int64_t pa = pg * p->ppt, pb = pa + p->ppt < p->npanels ? pa + p->ppt : p->npanels;
  char *ts = j->thread_scratch + (size_t)thread * p->thread_bytes;
  const float **tab = (const float **)ts;
  float *buf = (float *)(ts + align64(p->ptr_count * sizeof(float *)));
  build_tables(j, gi, p0, p1, tab, buf);
  int64_t m = g->m, ldy = kn_conv2d_ldy(g), k = p->taps * p->kc;
  /* depth blocks outside panels: a block's A rows stay in L2 for every
   * panel, and each panel's block of weights is read from L3 once per
   * chunk.  Each output still sums its depth blocks in order. */
  for (int64_t t0 = 0; t0 < p->taps; t0 += p->tb)
    for (int64_t k0 = 0; k0 < p->kc; k0 += p->kcb)
      for (int64_t pi = pa; pi < pb; pi++) {
        int64_t col = gi * p->mg + pi * p->nr;
        int64_t nrs, width = panel_width(p, pi, &nrs), nv = nrs / p->uk->vl;
        const float *w = j->wp + gi * p->gstride + pi * p->nr * k;
        const float *bias = j->ep && j->ep->bias ? j->ep->bias + col : NULL;
        int64_t tn = p->taps - t0 < p->tb ? p->taps - t0 : p->tb;
        int64_t kn = p->kc - k0 < p->kcb ? p->kc - k0 : p->kcb;
        bool last = t0 + tn == p->taps && k0 + kn == p->kc;
        kn_igemm_params kp = j->kp;
        kp.accumulate = t0 > 0 || k0 > 0;
        kp.a_off = k0;
        if (!last) kp.clamp = false;
        kp.bias = last ? bias : NULL;
        const float *wd = w + (t0 * p->kc + k0) * nrs;
        const float *const *t = tab;
        for (int64_t q0 = p0, rows; q0 < p1; q0 += rows, t += p->taps * p->uk->mr_max) {
          rows = block_rows(p->uk, p1 - q0);
          float *c = j->y + q0 * ldy + col;
          const float *res = j->ep && j->ep->res ? j->ep->res + q0 * m + col : NULL;
          kp.res = j->kernel_res && last ? res : NULL;
          const float *const *tt = t + t0 * rows;
          int64_t nt = tn;
          const float *live_ptr[SKIP_TAPS_MAX * KN_IGEMM_MR_MAX];
          int32_t live_tap[SKIP_TAPS_MAX];
          kp.tap = NULL;
          if (p->skip) {
            /* the taps some pixel of the block reads the input through */
            nt = 0;
            for (int64_t q = 0; q < tn; q++) {
              bool any = false;
              for (int64_t r = 0; r < rows; r++) any |= tt[q * rows + r] != j->zero;
              if (!any) continue;
              memcpy(live_ptr + nt * rows, tt + q * rows, (size_t)rows * sizeof *live_ptr);
              live_tap[nt++] = (int32_t)q;
            }
            if (nt < tn) {
              tt = live_ptr;
              kp.tap = live_tap;
              kp.tap_stride = kn * nrs;
            } else {
              nt = tn;
            }
          }
          p->uk->fn[nv - 1][rows - 1](nt, kn, tt, wd, c, ldy, width, &kp);
          if (j->post_act && last) {
            kn_epilogue e = {.act = j->ep->act, .res = j->kernel_res ? NULL : res, .ldr = m};
            kn_f32_epilogue(j->isa, &e, c, ldy, 0, rows, 0, width);
          }
        }
      }
}

void kn_f32_conv_nhwc(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                      const float *s, const float *wpacked, const kn_epilogue *ep, float *y,
                      void *scratch, const kn_caches *caches) {
  if (g->n * g->m * g->oh * g->ow == 0) return;
  KN_ASSERT(!(ep && ep->res) || kn_conv2d_ldy(g) == g->m); /* the residual shares y's stride */
  int32_t threads = kn_pool_threads(pool);
  job j = {.isa = isa, .g = g, .x = x, .s = s, .wp = wpacked, .ep = ep, .y = y,
           .ew = kn_ew_get(isa)};
  make_plan(isa, g, threads, s != NULL, caches, &j.p);
  char *sp = scratch;
  float *zero = (float *)sp;
  memset(zero, 0, j.p.zero_floats * sizeof(float));
  j.zero = zero;
  sp += align64(j.p.zero_floats * sizeof(float));
  j.xp = (const float *)sp;
  sp += align64(j.p.xp_floats * sizeof(float));
  if (j.p.wscale) {
    scale_weights(&j.p, g, wpacked, s, (float *)sp);
    j.wp = (const float *)sp;
    j.s = NULL;
  }
  sp += align64(j.p.wscale_floats * sizeof(float));
  j.thread_scratch = sp;
  kn_act act = ep ? ep->act.act : KN_ACT_NONE;
  bool in_regs = act == KN_ACT_NONE || act == KN_ACT_RELU || act == KN_ACT_CLIP;
  j.post_act = !in_regs;
  j.kernel_res = ep && ep->res && (in_regs || ep->res_first);
  j.kp.res_after = ep && !ep->res_first;
  j.kp.clamp = act == KN_ACT_RELU || act == KN_ACT_CLIP;
  j.kp.lo = act == KN_ACT_CLIP ? ep->act.lo : 0.0f;
  j.kp.hi = act == KN_ACT_CLIP ? ep->act.hi : INFINITY;
  double xb = 4.0 * (double)(g->n * g->h * g->w * g->c), yb = 4.0 * (double)(j.p.np * g->m);
  if (j.p.rows)
    kn_pool_for(kn_pool_worth(pool, 0, xb + 4.0 * (double)j.p.xp_floats), g->n * g->h, pad_row,
                &j);
  double flops = 2.0 * (double)j.p.np * (double)g->m * (double)(j.p.taps * j.p.kc);
  kn_pool_for(kn_pool_worth(pool, flops, xb + yb), g->group * j.p.nchunks * j.p.npg, conv_task,
              &j);
}
