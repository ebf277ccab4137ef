/*
 * conv_winograd_nhwc: 3x3, stride-1, undilated, ungrouped convolution of
 * channels-last tensors by Winograd's F(4x4, 3x3) (Lavin & Gray 2016, the
 * matrices of winograd.c):
 *
 *   Y(tile) = A^T [ sum_c (G g_{m,c} G^T) (.) (B^T d_c B) ] A
 *
 * In NHWC the channel sum at each of the 36 positions xi of the 6x6
 * domain is a GEMM with tiles as rows:
 *   M_xi [tiles, m] = V_xi [tiles, c] x U_xi [c, m],
 * U_xi = the transformed weights, packed once as kn_sgemm's B operand
 * (panels of NR output channels), so the products run on the tuned GEMM
 * micro-kernels (src/kernels/gemm) with the weights read in place.  The
 * transforms are vectorised over channels (winograd-nhwc.h): a channel
 * vector of one tile never meets another tile's, so there are no gathers,
 * transposes or border lanes, only a masked vector at the channel tail.
 *
 * Work is split into blocks of T tiles, numbered across the whole batch
 * (a 7x7 map has only 4 tiles per image), and, when there are fewer
 * blocks than threads, each block's output channels into groups of whole
 * NR panels (each such task transforms its block's input itself: 1/m of
 * its products).  A task: input transform of its block into its thread's
 * V, written directly as kn_sgemm's packed A (row panels of MR tiles:
 * the GEMM's own scalar repacking of a row-major V cost a quarter of the
 * products' time on 64 channels); 36 kn_sgemm calls (pool NULL: the task
 * is the thread's) into M [36][T][ldm]; output transform with bias,
 * Relu/Clip and the residual in registers, written straight to y (other
 * activations run on each finished pixel's channels while in L1).
 *
 * T keeps V and M of a block in one and a half times the L2 (kn_caches:
 * 1.5 MiB for Zen 4/5's 1 MiB, the L2 plus a little L3): the GEMMs read V
 * from there, the output transform re-reads M; U streams from L3 or
 * memory once per block, so T is kept at least 2 row panels deep so each
 * weight loaded feeds that many rows.  The 36 GEMMs take their blocking
 * from the same capacities (kn_sgemm_blocking_of).  On several
 * threads T is then chosen so that the threads get equal shares
 * (balanced_t).  kn_sgemm computes each element in one k order whatever
 * the rows and columns it is given, and block edges stay on multiples of
 * MR, so every output element is the same whatever T and the thread
 * count.
 */
#include <math.h>
#include <stdio.h>

#include "kernels/conv/conv.h"
#include "kernels/conv/winograd-nhwc.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm-ukernel.h" /* KN_SGEMM_MR_MAX */

#define NPOS 36
#define HEADER 16 /* floats before U (keeps U 64-byte aligned) */

const double kn_winograd_f43_g[6][3] = {
    {1.0 / 4, 0, 0},
    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
    {1.0 / 24, 1.0 / 12, 1.0 / 6},
    {1.0 / 24, -1.0 / 12, 1.0 / 6},
    {0, 0, 1},
};

