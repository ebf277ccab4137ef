/*
 * conv_transpose_gemm: ConvTranspose (the adjoint of a convolution) as
 *   col [m/group*kh*kw, positions] = W_g^T [m/group*kh*kw, c/group] x X_g
 * over blocks of input positions, then col2im: each column scatters its
 * kh*kw values per output channel into the output image (accumulating);
 * in 3-D (kn_conv2d's depth fields) kd*kh*kw values into the volume.
 * W_g^T is prepacked once; X_g is read in place as the GEMM's raw B.
 *
 * The output is zeroed per group first (outputs arrive unzeroed), the
 * epilogue runs per channel once all blocks are scattered.  col2im and the
 * epilogue are split over output channels, which own disjoint planes and
 * see the blocks in a fixed order: results do not depend on threads.
 */
#include "kernels/conv/conv.h"
#include "kernels/gemm/gemm.h"

static int64_t rows_of(const kn_conv2d *g) {
  return g->m / g->group * kn_conv2d_depth(g).kd * g->kh * g->kw;
}
/* Input and output positions of one image (3-D: depth x rows x columns). */
static int64_t in_size(const kn_conv2d *g) { return kn_conv2d_depth(g).d * g->h * g->w; }
static int64_t out_size(const kn_conv2d *g) { return kn_conv2d_depth(g).od * g->oh * g->ow; }

/* Input positions per col block: the block in a quarter of the L2
 * (kn_caches; 256 KiB of 1 MiB), L2-resident while it is scattered, but
 * at least 64 positions. */
static int64_t block_of(const kn_conv2d *g, const kn_caches *caches) {
  int64_t col_floats = (int64_t)(kn_caches_or_common(caches).l2 / 4 / sizeof(float));
  int64_t hw = in_size(g), nb = col_floats / (rows_of(g) > 0 ? rows_of(g) : 1);
  if (nb < 64) nb = 64;
  return nb < hw ? nb : hw;
}

size_t kn_f32_deconv_pack_size(kn_isa isa, const kn_conv2d *g) {
  return (size_t)g->group * kn_sgemm_pack_a_size(isa, rows_of(g), g->c / g->group);
}

void kn_f32_deconv_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst) {
  int64_t rows = rows_of(g), cg = g->c / g->group;
  size_t per = kn_sgemm_pack_a_size(isa, rows, cg);
  for (int64_t gi = 0; gi < g->group; gi++)
    kn_sgemm_pack_a(isa, rows, cg, w + gi * cg * rows, rows, true, dst + (size_t)gi * per);
}

/* bl: the GEMM's blocking, from the same capacities */
static void gemm_args(kn_isa isa, const kn_conv2d *g, const float *a_packed, const float *xb,
                      int64_t cnt, float *col, const kn_sgemm_blocking *bl, kn_sgemm_args *a) {
  memset(a, 0, sizeof *a);
  a->m = rows_of(g);
  a->n = cnt;
  a->k = g->c / g->group;
  a->alpha = 1.0f;
  a->a_packed = a_packed;
  a->b = xb;
  a->ldb = in_size(g);
  a->c = col;
  a->ldc = cnt;
  a->blocking = bl;
  (void)isa;
}

static size_t col_bytes(const kn_conv2d *g, const kn_caches *caches) {
  return ((size_t)(rows_of(g) * block_of(g, caches)) * sizeof(float) + 63) & ~(size_t)63;
}

size_t kn_f32_deconv_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                             const kn_caches *caches) {
  kn_sgemm_args a;
  kn_sgemm_blocking bl = kn_sgemm_blocking_of(isa, caches);
  gemm_args(isa, g, NULL, NULL, block_of(g, caches), NULL, &bl, &a);
  return col_bytes(g, caches) + kn_sgemm_scratch_size(isa, &a, threads);
}

typedef struct dc_job {
  kn_isa isa;
  const kn_conv2d *g;
  float *yg;        /* the group's output planes of this image */
  const float *col; /* the current block */
  int64_t n0, cnt;  /* its input positions */
  kn_epilogue e;    /* bias and residual offset to this image and group */
  bool epi;
} dc_job;

static void zero_task(void *arg, int64_t mo, int32_t thread) {
  (void)thread;
  const dc_job *j = arg;
  int64_t ohw = out_size(j->g);
  memset(j->yg + mo * ohw, 0, (size_t)ohw * sizeof(float));
}

