/*
 * conv_winograd_nhwc and conv_winograd_f23_nhwc in bf16 (conv-lowp.h):
 * Winograd F(4x4, 3x3) as in winograd-nhwc.c, or F(2x2, 3x3), the 36 (16)
 * products M_xi [tiles, m] = V_xi [tiles, c] x
 * U_xi [c, m] on the bf16 kernels (kn_hgemm, vdpbf16ps where the CPU has
 * it) instead of kn_sgemm.  The transforms stay fp32: U = G w G^T is
 * computed in double and rounded to bf16 once, when packed (hgemm's
 * layout, per position); V = B^T d B is computed in fp32 by the same
 * vectorised input transform and written as row-major rows
 * (kn_wgn_ukernels.input_rows), which kn_hgemm rounds to bf16 while it
 * packs them; the products sum in fp32, and the output transform, bias,
 * activation and residual are winograd-nhwc.c's.  So the rounding is that
 * of the transformed operands, not of x and w: the error is about that of
 * a bf16 direct convolution times the transforms' growth (the entries of
 * B^T and G up to 5 and 1/4, of A^T up to 8), an order of magnitude above
 * it for F(4,3) (tests/unit/test_conv_precision.c bounds it).  F(2,3)'s
 * transforms have entries 0, +-1 and +-1/2 only: its error is within about
 * twice a bf16 direct convolution's, for 16 products per 4 outputs (2.25x
 * fewer multiply-adds than direct; F(4,3): 4x).
 *
 * Why: a 3x3 conv in fp32 already runs Winograd's 36 products per 16
 * outputs (2.25x fewer multiply-adds than direct), and bf16 doubles the
 * product rate on AVX512_BF16, so a bf16 direct 3x3 is about as fast as
 * the fp32 Winograd; both together beat either.
 *
 * Blocks of T tiles as winograd-nhwc.c, T chosen from the L2 alone (never
 * from the thread count), with the output channels split into groups of
 * whole panels when there are fewer blocks than threads: each output
 * element is the same GEMM element whatever the thread count.
 */
#include <math.h>
#include <stdio.h>

#include "kernels/conv/conv-lowp.h"
#include "kernels/conv/winograd-nhwc.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm-ukernel.h" /* KN_SGEMM_MR_MAX */
#include "kernels/hgemm/hgemm.h"

/* Positions of the Winograd domain and output tile edge of a variant. */
static int npos(int tile) { return tile == 2 ? 16 : 36; }
static int span(int tile) { return tile + 2; }

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static size_t align64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* uint16 elements of one U_xi, a whole number of cache lines. */
static int64_t u_elems(kn_isa isa, const kn_conv2d *g) {
  return round_up((int64_t)kn_hgemm_pack_b_size(isa, KN_HGEMM_BF16, g->c, g->m), 32);
}

size_t kn_bf16_conv_winograd_nhwc_pack_size(kn_isa isa, int tile, const kn_conv2d *g) {
  return (size_t)(npos(tile) * u_elems(isa, g)) * sizeof(uint16_t);
}