const kn_wgn_ukernels *kn_wgn_ukernels_for(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return &kn_f32_winograd_nhwc_f43__avx512;
  if (isa == KN_ISA_AVX2) return &kn_f32_winograd_nhwc_f43__avx2;
#else
  (void)isa;
#endif
  return &kn_f32_winograd_nhwc_f43__portable;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static size_t align64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Floats of V + M per position (see the file comment): 1.5 L2 over the
 * 36 positions. */
static int64_t block_floats(const kn_caches *caches) {
  return (int64_t)(kn_caches_or_common(caches).l2 / 2 * 3 / sizeof(float) / NPOS);
}

bool kn_f32_conv_winograd_nhwc_fits(const kn_conv2d *g) {
  /* any pads and sizes: windows partly or wholly outside read zeros */
  return g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
         g->group == 1 && g->kd < 1;
}

/* Floats of one U_xi (a packed B of c x m). */
static int64_t u_floats(kn_isa isa, const kn_conv2d *g) {
  return (int64_t)kn_sgemm_pack_b_size(isa, g->c, g->m);
}

size_t kn_f32_conv_winograd_nhwc_pack_size(kn_isa isa, const kn_conv2d *g) {
  return HEADER + (size_t)(NPOS * u_floats(isa, g));
}

/* U = G w G^T per (output, input) channel pair in double (the 1/6 and
 * 1/24 entries would otherwise add their rounding to the run's error),
 * written in kn_sgemm's packed-B layout (gemm.h): U_xi panel j holds, for
 * each input channel k, output channels [j*NR, j*NR+NR), zeros past m. */
void kn_f32_conv_winograd_nhwc_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst) {
  const double(*G)[3] = kn_winograd_f43_g;
  KN_ASSERT(kn_f32_conv_winograd_nhwc_fits(g));
  int64_t nr = kn_sgemm_nr(isa), c = g->c, us = u_floats(isa, g);
  int32_t hdr[HEADER] = {(int32_t)nr, (int32_t)isa};
  memcpy(dst, hdr, sizeof hdr);
  float *u = dst + HEADER;
  memset(u, 0, (size_t)(NPOS * us) * sizeof(float));
  for (int64_t m = 0; m < g->m; m++)
    for (int64_t k = 0; k < c; k++) {
      const float *f = w + (m * c + k) * 9;
      double gf[6][3]; /* G f */
      for (int i = 0; i < 6; i++)
        for (int b = 0; b < 3; b++)
          gf[i][b] = G[i][0] * f[b] + G[i][1] * f[3 + b] + G[i][2] * f[6 + b];
      float *up = u + (m / nr) * nr * c + k * nr + m % nr;
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++)
          up[(i * 6 + j) * us] =
              (float)(gf[i][0] * G[j][0] + gf[i][1] * G[j][1] + gf[i][2] * G[j][2]);
    }
}

/* ---- run ---------------------------------------------------------------- */

typedef struct wgn_layout {
  int64_t th, tw, tiles; /* tile rows and columns per image, tiles in the batch */
  int64_t t;             /* tiles per block */
  int64_t ldm;           /* row stride of M (room for all m) */
  kn_sgemm_blocking bl;  /* the products' */
  int64_t nblocks, npanels, groups;
  int64_t xs_v, xs_m;    /* floats from one position's V, M to the next */
  size_t v_bytes, m_bytes, gemm_bytes, thread_bytes;
} wgn_layout;

/* The GEMM arguments of one product of a block (pointers left out). */
static kn_sgemm_args gemm_args(const kn_conv2d *g, const wgn_layout *L, int64_t rows,
                               int64_t cols) {
  kn_sgemm_args a = {.m = rows, .n = cols, .k = g->c, .alpha = 1.0f, .ldc = L->ldm,
                     .blocking = &L->bl};
  return a;
}

/* A stride between the 36 positions' blocks of V or M: whole cache lines,
 * an odd number of them.  The input transform writes, and the output
 * transform reads, one tile's 36 positions at once; with the plain stride
 * (t x channels, often a multiple of 1024 floats: 56 tiles x 128) all 36
 * fall in one set of the L1 and evict each other (the output transform of
 * 32->128 channels on 27x27 took 29 us instead of 23). */
static int64_t skewed(int64_t floats) {
  int64_t lines = (floats + 15) / 16;
  return (lines | 1) * 16;
}

/* Tiles per block on several threads: a multiple of mr up to t_max, the
 * one whose blocks, in the pool's contiguous ranges, give the busiest
 * thread the fewest tiles (blocks of 42 and 7 tiles, 28x28 at 128
 * channels, ran no faster on 2 threads than on 1; 28 and 21 run 1.9x).
 * Block edges stay on multiples of mr, so each tile meets the same row of
 * the same micro-kernel whatever the thread count; a block of one row
 * panel only where the products take one k pass anyway (kn_sgemm deepens
 * k for a single panel), so results stay bit-identical across counts. */
