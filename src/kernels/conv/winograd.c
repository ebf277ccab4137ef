/*
 * conv_winograd: 3x3, stride-1, undilated, ungrouped convolution by
 * Winograd's minimal filtering F(4x4, 3x3) (Lavin & Gray, "Fast Algorithms
 * for Convolutional Neural Networks", 2016; their matrices):
 *
 *   Y(tile) = A^T [ sum_c (G g_{m,c} G^T) (.) (B^T d_c B) ] A
 *
 * with 6x6 input tiles d overlapping by 2 and 4x4 output tiles.  Per
 * position xi of the 6x6 domain the channel sum is a product
 *   M_xi [m, tiles] = U_xi [m, c] x V_xi [c, tiles],
 * 36 multiply-adds per tile and channel pair instead of the direct
 * method's 16 * 9 = 144: a quarter (a third on 14x14 and 7x7 maps, whose
 * last tiles are cut by the edge).  The price is the transforms and a
 * larger rounding error (values mixed with weights up to 8 and 1/24:
 * about 10x that of a direct sum, well inside 1e-3 relative).
 *
 * Per image, one kn_pool_for over (block of tiles, group of panels of MR
 * output channels); every output element is computed by one task in one
 * fixed order (the products sum over c in order whatever the blocking),
 * so results are identical for any thread count.  A task:
 *   1. transforms the block's input into its thread's V, one tile per
 *      vector lane (winograd.h has the layouts);
 *   2. per panel: 36 register-blocked products over the whole depth c
 *      into M, then the output transform of the panel's channels with
 *      bias, Relu/Clip and the residual applied while the tile is in
 *      registers (other activations on the block's rows right after,
 *      still in L1/L2).
 * A block holds as many tiles as keep its V (36 * c * tiles floats) and
 * the panel's M (36 * MR * tiles) in about 3/4 of L2 (the machine
 * description's, given at pack time and kept in the packed weights'
 * header): V is re-read
 * from L2 by every panel, U streams through once per block.  Blocks are
 * made as many as the threads (when the image has that many vectors of
 * tiles) so that one barrier per image suffices.
 */
#include <math.h>

#include "kernels/conv/conv.h"
#include "kernels/conv/winograd.h"
#include "kernels/gemm/gemm.h"

#define NPOS KN_WG_NPOS
#define HEADER 16 /* floats before U in the packed weights (keeps 64-byte alignment) */
#define MAX_CHUNKS 8 /* most CW-lane chunks per block (bounds the scratch) */

static const kn_wg_ukernels *wg_uk(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return &kn_f32_winograd_f43__avx512;
  if (isa == KN_ISA_AVX2) return &kn_f32_winograd_f43__avx2;
#else
  (void)isa;
#endif
  return &kn_f32_winograd_f43__portable;
}

