/*
 * conv_winograd: 3x3, stride-1, undilated, ungrouped convolution by
 * Winograd's minimal filtering F(4x4, 3x3) (Lavin & Gray, "Fast Algorithms
 * for Convolutional Neural Networks", 2016; the matrices below are theirs):
 *
 *   Y(tile) = A^T [ sum_c (G g_{m,c} G^T) (.) (B^T d_c B) ] A
 *
 * with 6x6 input tiles d overlapping by 2 and 4x4 output tiles.  Per
 * position xi of the 6x6 Winograd domain the channel sum is a GEMM
 *   M_xi [m, tiles] = U_xi [m, c] x V_xi [c, tiles],
 * so a block of tiles costs 36 GEMMs of depth c instead of 9 of the direct
 * method's per output: 36 / (16 * 9) = 1/4 of the multiplies, paid for by
 * the transforms (about 6 + 5 flops per input / output element per
 * channel) and by larger rounding (values are combined with weights up to
 * 8 and 1/4: errors about 10x those of the direct sum).
 *
 * U_xi (the transformed weights) is packed once for the GEMM (kn_sgemm A
 * layout); V_xi is written by the input transform straight in the GEMM's
 * packed-B layout, so the GEMMs pack nothing.  A task is (image, block of
 * nt tiles): input transform of the block, then for blocks of output
 * channels the 36 GEMMs and the output transform (bias added there); the
 * activation and residual run afterwards over whole planes.
 */
#include "kernels/conv/conv.h"
#include "kernels/gemm/gemm.h"

#define NPOS 36

/* B^T (input) and A^T (output) are applied written out in
 * input_transform / output_transform:
 *   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
 *          0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 *   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]  */
static const float G[6][3] = {
    {1.0f / 4, 0, 0},
    {-1.0f / 6, -1.0f / 6, -1.0f / 6},
    {-1.0f / 6, 1.0f / 6, -1.0f / 6},
    {1.0f / 24, 1.0f / 12, 1.0f / 6},
    {1.0f / 24, -1.0f / 12, 1.0f / 6},
    {0, 0, 1},
};
bool kn_f32_conv_winograd_fits(const kn_conv2d *g) {
  return g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
         g->group == 1;
}

/* One U_xi slot; the pack keeps a temporary [m, c] matrix after the 36. */
static size_t slot_floats(kn_isa isa, const kn_conv2d *g) {
  return (kn_sgemm_pack_a_size(isa, g->m, g->c) + 15) / 16 * 16;
}

size_t kn_f32_conv_winograd_pack_size(kn_isa isa, const kn_conv2d *g) {
  return NPOS * slot_floats(isa, g) + (size_t)(g->m * g->c);
}

void kn_f32_conv_winograd_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst) {
  KN_ASSERT(kn_f32_conv_winograd_fits(g));
  size_t slot = slot_floats(isa, g);
  float *tmp = dst + NPOS * slot;
  for (int xi = 0; xi < NPOS; xi++) {
    int r = xi / 6, s = xi % 6;
    for (int64_t i = 0; i < g->m * g->c; i++) {
      const float *k = w + i * 9;
      float u = 0;
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) u += G[r][a] * k[a * 3 + b] * G[s][b];
      tmp[i] = u;
    }
    kn_sgemm_pack_a(isa, g->m, g->c, tmp, g->c, false, dst + (size_t)xi * slot);
  }
}

/* ---- run ---------------------------------------------------------------- */

typedef struct wg_layout {
  int64_t th, tw, tiles; /* tile grid of one image */
  int64_t nt, nblocks;   /* tiles per task, blocks per image */
  int64_t mb;            /* output channels per GEMM round */
  int64_t nr, mr;
  size_t v_floats, m_floats, gemm_bytes, per_thread;
} wg_layout;

static void gemm_args(const kn_conv2d *g, const wg_layout *L, int64_t mcur, int64_t ncnt,
                      const float *a, const float *b, float *c, kn_sgemm_args *args) {
  memset(args, 0, sizeof *args);
  args->m = mcur;
  args->n = ncnt;
  args->k = g->c;
  args->alpha = 1.0f;
  args->a_packed = a;
  args->b_packed = b;
  args->c = c;
  args->ldc = L->nt;
}