static int64_t balanced_t(kn_isa isa, const kn_conv2d *g, const kn_sgemm_blocking *bl,
                          int32_t threads, int64_t tiles, int64_t t_max) {
  int64_t mr = kn_sgemm_mr(isa), best = t_max, best_load = INT64_MAX;
  int64_t p_min = g->c <= bl->kc ? 1 : 2;
  for (int64_t tp = p_min; tp * mr <= t_max; tp++) {
    int64_t t = tp * mr, nb = ceil_div(tiles, t), load = 0;
    for (int32_t k = 0; k < threads; k++) {
      int64_t b0 = nb * k / threads, b1 = nb * (k + 1) / threads;
      int64_t mine = min64(b1 * t, tiles) - min64(b0 * t, tiles);
      load = max64(load, mine);
    }
    /* ties: the smaller blocks, more tasks for the pool to balance when one
     * core runs slower than the other (shared machines do: SqueezeNet's
     * 55x55 fire layers in 2 blocks of 98 tiles had one thread busy 107 us
     * and the other 177; in 7 of 28, p50 on 2 threads 3.06 -> 2.86 ms) */
    if (load < best_load) {
      best_load = load;
      best = t;
    }
  }
  return best;
}

static void layout(kn_isa isa, const kn_conv2d *g, int32_t threads, const kn_caches *caches,
                   wgn_layout *L) {
  int64_t mr = kn_sgemm_mr(isa), nr = kn_sgemm_nr(isa);
  L->bl = kn_sgemm_blocking_of(isa, caches);
  L->th = ceil_div(g->oh, 4);
  L->tw = ceil_div(g->ow, 4);
  L->tiles = g->n * L->th * L->tw;
  L->ldm = round_up(max64(g->m, 1), 16);
  int64_t t = block_floats(caches) / (max64(g->c, 1) + L->ldm) / mr * mr;
  t = max64(t, 2 * mr);
  int64_t tiles = max64(L->tiles, 1);
  if (threads > 1 && tiles >= threads * mr) t = balanced_t(isa, g, &L->bl, threads, tiles, t);
  L->t = min64(t, round_up(tiles, mr));
  L->nblocks = ceil_div(L->tiles, L->t);
  L->npanels = ceil_div(g->m, nr);
  /* too few tiles to share (a 7x7 map has 4): split the output channels,
   * each task transforming its block's input itself */
  L->groups = L->nblocks < threads ? min64(ceil_div(threads, L->nblocks), L->npanels) : 1;
  L->xs_v = skewed(round_up(L->t, mr) * max64(g->c, 1)); /* whole row panels */
  L->xs_m = skewed(L->t * L->ldm);
  L->v_bytes = (size_t)(NPOS * L->xs_v) * sizeof(float);
  L->m_bytes = (size_t)(NPOS * L->xs_m) * sizeof(float);
  /* the GEMM's A buffer grows with the rows, but one row panel takes a
   * deeper k pass (gemm.c): the larger of the two cases */
  kn_sgemm_args a = gemm_args(g, L, L->t, g->m), a1 = gemm_args(g, L, min64(L->t, mr), g->m);
  /* any non-NULL pointers: both operands packed */
  a.a_packed = a1.a_packed = a.b_packed = a1.b_packed = (const float *)L;
  size_t s0 = kn_sgemm_scratch_size(isa, &a, 1), s1 = kn_sgemm_scratch_size(isa, &a1, 1);
  L->gemm_bytes = align64(s0 > s1 ? s0 : s1);
  L->thread_bytes = L->v_bytes + L->m_bytes + L->gemm_bytes;
}