bool kn_f32_conv_winograd_fits(const kn_conv2d *g) {
  /* 2-D only; gathers index a plane with int32 offsets */
  return g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
         g->group == 1 && g->kd < 1 && (g->h + 8) * (g->w + 8) < ((int64_t)1 << 30) &&
         (g->oh + 8) * (g->ow + 8) < ((int64_t)1 << 30);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Vector lanes of one image (tiles rounded up to whole vectors). */
static int64_t image_lanes(const kn_wg_ukernels *uk, const kn_conv2d *g) {
  return ceil_div(ceil_div(g->oh, 4) * ceil_div(g->ow, 4), uk->vn) * uk->vn;
}

/* Largest block: MAX_CHUNKS chunks, never more than the image has. */
static int64_t block_cap(const kn_wg_ukernels *uk, const kn_conv2d *g) {
  int64_t cw = 2 * uk->vn;
  return min64(MAX_CHUNKS * cw, ceil_div(image_lanes(uk, g), cw) * cw);
}

/* Lanes per block for an L2 of l2 bytes (see the file comment). */
static int64_t block_lanes(const kn_wg_ukernels *uk, const kn_conv2d *g, size_t l2) {
  int64_t cw = 2 * uk->vn;
  int64_t per_lane = NPOS * (int64_t)sizeof(float) * (max64(g->c, 1) + uk->mr);
  int64_t tb = (int64_t)(l2 / 4 * 3) / per_lane / cw * cw;
  return max64(cw, min64(tb, block_cap(uk, g)));
}

static int64_t panels(const kn_wg_ukernels *uk, const kn_conv2d *g) {
  return ceil_div(g->m, uk->mr);
}

size_t kn_f32_conv_winograd_pack_size(kn_isa isa, const kn_conv2d *g) {
  const kn_wg_ukernels *uk = wg_uk(isa);
  return HEADER + (size_t)(panels(uk, g) * uk->mr * NPOS * g->c);
}

/* U = G w G^T per (output, input) channel pair, in double (the rounding
 * of the 1/6 and 1/24 entries would otherwise add to the run's error). */
int64_t kn_f32_conv_winograd_block_lanes(const float *packed) {
  int32_t hdr[HEADER];
  memcpy(hdr, packed, sizeof hdr);
  return hdr[0];
}

void kn_f32_conv_winograd_pack(kn_isa isa, const kn_conv2d *g, size_t l2, const float *w,
                               float *dst) {
  static const double G[6][3] = {
      {1.0 / 4, 0, 0},
      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
      {1.0 / 24, 1.0 / 12, 1.0 / 6},
      {1.0 / 24, -1.0 / 12, 1.0 / 6},
      {0, 0, 1},
  };
  KN_ASSERT(kn_f32_conv_winograd_fits(g));
  const kn_wg_ukernels *uk = wg_uk(isa);
  int32_t hdr[HEADER] = {(int32_t)block_lanes(uk, g, l2), uk->vn, uk->mr};
  memcpy(dst, hdr, sizeof hdr);
  float *u = dst + HEADER;
  int64_t mr = uk->mr, c = g->c, np = panels(uk, g);
  memset(u, 0, (size_t)(np * mr * NPOS * c) * sizeof(float));
  for (int64_t m = 0; m < g->m; m++)
    for (int64_t k = 0; k < c; k++) {
      const float *f = w + (m * c + k) * 9;
      double gf[6][3]; /* G f */
      for (int i = 0; i < 6; i++)
        for (int b = 0; b < 3; b++)
          gf[i][b] = G[i][0] * f[b] + G[i][1] * f[3 + b] + G[i][2] * f[6 + b];
      float *up = u + (m / mr) * mr * NPOS * c + k * mr + m % mr;
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++)
          up[(i * 6 + j) * c * mr] =
              (float)(gf[i][0] * G[j][0] + gf[i][1] * G[j][1] + gf[i][2] * G[j][2]);
    }
}

/* ---- run ---------------------------------------------------------------- */

typedef struct wg_layout {
  int64_t tw, tiles, lanes; /* tiles per row, tiles and vector lanes per image */
  int64_t tb, tbc;          /* lanes per block; rounded up to whole chunks */
  int64_t nblocks, npanels, groups; /* groups: of panels per block (tasks) */
  size_t lanes_bytes, v_floats, m_floats; /* v, m: per thread */
} wg_layout;

static size_t align64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Blocks of at most tbh lanes (the pack's choice), as many as the threads
 * when the image has the lanes, and as even as whole vectors allow; when
 * there are fewer blocks than threads, each block's panels are split in
 * `groups` (each of those tasks transforms the block's input itself: a
 * few percent of its products, cheaper than a second barrier). */
static void layout(const kn_wg_ukernels *uk, const kn_conv2d *g, int64_t tbh, int32_t threads,
                   wg_layout *L) {
  int64_t vn = uk->vn, cw = 2 * vn;
  L->tw = ceil_div(g->ow, 4);
  L->tiles = ceil_div(g->oh, 4) * L->tw;
  L->lanes = image_lanes(uk, g);
  int64_t nb = ceil_div(L->lanes, tbh);
  if (nb % threads) nb = min64(ceil_div(nb, threads) * threads, L->lanes / vn);
  L->tb = ceil_div(ceil_div(L->lanes, nb), vn) * vn;
  L->tbc = ceil_div(L->tb, cw) * cw;
  L->nblocks = ceil_div(L->lanes, L->tb);
  L->npanels = panels(uk, g);
  L->groups = L->nblocks < threads ? min64(ceil_div(threads, L->nblocks), L->npanels) : 1;
  L->lanes_bytes = align64((size_t)(L->lanes / vn) * sizeof(kn_wg_lanes));
  L->v_floats = (size_t)(L->tbc * NPOS * g->c);
  L->m_floats = (size_t)(NPOS * uk->mr * L->tbc);
}

size_t kn_f32_conv_winograd_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads) {
  const kn_wg_ukernels *uk = wg_uk(isa);
  wg_layout L;
  /* blocks are at most the pack's size, itself at most block_cap */
  layout(uk, g, block_cap(uk, g), 1, &L);
  return L.lanes_bytes + (size_t)(threads > 0 ? threads : 1) *
                             (align64(L.v_floats * sizeof(float)) +
                              align64(L.m_floats * sizeof(float)));
}