static void layout(kn_isa isa, const kn_conv2d *g, int32_t threads, wg_layout *L) {
  (void)threads;
  L->nr = kn_sgemm_nr(isa);
  L->mr = kn_sgemm_mr(isa);
  L->th = (g->oh + 3) / 4;
  L->tw = (g->ow + 3) / 4;
  L->tiles = L->th * L->tw;
  /* V of a block (36 * c * nt floats) should stay within about 512 KiB */
  int64_t nt = ((int64_t)128 << 10) / (NPOS * (g->c > 0 ? g->c : 1));
  nt = nt / L->nr * L->nr;
  if (nt < L->nr) nt = L->nr;
  if (nt > 4 * L->nr) nt = 4 * L->nr;
  int64_t need = (L->tiles + L->nr - 1) / L->nr * L->nr;
  L->nt = nt < need ? nt : need;
  L->nblocks = (L->tiles + L->nt - 1) / L->nt;
  int64_t mb = (64 + L->mr - 1) / L->mr * L->mr;
  L->mb = mb < g->m ? mb : g->m;
  L->v_floats = (size_t)(NPOS * g->c * L->nt);
  L->m_floats = (size_t)(NPOS * L->mb * L->nt);
  kn_sgemm_args a;
  gemm_args(g, L, L->mb, L->nt, NULL, NULL, NULL, &a);
  a.a_packed = a.b_packed = (const float *)L; /* only "prepacked" matters for the size */
  L->gemm_bytes = kn_sgemm_scratch_size(isa, &a, 1);
  size_t bytes = (L->v_floats + L->m_floats) * sizeof(float) + L->gemm_bytes;
  L->per_thread = (bytes + 63) & ~(size_t)63;
}

size_t kn_f32_conv_winograd_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads) {
  wg_layout L;
  layout(isa, g, threads, &L);
  return L.per_thread * (size_t)threads;
}

typedef struct wg_job {
  kn_isa isa;
  const kn_conv2d *g;
  wg_layout L;
  const float *x, *u;
  const kn_epilogue *ep;
  float *y;
  char *scratch;
} wg_job;

/* V_xi for the tiles [t0, t0 + nt) of image plane set x (c planes). */
static void input_transform(const wg_job *j, const float *x, int64_t t0, float *v) {
  const kn_conv2d *g = j->g;
  const wg_layout *L = &j->L;
  int64_t nr = L->nr, c = g->c, vstride = c * L->nt; /* floats per xi */
  for (int64_t tl = 0; tl < L->nt; tl++) {
    int64_t t = t0 + tl, ty = t / L->tw, tx = t % L->tw;
    int64_t iy0 = ty * 4 - g->pt, ix0 = tx * 4 - g->pl;
    bool inside = t < L->tiles && iy0 >= 0 && ix0 >= 0 && iy0 + 6 <= g->h && ix0 + 6 <= g->w;
    float *vt = v + (tl / nr) * c * nr + tl % nr;
    for (int64_t ci = 0; ci < c; ci++) {
      const float *plane = x + ci * g->h * g->w;
      float d[6][6], tmp[6][6];
      if (inside) {
        for (int a = 0; a < 6; a++)
          for (int b = 0; b < 6; b++) d[a][b] = plane[(iy0 + a) * g->w + ix0 + b];
      } else {
        for (int a = 0; a < 6; a++)
          for (int b = 0; b < 6; b++) {
            int64_t iy = iy0 + a, ix = ix0 + b;
            d[a][b] = t < L->tiles && iy >= 0 && iy < g->h && ix >= 0 && ix < g->w
                          ? plane[iy * g->w + ix]
                          : 0.0f;
          }
      }
      /* tmp = B^T d, then V = tmp B (rows of B^T applied on the right) */
      for (int b = 0; b < 6; b++) {
        tmp[0][b] = 4 * d[0][b] - 5 * d[2][b] + d[4][b];
        tmp[1][b] = -4 * (d[1][b] + d[2][b]) + d[3][b] + d[4][b];
        tmp[2][b] = 4 * (d[1][b] - d[2][b]) - d[3][b] + d[4][b];
        tmp[3][b] = -2 * (d[1][b] - d[3][b]) - d[2][b] + d[4][b];
        tmp[4][b] = 2 * (d[1][b] - d[3][b]) - d[2][b] + d[4][b];
        tmp[5][b] = 4 * d[1][b] - 5 * d[3][b] + d[5][b];
      }
      float *vc = vt + ci * nr;
      for (int a = 0; a < 6; a++) {
        const float *r = tmp[a];
        float o[6];
        o[0] = 4 * r[0] - 5 * r[2] + r[4];
        o[1] = -4 * (r[1] + r[2]) + r[3] + r[4];
        o[2] = 4 * (r[1] - r[2]) - r[3] + r[4];
        o[3] = -2 * (r[1] - r[3]) - r[2] + r[4];
        o[4] = 2 * (r[1] - r[3]) - r[2] + r[4];
        o[5] = 4 * r[1] - 5 * r[3] + r[5];
        for (int b = 0; b < 6; b++) vc[(a * 6 + b) * vstride] = o[b];
      }
    }
  }
}