static void col2im_task(void *arg, int64_t mo, int32_t thread) {
  (void)thread;
  const dc_job *j = arg;
  const kn_conv2d *g = j->g;
  kn_conv_depth z = kn_conv2d_depth(g);
  int64_t khw = g->kh * g->kw, ksz = z.kd * khw, cnt = j->cnt;
  float *yp = j->yg + mo * out_size(g);
  for (int64_t kz = 0; kz < z.kd; kz++)
    for (int64_t ky = 0; ky < g->kh; ky++)
      for (int64_t kx = 0; kx < g->kw; kx++) {
        const float *cr = j->col + (mo * ksz + kz * khw + ky * g->kw + kx) * cnt;
        int64_t xoff = kx * g->dw - g->pl;
        /* input columns ix whose output column ix*sw + xoff is in [0, ow) */
        int64_t lo = xoff >= 0 ? 0 : (-xoff + g->sw - 1) / g->sw;
        int64_t hi = xoff >= g->ow ? 0 : (g->ow - 1 - xoff) / g->sw + 1;
        if (hi > g->w) hi = g->w;
        for (int64_t p = j->n0; p < j->n0 + cnt;) {
          int64_t row = p / g->w, ix0 = p % g->w, iz = row / g->h, iy = row % g->h;
          int64_t ix1 = g->w - ix0 < j->n0 + cnt - p ? g->w : ix0 + (j->n0 + cnt - p);
          int64_t oz = iz * z.sd - z.pf + kz * z.dd, oy = iy * g->sh - g->pt + ky * g->dh;
          if (oy >= 0 && oy < g->oh && oz >= 0 && oz < z.od) {
            float *yr = yp + (oz * g->oh + oy) * g->ow;
            int64_t cb = p - j->n0 - ix0; /* cr[cb + ix]: the column of input ix */
            int64_t a = ix0 > lo ? ix0 : lo, b = ix1 < hi ? ix1 : hi;
            if (g->sw == 1)
              for (int64_t ix = a; ix < b; ix++) yr[ix + xoff] += cr[cb + ix];
            else
              for (int64_t ix = a; ix < b; ix++) yr[ix * g->sw + xoff] += cr[cb + ix];
          }
          p += ix1 - ix0;
        }
      }
}

static void epi_task(void *arg, int64_t mo, int32_t thread) {
  (void)thread;
  const dc_job *j = arg;
  int64_t ohw = out_size(j->g);
  kn_f32_epilogue(j->isa, &j->e, j->yg + mo * ohw, ohw, mo, 1, 0, ohw);
}

void kn_f32_deconv(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                   const float *wpacked, const kn_epilogue *ep, float *y, void *scratch,
                   const kn_caches *caches) {
  int64_t mg = g->m / g->group, cg = g->c / g->group, hw = in_size(g), ohw = out_size(g);
  if (g->n * g->m * ohw == 0) return;
  int64_t rows = rows_of(g), nb = block_of(g, caches);
  size_t per = kn_sgemm_pack_a_size(isa, rows, cg);
  kn_sgemm_blocking bl = kn_sgemm_blocking_of(isa, caches);
  float *col = scratch;
  void *gs = (char *)scratch + col_bytes(g, caches);
  for (int64_t b = 0; b < g->n; b++)
    for (int64_t gi = 0; gi < g->group; gi++) {
      dc_job j = {.isa = isa, .g = g, .yg = y + (b * g->m + gi * mg) * ohw, .col = col};
      kn_pool_for(pool, mg, zero_task, &j);
      if (hw > 0 && cg > 0)
        for (int64_t n0 = 0; n0 < hw; n0 += nb) {
          int64_t cnt = hw - n0 < nb ? hw - n0 : nb;
          kn_sgemm_args a;
          gemm_args(isa, g, wpacked + (size_t)gi * per, x + (b * g->c + gi * cg) * hw + n0, cnt,
                    col, &bl, &a);
          kn_sgemm(isa, pool, &a, gs);
          j.n0 = n0;
          j.cnt = cnt;
          kn_pool_for(pool, mg, col2im_task, &j);
        }
      if (ep && (ep->bias || ep->res || ep->act.act != KN_ACT_NONE)) {
        j.e = *ep;
        j.e.bias = ep->bias ? ep->bias + gi * mg : NULL;
        j.e.bias_per_row = true;
        j.e.res = ep->res ? ep->res + (b * g->m + gi * mg) * ohw : NULL;
        j.e.ldr = ohw;
        kn_pool_for(pool, mg, epi_task, &j);
      }
    }
}