typedef struct wg_job {
  kn_isa isa;
  const kn_wg_ukernels *uk;
  const kn_conv2d *g;
  wg_layout L;
  const float *x, *u; /* x: this image */
  const kn_epilogue *ep;
  kn_wg_epi epi;
  bool act_after;   /* an activation the output kernel does not do */
  const float *res; /* this image's residual, or NULL */
  float *y;         /* this image's output */
  const kn_wg_lanes *ln;
  char *buf; /* per thread: V of a block, then M of a panel */
  size_t v_bytes, thread_bytes;
} wg_job;

static void make_lanes(const kn_wg_ukernels *uk, const kn_conv2d *g, const wg_layout *L,
                       kn_wg_lanes *out) {
  int64_t vn = uk->vn;
  for (int64_t gi = 0; gi < L->lanes / vn; gi++) {
    kn_wg_lanes *d = &out[gi];
    memset(d, 0, sizeof *d);
    for (int64_t l = 0; l < vn; l++) {
      int64_t t = gi * vn + l;
      if (t >= L->tiles) continue;
      int64_t ty = t / L->tw, tx = t % L->tw;
      int64_t iy0 = ty * 4 - g->pt, ix0 = tx * 4 - g->pl;
      d->in_off[l] = (int32_t)(iy0 * g->w + ix0);
      for (int a = 0; a < 6; a++) {
        if (iy0 + a >= 0 && iy0 + a < g->h) d->rbits[a] |= 1u << l;
        if (ix0 + a >= 0 && ix0 + a < g->w) {
          d->cbits[a] |= 1u << l;
          d->cmask[l] |= (uint8_t)(1u << a);
        }
      }
      d->out_off[l] = (int32_t)(ty * 4 * g->ow + tx * 4);
      d->nrows[l] = (uint8_t)min64(4, g->oh - ty * 4);
      d->ncols[l] = (uint8_t)min64(4, g->ow - tx * 4);
    }
  }
}

/* Activation (and a residual after it) on channel mo's outputs of tiles
 * [t0, t1): the output rows those tiles cover, a few runs per tile row. */
static void act_rows(const wg_job *j, int64_t mo, int64_t t0, int64_t t1) {
  const kn_conv2d *g = j->g;
  int64_t tw = j->L.tw, ohw = g->oh * g->ow;
  float *y = j->y + mo * ohw;
  const float *res = j->res && !j->epi.res_first ? j->res + mo * ohw : NULL;
  for (int64_t ty = t0 / tw; ty * tw < t1; ty++) {
    int64_t xa = max64(t0 - ty * tw, 0) * 4, xb = min64(min64(t1 - ty * tw, tw) * 4, g->ow);
    for (int64_t oy = ty * 4; oy < min64(ty * 4 + 4, g->oh); oy++) {
      float *row = y + oy * g->ow + xa;
      kn_f32_act(j->isa, &j->ep->act, row, row, xb - xa);
      if (res)
        for (int64_t q = 0; q < xb - xa; q++) row[q] += res[oy * g->ow + xa + q];
    }
  }
}

/* One task: block blk of tiles, group pg of its panels of MR output
 * channels: input transform of the block into this thread's V, then per
 * panel the 36 products into M and the output transform. */