/* Y tiles of output channels [m0, m0 + mcur) from M (36 x [mb, nt]). */
static void output_transform(const wg_job *j, const float *mm, int64_t b, int64_t t0,
                             int64_t ncnt, int64_t m0, int64_t mcur) {
  const kn_conv2d *g = j->g;
  const wg_layout *L = &j->L;
  int64_t mstride = L->mb * L->nt;
  const float *bias = j->ep && j->ep->bias ? j->ep->bias : NULL;
  for (int64_t mo = 0; mo < mcur; mo++) {
    float bv = bias ? bias[m0 + mo] : 0.0f;
    float *yp = j->y + (b * g->m + m0 + mo) * g->oh * g->ow;
    for (int64_t tl = 0; tl < ncnt; tl++) {
      const float *src = mm + mo * L->nt + tl;
      float tmp[4][6];
      for (int c = 0; c < 6; c++) {
        float s0 = src[(0 * 6 + c) * mstride], s1 = src[(1 * 6 + c) * mstride];
        float s2 = src[(2 * 6 + c) * mstride], s3 = src[(3 * 6 + c) * mstride];
        float s4 = src[(4 * 6 + c) * mstride], s5 = src[(5 * 6 + c) * mstride];
        tmp[0][c] = s0 + s1 + s2 + s3 + s4;
        tmp[1][c] = (s1 - s2) + 2 * (s3 - s4);
        tmp[2][c] = (s1 + s2) + 4 * (s3 + s4);
        tmp[3][c] = (s1 - s2) + 8 * (s3 - s4) + s5;
      }
      int64_t t = t0 + tl, oy0 = t / L->tw * 4, ox0 = t % L->tw * 4;
      for (int a = 0; a < 4 && oy0 + a < g->oh; a++) {
        const float *r = tmp[a];
        float o[4] = {r[0] + r[1] + r[2] + r[3] + r[4], (r[1] - r[2]) + 2 * (r[3] - r[4]),
                      (r[1] + r[2]) + 4 * (r[3] + r[4]), (r[1] - r[2]) + 8 * (r[3] - r[4]) + r[5]};
        float *yr = yp + (oy0 + a) * g->ow + ox0;
        int64_t nc = g->ow - ox0 < 4 ? g->ow - ox0 : 4;
        for (int64_t q = 0; q < nc; q++) yr[q] = o[q] + bv;
      }
    }
  }
}

static void wg_task(void *arg, int64_t task, int32_t thread) {
  const wg_job *j = arg;
  const kn_conv2d *g = j->g;
  const wg_layout *L = &j->L;
  int64_t b = task / L->nblocks, t0 = task % L->nblocks * L->nt;
  int64_t ncnt = L->tiles - t0 < L->nt ? L->tiles - t0 : L->nt;
  float *v = (float *)(j->scratch + (size_t)thread * L->per_thread);
  float *mm = v + L->v_floats;
  void *gs = mm + L->m_floats;
  input_transform(j, j->x + b * g->c * g->h * g->w, t0, v);
  size_t slot = slot_floats(j->isa, g);
  for (int64_t m0 = 0; m0 < g->m; m0 += L->mb) {
    int64_t mcur = g->m - m0 < L->mb ? g->m - m0 : L->mb;
    for (int xi = 0; xi < NPOS; xi++) {
      kn_sgemm_args a;
      gemm_args(g, L, mcur, ncnt, j->u + (size_t)xi * slot + (m0 / L->mr) * L->mr * g->c,
                v + (size_t)xi * g->c * L->nt, mm + (size_t)xi * L->mb * L->nt, &a);
      kn_sgemm(j->isa, NULL, &a, gs);
    }
    output_transform(j, mm, b, t0, ncnt, m0, mcur);
  }
}

static void epi_task(void *arg, int64_t plane, int32_t thread) {
  (void)thread;
  const wg_job *j = arg;
  const kn_conv2d *g = j->g;
  int64_t ohw = g->oh * g->ow;
  kn_epilogue e = *j->ep;
  e.bias = NULL;
  e.res = j->ep->res ? j->ep->res + plane * ohw : NULL;
  e.ldr = ohw;
  kn_f32_epilogue(j->isa, &e, j->y + plane * ohw, ohw, 0, 1, 0, ohw);
}

void kn_f32_conv_winograd(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                          const float *wpacked, const kn_epilogue *ep, float *y,
                          void *scratch) {
  KN_ASSERT(kn_f32_conv_winograd_fits(g));
  if (g->n * g->m * g->oh * g->ow == 0) return;
  wg_job j = {.isa = isa, .g = g, .x = x, .u = wpacked, .ep = ep, .y = y, .scratch = scratch};
  layout(isa, g, kn_pool_threads(pool), &j.L);
  if (g->c == 0) { /* no channels: the output is the bias alone */
    for (int64_t p = 0; p < g->n * g->m; p++)
      for (int64_t i = 0; i < g->oh * g->ow; i++)
        y[p * g->oh * g->ow + i] = ep && ep->bias ? ep->bias[p % g->m] : 0.0f;
  } else {
    kn_pool_for(pool, g->n * j.L.nblocks, wg_task, &j);
  }
  if (ep && (ep->act.act != KN_ACT_NONE || ep->res))
    kn_pool_for(pool, g->n * g->m, epi_task, &j);
}