void kn_f32_conv_winograd_nhwc_tiling(kn_isa isa, const kn_conv2d *g, const kn_caches *caches,
                                      char *buf, size_t len) {
  wgn_layout L;
  layout(isa, g, 1, caches, &L);
  snprintf(buf, len, "%lld tiles kc %lld mc %lld", (long long)L.t, (long long)L.bl.kc,
           (long long)L.bl.mc);
}

size_t kn_f32_conv_winograd_nhwc_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                                         const kn_caches *caches) {
  wgn_layout L;
  layout(isa, g, threads > 0 ? threads : 1, caches, &L);
  return (size_t)(threads > 0 ? threads : 1) * L.thread_bytes;
}

typedef struct wgn_job {
  kn_isa isa;
  const kn_wgn_ukernels *uk;
  const kn_conv2d *g;
  wgn_layout L;
  const float *x, *s, *u;
  const kn_epilogue *ep;
  kn_wgn_epi epi;
  bool act_after; /* an activation the output transform does not do */
  float *y;
  char *buf;
  int64_t nr, us;
} wgn_job;

static void wgn_task(void *arg, int64_t task, int32_t thread) {
  const wgn_job *j = arg;
  const kn_conv2d *g = j->g;
  const wgn_layout *L = &j->L;
  int64_t blk = task / L->groups, grp = task % L->groups;
  int64_t t0 = blk * L->t, nt = min64(L->t, L->tiles - t0);
  int64_t m0 = grp * L->npanels / L->groups * j->nr;
  int64_t m1 = min64((grp + 1) * L->npanels / L->groups * j->nr, g->m);
  if (nt <= 0 || m1 <= m0) return;
  char *base = j->buf + (size_t)thread * L->thread_bytes;
  float *v = (float *)base, *mt = (float *)(base + L->v_bytes);
  void *gs = base + L->v_bytes + L->m_bytes;
  int64_t tpi = L->th * L->tw, c = g->c, ldy = kn_conv2d_ldy(g);
  int64_t mr = j->uk->mr, xs_v = L->xs_v, xs_m = L->xs_m;
  for (int64_t p = 0; p * mr < nt; p++) {
    kn_wgn_tile tl[KN_SGEMM_MR_MAX];
    int rows = (int)min64(mr, nt - p * mr);
    for (int q = 0; q < rows; q++) {
      int64_t tile = t0 + p * mr + q, b = tile / tpi, r = tile % tpi;
      tl[q] = (kn_wgn_tile){.xb = b * g->h * g->w * c, .sb = b * c,
                            .iy0 = r / L->tw * 4 - g->pt, .ix0 = r % L->tw * 4 - g->pl};
    }
    j->uk->input(j->x, j->s, g->h, g->w, c, tl, rows, v + p * mr * c, xs_v);
  }
  kn_sgemm_args a = gemm_args(g, L, nt, m1 - m0);
  for (int xi = 0; xi < NPOS; xi++) {
    a.a_packed = v + xi * xs_v;
    a.b_packed = j->u + xi * j->us + m0 * c; /* m0 is a whole number of panels */
    a.c = mt + xi * xs_m;
    kn_sgemm(j->isa, NULL, &a, gs);
  }
  const kn_epilogue *ep = j->ep;
  const float *bias = ep && ep->bias ? ep->bias + m0 : NULL;
  const float *res = ep ? ep->res : NULL;
  for (int64_t i = 0; i < nt; i++) {
    int64_t tile = t0 + i, b = tile / tpi, r = tile % tpi;
    int64_t oy = r / L->tw * 4, ox = r % L->tw * 4;
    int nrows = (int)min64(4, g->oh - oy), ncols = (int)min64(4, g->ow - ox);
    int64_t off = ((b * g->oh + oy) * g->ow + ox) * ldy + m0;
    const float *rk = res && !(j->act_after && !j->epi.res_first) ? res + off : NULL;
    j->uk->output(mt + i * L->ldm, xs_m, m1 - m0, bias, j->y + off, rk, g->ow * ldy, ldy, nrows,
                  ncols, &j->epi);
    if (!j->act_after) continue;
    for (int ry = 0; ry < nrows; ry++)
      for (int rx = 0; rx < ncols; rx++) {
        int64_t po = off + (ry * g->ow + rx) * ldy;
        float *p = j->y + po;
        kn_f32_act(j->isa, &ep->act, p, p, m1 - m0);
        if (res && !j->epi.res_first)
          for (int64_t q = 0; q < m1 - m0; q++) p[q] += res[po + q];
      }
  }
}