/* F(2,3)'s filter transform G (4 x 3). */
static const double g23[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

void kn_bf16_conv_winograd_nhwc_pack(kn_isa isa, int tile, const kn_conv2d *g, const float *w,
                                     float *temp, void *dst) {
  const double(*G)[3] = tile == 2 ? g23 : kn_winograd_f43_g;
  KN_ASSERT(kn_f32_conv_winograd_nhwc_fits(g) && (tile == 2 || tile == 4));
  int64_t c = g->c, m = g->m, us = u_elems(isa, g);
  const int np = npos(tile), sp = span(tile);
  memset(dst, 0, kn_bf16_conv_winograd_nhwc_pack_size(isa, tile, g));
  for (int xi = 0; xi < np; xi++) {
    int i = xi / sp, j = xi % sp;
    /* U_xi [c][m] in fp32 (the value winograd-nhwc.c computes), then
     * rounded to bf16 into hgemm's packed B */
    for (int64_t o = 0; o < m; o++)
      for (int64_t k = 0; k < c; k++) {
        const float *f = w + (o * c + k) * 9;
        double gf[3];
        for (int b = 0; b < 3; b++)
          gf[b] = G[i][0] * f[b] + G[i][1] * f[3 + b] + G[i][2] * f[6 + b];
        temp[k * m + o] = (float)(gf[0] * G[j][0] + gf[1] * G[j][1] + gf[2] * G[j][2]);
      }
    kn_hgemm_pack_b(isa, KN_HGEMM_BF16, c, m, temp, m, false, (uint16_t *)dst + xi * us);
  }
}

/* ---- run ---------------------------------------------------------------- */

typedef struct bwg_layout {
  int tile, np;
  int64_t th, tw, tiles, t, ldm, nblocks, npanels, groups, nr;
  int64_t xs_v, xs_m;
  kn_sgemm_blocking bl;
  size_t v_bytes, m_bytes, gemm_bytes, thread_bytes;
} bwg_layout;

/* A stride between positions: whole cache lines, an odd number of them
 * (winograd-nhwc.c's skew: the 36 positions of a tile in different sets). */
static int64_t skewed(int64_t floats) { return (((floats + 15) / 16) | 1) * 16; }

static kn_hgemm_args gemm_args(bool dot, const kn_conv2d *g, const bwg_layout *L, int64_t rows,
                               int64_t cols) {
  kn_hgemm_args a = {.type = KN_HGEMM_BF16, .bf16_dot = dot, .m = rows, .n = cols, .k = g->c,
                     .alpha = 1.0f, .lda = g->c, .ldc = L->ldm, .blocking = &L->bl};
  return a;
}

static void layout(kn_isa isa, bool dot, int tile, const kn_conv2d *g, int32_t threads,
                   const kn_caches *caches, bwg_layout *L) {
  memset(L, 0, sizeof *L);
  int64_t mr = kn_sgemm_mr(isa);
  L->tile = tile;
  L->np = npos(tile);
  L->nr = kn_hgemm_nr(isa);
  L->bl = kn_hgemm_blocking_of(isa, caches);
  L->th = ceil_div(g->oh, tile);
  L->tw = ceil_div(g->ow, tile);
  L->tiles = g->n * L->th * L->tw;
  L->ldm = round_up(max64(g->m, 1), 16);
  /* V and M of a block in 1.5 L2, at least 2 row panels (winograd-nhwc.c) */
  int64_t vm = (int64_t)(kn_caches_or_common(caches).l2 / 2 * 3 / sizeof(float) / L->np);
  int64_t t = max64(vm / (max64(g->c, 1) + L->ldm) / mr * mr, 2 * mr);
  L->t = min64(t, round_up(max64(L->tiles, 1), mr));
  L->nblocks = ceil_div(L->tiles, L->t);
  L->npanels = ceil_div(g->m, L->nr);
  L->groups = L->nblocks < threads ? min64(ceil_div(threads, L->nblocks), L->npanels) : 1;
  L->xs_v = skewed(L->t * max64(g->c, 1));
  L->xs_m = skewed(L->t * L->ldm);
  L->v_bytes = (size_t)(L->np * L->xs_v) * sizeof(float);
  L->m_bytes = (size_t)(L->np * L->xs_m) * sizeof(float);
  /* the A buffer grows with the rows; a block of one row panel takes the
   * whole depth in one pass (hgemm.c): the larger of the two */
  for (int64_t rows = 1; rows <= 2; rows++) {
    kn_hgemm_args a = gemm_args(dot, g, L, L->t, g->m), a1 = gemm_args(dot, g, L, rows, g->m);
    size_t s0 = kn_hgemm_scratch_size(isa, &a, 1), s1 = kn_hgemm_scratch_size(isa, &a1, 1);
    L->gemm_bytes = max64((int64_t)L->gemm_bytes, (int64_t)align64(s0 > s1 ? s0 : s1));
  }
  L->thread_bytes = L->v_bytes + L->m_bytes + L->gemm_bytes;
}

size_t kn_bf16_conv_winograd_nhwc_scratch(kn_isa isa, bool bf16_dot, int tile,
                                          const kn_conv2d *g, int32_t threads,
                                          const kn_caches *caches) {
  bwg_layout L;
  if (threads < 1) threads = 1;
  layout(isa, bf16_dot, tile, g, threads, caches, &L);
  return (size_t)threads * L.thread_bytes;
}

void kn_bf16_conv_winograd_nhwc_tiling(kn_isa isa, int tile, const kn_conv2d *g,
                                       const kn_caches *caches, char *buf, size_t len) {
  bwg_layout L;
  layout(isa, true, tile, g, 1, caches, &L);
  snprintf(buf, len, "bf16 F(%d,3) %lld tiles kc %lld mc %lld", tile, (long long)L.t,
           (long long)L.bl.kc, (long long)L.bl.mc);
}

typedef struct bwg_job {
  kn_isa isa;
  bool dot;
  const kn_wgn_ukernels *uk;
  const kn_conv2d *g;
  bwg_layout L;
  const float *x, *s;
  const uint16_t *u;
  int64_t us;
  const kn_epilogue *ep;
  kn_wgn_epi epi;
  bool act_after;
  float *y;
  char *buf;
} bwg_job;

static void bwg_task(void *arg, int64_t task, int32_t thread) {
  const bwg_job *j = arg;
  const kn_conv2d *g = j->g;
  const bwg_layout *L = &j->L;
  int64_t blk = task / L->groups, grp = task % L->groups;
  int64_t t0 = blk * L->t, nt = min64(L->t, L->tiles - t0);
  int64_t m0 = grp * L->npanels / L->groups * L->nr;
  int64_t m1 = min64((grp + 1) * L->npanels / L->groups * L->nr, g->m);
  if (nt <= 0 || m1 <= m0) return;
  char *base = j->buf + (size_t)thread * L->thread_bytes;
  float *v = (float *)base, *mt = (float *)(base + L->v_bytes);
  void *gs = base + L->v_bytes + L->m_bytes;
  int64_t tpi = L->th * L->tw, c = g->c, ldy = kn_conv2d_ldy(g);
  for (int64_t p = 0; p < nt; p += KN_SGEMM_MR_MAX) {
    kn_wgn_tile tl[KN_SGEMM_MR_MAX];
    int rows = (int)min64(KN_SGEMM_MR_MAX, nt - p);
    for (int q = 0; q < rows; q++) {
      int64_t tile = t0 + p + q, b = tile / tpi, r = tile % tpi;
      tl[q] = (kn_wgn_tile){.xb = b * g->h * g->w * c, .sb = b * c,
                            .iy0 = r / L->tw * L->tile - g->pt,
                            .ix0 = r % L->tw * L->tile - g->pl};
    }
    if (L->tile == 2)
      j->uk->input_rows23(j->x, j->s, g->h, g->w, c, tl, rows, v + p * c, L->xs_v, c);
    else
      j->uk->input_rows(j->x, j->s, g->h, g->w, c, tl, rows, v + p * c, L->xs_v, c);
  }
  kn_hgemm_args a = gemm_args(j->dot, g, L, nt, m1 - m0);
  int64_t kp = round_up(c, 2); /* packed depth: panel j at j * NR * kp */
  for (int xi = 0; xi < L->np; xi++) {
    a.a = v + xi * L->xs_v;
    a.b_packed = j->u + xi * j->us + m0 * kp; /* m0: whole panels */
    a.c = mt + xi * L->xs_m;
    kn_hgemm(j->isa, NULL, &a, gs);
  }
  const kn_epilogue *ep = j->ep;
  const float *bias = ep && ep->bias ? ep->bias + m0 : NULL;
  const float *res = ep ? ep->res : NULL;
  for (int64_t i = 0; i < nt; i++) {
    int64_t tile = t0 + i, b = tile / tpi, r = tile % tpi;
    int64_t oy = r / L->tw * L->tile, ox = r % L->tw * L->tile;
    int nrows = (int)min64(L->tile, g->oh - oy), ncols = (int)min64(L->tile, g->ow - ox);
    int64_t off = ((b * g->oh + oy) * g->ow + ox) * ldy + m0;
    const float *rk = res && !(j->act_after && !j->epi.res_first) ? res + off : NULL;
    (L->tile == 2 ? j->uk->output23 : j->uk->output)(mt + i * L->ldm, L->xs_m, m1 - m0, bias,
                                                     j->y + off, rk, g->ow * ldy, ldy, nrows,
                                                     ncols, &j->epi);
    if (!j->act_after) continue;
    for (int ry = 0; ry < nrows; ry++)
      for (int rx = 0; rx < ncols; rx++) {
        int64_t po = off + (ry * g->ow + rx) * ldy;
        float *pp = j->y + po;
        kn_f32_act(j->isa, &ep->act, pp, pp, m1 - m0);
        if (res && !j->epi.res_first)
          for (int64_t q = 0; q < m1 - m0; q++) pp[q] += res[po + q];
      }
  }
}

void kn_bf16_conv_winograd_nhwc(kn_isa isa, bool bf16_dot, int tile, kn_pool *pool,
                                const kn_conv2d *g, const float *x, const float *s,
                                const void *upacked, const kn_epilogue *ep, float *y,
                                void *scratch, const kn_caches *caches) {
  KN_ASSERT(kn_f32_conv_winograd_nhwc_fits(g) && g->c > 0 && (tile == 2 || tile == 4));
  if (g->n * g->m * g->oh * g->ow == 0) return;
  KN_ASSERT(!(ep && ep->res) || kn_conv2d_ldy(g) == g->m); /* the residual shares y's stride */
  int32_t threads = kn_pool_threads(pool);
  bwg_job j = {.isa = isa, .dot = bf16_dot, .uk = kn_wgn_ukernels_for(isa), .g = g, .x = x, .s = s,
               .u = upacked, .us = u_elems(isa, g), .ep = ep, .y = y, .buf = scratch};
  layout(isa, bf16_dot, tile, g, threads, caches, &j.L);
  kn_act act = ep ? ep->act.act : KN_ACT_NONE;
  j.epi.clamp = act == KN_ACT_RELU || act == KN_ACT_CLIP;
  j.epi.lo = act == KN_ACT_CLIP ? ep->act.lo : 0.0f;
  j.epi.hi = act == KN_ACT_RELU ? INFINITY : act == KN_ACT_CLIP ? ep->act.hi : 0.0f;
  j.epi.res_first = ep && ep->res_first;
  j.act_after = act != KN_ACT_NONE && !j.epi.clamp;
  double flops = 2.0 * j.L.np * (double)(j.L.tiles * g->c * g->m);
  double bytes = 4.0 * (double)(g->n * (g->h * g->w * g->c + g->oh * g->ow * g->m)) +
                 2.0 * j.L.np * (double)(g->c * g->m);
  kn_pool_for(kn_pool_worth(pool, flops, bytes), j.L.nblocks * j.L.groups, bwg_task, &j);
}