static void wg_task(void *arg, int64_t task, int32_t thread) {
  const wg_job *j = arg;
  const kn_wg_ukernels *uk = j->uk;
  const kn_conv2d *g = j->g;
  const wg_layout *L = &j->L;
  int64_t blk = task / L->groups, pg = task % L->groups;
  int64_t vn = uk->vn, mr = uk->mr, cw = 2 * vn, c = g->c, tbc = L->tbc;
  int64_t lane0 = blk * L->tb, nl = min64(L->tb, L->lanes - lane0);
  float *v = (float *)(j->buf + (size_t)thread * j->thread_bytes);
  float *mt = (float *)((char *)v + j->v_bytes);
  for (int64_t ci = 0; ci < c; ci++) {
    const float *plane = j->x + ci * g->h * g->w;
    for (int64_t lb = 0; lb < nl; lb += vn)
      uk->input(plane, g->w, &j->ln[(lane0 + lb) / vn], v + (lb / cw) * c * cw + ci * cw + lb % cw,
                c * tbc);
  }
  int64_t p0 = pg * L->npanels / L->groups, p1 = (pg + 1) * L->npanels / L->groups;
  int64_t ohw = g->oh * g->ow;
  const float *bias = j->ep ? j->ep->bias : NULL;
  for (int64_t p = p0; p < p1; p++) {
    const float *ub = j->u + (size_t)(p * mr * NPOS * c);
    for (int xi = 0; xi < NPOS; xi++)
      for (int64_t ch = 0; ch * cw < nl; ch++)
        uk->gemm(c, ub + (size_t)(xi * c * mr), v + (size_t)(xi * c * tbc + ch * c * cw),
                 mt + xi * mr * tbc + ch * cw, tbc, nl - ch * cw >= cw ? 2 : 1);
    for (int64_t r = 0; r < mr && p * mr + r < g->m; r++) {
      int64_t mo = p * mr + r;
      const float *res = j->res ? j->res + mo * ohw : NULL;
      if (j->act_after && !j->epi.res_first) res = NULL; /* added after the activation */
      for (int64_t l = 0; l < nl; l += vn)
        uk->output(mt + r * tbc + l, mr * tbc, bias ? bias[mo] : 0.0f,
                   &j->ln[(lane0 + l) / vn], j->y + mo * ohw, res, g->ow, &j->epi);
      if (j->act_after) act_rows(j, mo, lane0, min64(lane0 + nl, L->tiles));
    }
  }
}

void kn_f32_conv_winograd(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                          const float *wpacked, const kn_epilogue *ep, float *y,
                          void *scratch) {
  KN_ASSERT(kn_f32_conv_winograd_fits(g));
  if (g->n * g->m * g->oh * g->ow == 0) return;
  const kn_wg_ukernels *uk = wg_uk(isa);
  int64_t ohw = g->oh * g->ow;
  if (g->c == 0) { /* no channels: the output is the epilogue of the bias */
    for (int64_t p = 0; p < g->n * g->m; p++)
      for (int64_t i = 0; i < ohw; i++) y[p * ohw + i] = ep && ep->bias ? ep->bias[p % g->m] : 0;
    if (ep && (ep->act.act != KN_ACT_NONE || ep->res)) {
      kn_epilogue e = *ep;
      e.bias = NULL;
      e.ldr = ohw;
      kn_f32_epilogue(isa, &e, y, ohw, 0, g->n * g->m, 0, ohw);
    }
    return;
  }
  int32_t hdr[HEADER];
  memcpy(hdr, wpacked, sizeof hdr);
  KN_ASSERT(hdr[1] == uk->vn && hdr[2] == uk->mr && hdr[0] >= 2 * uk->vn &&
            hdr[0] <= block_cap(uk, g));
  int32_t threads = kn_pool_threads(pool);
  KN_ASSERT(threads >= 1);
  wg_job j = {.isa = isa, .uk = uk, .g = g, .u = wpacked + HEADER, .ep = ep};
  layout(uk, g, hdr[0], threads, &j.L);
  j.v_bytes = align64(j.L.v_floats * sizeof(float));
  j.thread_bytes = j.v_bytes + align64(j.L.m_floats * sizeof(float));
  char *s = scratch;
  j.ln = (const kn_wg_lanes *)s;
  make_lanes(uk, g, &j.L, (kn_wg_lanes *)s);
  j.buf = s + j.L.lanes_bytes;
  kn_act act = ep ? ep->act.act : KN_ACT_NONE;
  j.epi.clamp = act == KN_ACT_RELU || act == KN_ACT_CLIP;
  j.epi.lo = act == KN_ACT_RELU ? 0.0f : act == KN_ACT_CLIP ? ep->act.lo : 0.0f;
  j.epi.hi = act == KN_ACT_RELU ? INFINITY : act == KN_ACT_CLIP ? ep->act.hi : 0.0f;
  j.epi.res_first = ep && ep->res_first;
  j.act_after = act != KN_ACT_NONE && !j.epi.clamp;
  for (int64_t b = 0; b < g->n; b++) {
    j.x = x + b * g->c * g->h * g->w;
    j.y = y + b * g->m * ohw;
    j.res = ep && ep->res ? ep->res + b * g->m * ohw : NULL;
    kn_pool_for(pool, j.L.nblocks * j.L.groups, wg_task, &j);
  }
}