/* No input channels: every output is the epilogue of its bias. */
static void no_channels(kn_isa isa, const kn_conv2d *g, const kn_epilogue *ep, float *y) {
  int64_t np = g->n * g->oh * g->ow, m = g->m, ldy = kn_conv2d_ldy(g);
  const float *res = ep ? ep->res : NULL;
  bool first = ep && ep->res_first;
  for (int64_t p = 0; p < np; p++) {
    float *yp = y + p * ldy;
    for (int64_t o = 0; o < m; o++)
      yp[o] = (ep && ep->bias ? ep->bias[o] : 0.0f) + (res && first ? res[p * m + o] : 0);
    if (ep) kn_f32_act(isa, &ep->act, yp, yp, m);
    if (res && !first)
      for (int64_t o = 0; o < m; o++) yp[o] += res[p * m + o];
  }
}

void kn_f32_conv_winograd_nhwc(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                               const float *s, const float *wpacked, const kn_epilogue *ep,
                               float *y, void *scratch, const kn_caches *caches) {
  KN_ASSERT(kn_f32_conv_winograd_nhwc_fits(g));
  if (g->n * g->m * g->oh * g->ow == 0) return;
  KN_ASSERT(!(ep && ep->res) || kn_conv2d_ldy(g) == g->m); /* the residual shares y's stride */
  if (g->c == 0) {
    no_channels(isa, g, ep, y);
    return;
  }
  int32_t hdr[HEADER];
  memcpy(hdr, wpacked, sizeof hdr);
  KN_ASSERT(hdr[0] == kn_sgemm_nr(isa) && hdr[1] == (int32_t)isa);
  KN_ASSERT(kn_wgn_ukernels_for(isa)->mr == kn_sgemm_mr(isa) && kn_sgemm_mr(isa) <= KN_SGEMM_MR_MAX);
  int32_t threads = kn_pool_threads(pool);
  KN_ASSERT(threads >= 1);
  wgn_job j = {.isa = isa, .uk = kn_wgn_ukernels_for(isa), .g = g, .x = x, .s = s, .u = wpacked + HEADER,
               .ep = ep, .y = y, .buf = scratch, .nr = kn_sgemm_nr(isa),
               .us = u_floats(isa, g)};
  layout(isa, g, threads, caches, &j.L);
  kn_act act = ep ? ep->act.act : KN_ACT_NONE;
  j.epi.clamp = act == KN_ACT_RELU || act == KN_ACT_CLIP;
  j.epi.lo = act == KN_ACT_RELU ? 0.0f : act == KN_ACT_CLIP ? ep->act.lo : 0.0f;
  j.epi.hi = act == KN_ACT_RELU ? INFINITY : act == KN_ACT_CLIP ? ep->act.hi : 0.0f;
  j.epi.res_first = ep && ep->res_first;
  j.act_after = act != KN_ACT_NONE && !j.epi.clamp;
  double flops = 2.0 * NPOS * (double)(j.L.tiles * g->c * g->m);
  double bytes = 4.0 * (double)(g->n * (g->h * g->w * g->c + g->oh * g->ow * g->m)) +
                 4.0 * NPOS * (double)(g->c * g->m);
  kn_pool_for(kn_pool_worth(pool, flops, bytes), j.L.nblocks * j.L.groups, wgn_task, &j);
}
