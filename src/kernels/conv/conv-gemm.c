/*
 * conv_gemm: convolution as one packed GEMM per (image, group),
 *   C [m/group, oh*ow] = A [m/group, c/group*kh*kw] x B [c/group*kh*kw, oh*ow]
 * with A the group's weights (prepacked once) and C the output planes.
 *
 * B is never materialised.  For a 1x1, stride-1, unpadded kernel it is the
 * input image itself (rows = channels, ldb = h*w).  Otherwise the GEMM asks
 * for B one packed panel at a time (NR output positions x kc rows of the
 * im2col matrix, kernels/gemm/gemm.h) and im2col_panel writes it straight
 * from the image: the columns of a panel are split into runs that lie in
 * one output row, and each (channel, ky, kx) row of the panel is then a few
 * contiguous (stride 1) or strided copies with zeros where the window
 * leaves the image.  The GEMM packs a panel once per (kc x nc) block and
 * reuses it for all output channels, so the copy costs about 1/m of the
 * multiply-adds (oneDNN's and MLAS's NCHW convolutions make the same trade
 * with an im2col tile; here the tile is the GEMM's own packed panel).
 *
 * A 3-D convolution (kn_conv2d's depth fields) is the same GEMM over
 * output positions (oz, oy, ox) with taps (kz, ky, kx); a 1-D one is a 2-D
 * one with h = 1.
 *
 * The GEMM's cache blocking comes from the caller's capacities (kn_caches,
 * kn_sgemm_blocking_of).
 *
 * Threads: one GEMM at a time threaded over its output tiles, or, when
 * there are enough (image, group) pairs, one whole GEMM per task.  The
 * GEMM's results do not depend on its thread split, so neither do ours.
 */
#include "kernels/conv/conv.h"
#include "kernels/gemm/gemm.h"

/* Longest panel the run table below holds (NR of every ISA is <= 64). */
#define MAX_NR 64

static int64_t kdim_of(const kn_conv2d *g) {
  return g->c / g->group * kn_conv2d_depth(g).kd * g->kh * g->kw;
}

static bool pointwise(const kn_conv2d *g) {
  kn_conv_depth z = kn_conv2d_depth(g);
  return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
         g->oh == g->h && g->ow == g->w && z.kd == 1 && z.sd == 1 && z.pf == 0 && z.od == z.d;
}

size_t kn_f32_conv_gemm_pack_size(kn_isa isa, const kn_conv2d *g) {
  return (size_t)g->group * kn_sgemm_pack_a_size(isa, g->m / g->group, kdim_of(g));
}

void kn_f32_conv_gemm_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst) {
  int64_t mg = g->m / g->group, kd = kdim_of(g);
  size_t per = kn_sgemm_pack_a_size(isa, mg, kd);
  for (int64_t gi = 0; gi < g->group; gi++)
    kn_sgemm_pack_a(isa, mg, kd, w + gi * mg * kd, kd, false, dst + (size_t)gi * per);
}

/* ---- implicit im2col ------------------------------------------------------ */

typedef struct im2col {
  const kn_conv2d *g;
  const float *x; /* the group's c/group input planes of one image */
  int64_t nr;
} im2col;

/* Entries of the per-panel (tap, run) table below: 9 taps x 32 runs, a
 * 3x3x3 kernel's 27 taps x 32 runs, or a 7x7 stem's 49 taps x 5 runs;
 * larger kernels on tiny images take the slow path. */
#define MAX_TAB 1024

/* Where row (channel, kz, ky, kx) of run r reads, for one tap: the
 * columns [lo, hi) of the run that fall inside the image (the rest are
 * zeros) and the offset in the channel's plane of column lo's input. */
typedef struct tap_run {
  int32_t off;
  int16_t lo, hi;
} tap_run;

/* One (channel, kz, ky, kx) row of a panel from its runs' table entries. */
static inline void panel_row(float *restrict d, const float *restrict plane,
                             const tap_run *t, int32_t nruns, const int64_t *r_col,
                             const int64_t *r_len, int64_t sw) {
  for (int32_t r = 0; r < nruns; r++) {
    float *restrict dr = d + r_col[r];
    int64_t len = r_len[r], lo = t[r].lo, hi = t[r].hi;
    const float *src = plane + t[r].off;
    for (int64_t j = 0; j < lo; j++) dr[j] = 0.0f;
    if (sw == 1) memcpy(dr + lo, src, (size_t)(hi - lo) * sizeof(float));
    else
      for (int64_t j = lo; j < hi; j++) dr[j] = src[(j - lo) * sw];
    for (int64_t j = hi; j < len; j++) dr[j] = 0.0f;
  }
}

/* Where tap (kz, ky, kx) of run r starts and which of its columns are in
 * the input: the run's output row is (oz, oy), its first column ox. */
static tap_run tap_of(const kn_conv2d *g, const kn_conv_depth *z, int64_t oz, int64_t oy,
                      int64_t ox, int64_t len, int64_t kz, int64_t ky, int64_t kx) {
  int64_t sw = g->sw, w = g->w;
  int64_t iz = oz * z->sd - z->pf + kz * z->dd, iy = oy * g->sh - g->pt + ky * g->dh;
  int64_t start = ox * sw - g->pl + kx * g->dw; /* input column of the run's first */
  int64_t lo = start >= 0 ? 0 : (-start + sw - 1) / sw;
  int64_t hi = start >= w ? 0 : (w - 1 - start) / sw + 1;
  if (hi > len) hi = len;
  if (lo > hi) lo = hi;
  if (iy < 0 || iy >= g->h || iz < 0 || iz >= z->d) lo = hi = 0;
  tap_run e = {.off = 0, .lo = (int16_t)lo, .hi = (int16_t)hi};
  if (lo < hi) e.off = (int32_t)((iz * g->h + iy) * w + start + lo * sw);
  return e;
}

static void im2col_panel(void *arg, int64_t k0, int64_t kc, int64_t n0, int64_t ncols,
                         float *dst) {
  const im2col *a = arg;
  const kn_conv2d *g = a->g;
  kn_conv_depth z = kn_conv2d_depth(g);
  int64_t nr = a->nr, ow = g->ow, sw = g->sw;
  KN_ASSERT(nr <= MAX_NR && ncols <= nr);
  /* runs of columns within one output row: (oz, oy, first ox, length, column) */
  int64_t r_oz[MAX_NR], r_oy[MAX_NR], r_ox[MAX_NR], r_len[MAX_NR], r_col[MAX_NR];
  int32_t nruns = 0;
  for (int64_t col = 0, p = n0; col < ncols; nruns++) {
    int64_t row = p / ow, ox = p % ow, len = ow - ox < ncols - col ? ow - ox : ncols - col;
    r_oz[nruns] = row / g->oh;
    r_oy[nruns] = row % g->oh;
    r_ox[nruns] = ox;
    r_len[nruns] = len;
    r_col[nruns] = col;
    col += len;
    p += len;
  }
  int64_t khw = g->kh * g->kw, ksz = z.kd * khw, plane = z.d * g->h * g->w;
  /* The bounds of a (tap, run) do not depend on the channel: work them
   * out once per panel (the divisions), not once per row of it.  Offsets
   * must fit the table's int32 (else each row works its own out). */
  tap_run tab[MAX_TAB];
  bool tabbed = ksz * nruns <= MAX_TAB && plane <= INT32_MAX;
  if (tabbed)
    for (int64_t t = 0; t < ksz; t++)
      for (int32_t r = 0; r < nruns; r++)
        tab[t * nruns + r] = tap_of(g, &z, r_oz[r], r_oy[r], r_ox[r], r_len[r], t / khw,
                                    t % khw / g->kw, t % g->kw);
  int64_t ch = k0 / ksz, tap = k0 % ksz;
  for (int64_t kk = 0; kk < kc; kk++) {
    float *d = dst + kk * nr;
    const float *xp = a->x + ch * plane;
    if (tabbed) {
      panel_row(d, xp, tab + tap * nruns, nruns, r_col, r_len, sw);
    } else {
      int64_t kz = tap / khw, ky = tap % khw / g->kw, kx = tap % g->kw;
      for (int32_t r = 0; r < nruns; r++) {
        tap_run e = tap_of(g, &z, r_oz[r], r_oy[r], r_ox[r], r_len[r], kz, ky, kx);
        /* the offset may exceed int32 here: pass the input itself */
        int64_t iz = r_oz[r] * z.sd - z.pf + kz * z.dd, iy = r_oy[r] * g->sh - g->pt + ky * g->dh;
        int64_t start = r_ox[r] * sw - g->pl + kx * g->dw;
        const float *src = e.lo < e.hi ? xp + (iz * g->h + iy) * g->w + start + e.lo * sw : xp;
        e.off = 0;
        panel_row(d, src, &e, 1, &r_col[r], &r_len[r], sw);
      }
    }
    for (int64_t j = ncols; j < nr; j++) d[j] = 0.0f;
    if (++tap == ksz) {
      tap = 0;
      ch++;
    }
  }
}

/* ---- driver --------------------------------------------------------------- */

typedef struct cg_job {
  kn_isa isa;
  const kn_conv2d *g;
  const float *x, *wp;
  const kn_epilogue *ep;
  float *y;
  char *scratch;
  size_t per_task; /* scratch bytes per thread (parallel over GEMMs) */
  kn_sgemm_blocking bl;
} cg_job;

/* p + o, keeping NULL (the scratch size is computed without tensors). */
static const float *at(const float *p, int64_t o) { return p ? p + o : NULL; }

/* Arguments of the GEMM of image b, group gi; im and e are filled too. */
static void cg_args(const cg_job *j, int64_t b, int64_t gi, im2col *im, kn_epilogue *e,
                    kn_sgemm_args *a) {
  const kn_conv2d *g = j->g;
  int64_t mg = g->m / g->group, cgr = g->c / g->group, kd = kdim_of(g);
  kn_conv_depth z = kn_conv2d_depth(g);
  int64_t hw = z.d * g->h * g->w, ohw = z.od * g->oh * g->ow;
  const float *xg = at(j->x, (b * g->c + gi * cgr) * hw);
  memset(a, 0, sizeof *a);
  a->m = mg;
  a->n = ohw;
  a->k = kd;
  a->alpha = 1.0f;
  a->blocking = &j->bl;
  /* (a stand-in when sizing scratch: the GEMM must see A as prepacked) */
  a->a_packed = j->wp ? j->wp + (size_t)gi * kn_sgemm_pack_a_size(j->isa, mg, kd)
                      : (const float *)g;
  if (pointwise(g)) {
    a->b = xg;
    a->ldb = hw;
  } else {
    im->g = g;
    im->x = xg;
    im->nr = kn_sgemm_nr(j->isa);
    a->b_panel = im2col_panel;
    a->b_panel_arg = im;
  }
  a->c = j->y ? j->y + (b * g->m + gi * mg) * ohw : NULL;
  a->ldc = ohw;
  if (j->ep) {
    *e = *j->ep;
    e->bias = j->ep->bias ? j->ep->bias + gi * mg : NULL;
    e->bias_per_row = true;
    e->res = j->ep->res ? j->ep->res + (b * g->m + gi * mg) * ohw : NULL;
    e->ldr = ohw;
    a->ep = e;
  }
}

/* Whole GEMMs per task when there are enough of them to share evenly. */
static bool per_gemm_tasks(const kn_conv2d *g, int32_t threads) {
  int64_t n = g->n * g->group;
  return threads > 1 && (n % threads == 0 || n >= 4 * threads);
}

size_t kn_f32_conv_gemm_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                                const kn_caches *caches) {
  cg_job j = {.isa = isa, .g = g, .bl = kn_sgemm_blocking_of(isa, caches)};
  im2col im;
  kn_epilogue e;
  kn_sgemm_args a;
  cg_args(&j, 0, 0, &im, &e, &a);
  if (per_gemm_tasks(g, threads))
    return (size_t)threads * ((kn_sgemm_scratch_size(isa, &a, 1) + 63) & ~(size_t)63);
  return kn_sgemm_scratch_size(isa, &a, threads);
}

static void cg_task(void *arg, int64_t task, int32_t thread) {
  const cg_job *j = arg;
  im2col im;
  kn_epilogue e;
  kn_sgemm_args a;
  cg_args(j, task / j->g->group, task % j->g->group, &im, &e, &a);
  kn_sgemm(j->isa, NULL, &a, j->scratch + (size_t)thread * j->per_task);
}

void kn_f32_conv_gemm(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                      const float *wpacked, const kn_epilogue *ep, float *y, void *scratch,
                      const kn_caches *caches) {
  if (g->n * g->m * kn_conv2d_depth(g).od * g->oh * g->ow == 0) return;
  cg_job j = {.isa = isa, .g = g, .x = x, .wp = wpacked, .ep = ep, .y = y, .scratch = scratch,
              .bl = kn_sgemm_blocking_of(isa, caches)};
  int32_t threads = kn_pool_threads(pool);
  if (per_gemm_tasks(g, threads)) {
    im2col im;
    kn_epilogue e;
    kn_sgemm_args a;
    cg_args(&j, 0, 0, &im, &e, &a);
    j.per_task = (kn_sgemm_scratch_size(isa, &a, 1) + 63) & ~(size_t)63;
    kn_pool_for(pool, g->n * g->group, cg_task, &j);
    return;
  }
  for (int64_t b = 0; b < g->n; b++)
    for (int64_t gi = 0; gi < g->group; gi++) {
      im2col im;
      kn_epilogue e;
      kn_sgemm_args a;
      cg_args(&j, b, gi, &im, &e, &a);
      kn_sgemm(isa, pool, &a, scratch);
    }
}

/* ---- conv_gemm_positions -------------------------------------------------
 *
 * The same product with the operands' roles swapped, for outputs of a few
 * positions and many channels (1-D convs on short frames: an STFT of 5
 * frames into 258 channels):
 *
 *   C^T [positions, m/group] = im2col^T [positions, kdim] x W^T [kdim, m/group]
 *
 * conv_gemm's tiles run positions along the micro-kernel's NR columns (32
 * on AVX-512), so 5 positions use 5 of them; here they are the MR rows
 * and the output channels fill the columns.  The im2col matrix (positions
 * x kdim, small by the condition) is written once per (image, group) by
 * the same panel code, W^T is prepacked as the GEMM's B, and C^T is
 * transposed into the NCHW output, then the epilogue runs on it. */

bool kn_f32_conv_gemm_positions_fits(kn_isa isa, const kn_conv2d *g) {
  kn_conv_depth z = kn_conv2d_depth(g);
  int64_t pos = z.od * g->oh * g->ow, mg = g->group > 0 ? g->m / g->group : 0;
  return pos >= 1 && pos * 2 <= kn_sgemm_nr(isa) && pos <= MAX_NR && mg >= 2 * pos;
}

size_t kn_f32_conv_gemm_positions_pack_size(kn_isa isa, const kn_conv2d *g) {
  return (size_t)g->group * kn_sgemm_pack_b_size(isa, kdim_of(g), g->m / g->group);
}

void kn_f32_conv_gemm_positions_pack(kn_isa isa, const kn_conv2d *g, const float *w,
                                     float *dst) {
  int64_t mg = g->m / g->group, kd = kdim_of(g);
  size_t per = kn_sgemm_pack_b_size(isa, kd, mg);
  /* W_g is [mg][kd] = B^T stored n x k */
  for (int64_t gi = 0; gi < g->group; gi++)
    kn_sgemm_pack_b(isa, kd, mg, w + gi * mg * kd, kd, true, dst + (size_t)gi * per);
}

/* Floats of one (image, group)'s im2col^T and C^T, 16-float aligned. */
static size_t pos_floats(const kn_conv2d *g, size_t *a_fl) {
  kn_conv_depth z = kn_conv2d_depth(g);
  int64_t pos = z.od * g->oh * g->ow;
  *a_fl = ((size_t)(kdim_of(g) * pos) + 15) & ~(size_t)15;
  return *a_fl + (((size_t)(pos * (g->m / g->group)) + 15) & ~(size_t)15);
}

static void pos_args(kn_isa isa, const kn_conv2d *g, const float *bp, const float *a, float *ct,
                     const kn_sgemm_blocking *bl, kn_sgemm_args *ga) {
  kn_conv_depth z = kn_conv2d_depth(g);
  memset(ga, 0, sizeof *ga);
  ga->m = z.od * g->oh * g->ow;
  ga->n = g->m / g->group;
  ga->k = kdim_of(g);
  ga->alpha = 1.0f;
  ga->a = a; /* im2col written [kdim][positions]: A stored k x m */
  ga->lda = ga->m;
  ga->trans_a = true;
  ga->b_packed = bp ? bp : (const float *)g; /* (a stand-in when sizing scratch) */
  ga->c = ct;
  ga->ldc = ga->n;
  ga->blocking = bl;
  (void)isa;
}

size_t kn_f32_conv_gemm_positions_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                                          const kn_caches *caches) {
  (void)threads; /* one (image, group) at a time on the calling thread */
  kn_sgemm_blocking bl = kn_sgemm_blocking_of(isa, caches);
  kn_sgemm_args ga;
  pos_args(isa, g, NULL, NULL, NULL, &bl, &ga);
  size_t a_fl;
  return pos_floats(g, &a_fl) * sizeof(float) + kn_sgemm_scratch_size(isa, &ga, 1) + 64;
}

void kn_f32_conv_gemm_positions(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                                const float *wpacked, const kn_epilogue *ep, float *y,
                                void *scratch, const kn_caches *caches) {
  (void)pool; /* a few positions: less work than a thread's hand-off */
  kn_conv_depth z = kn_conv2d_depth(g);
  int64_t pos = z.od * g->oh * g->ow, mg = g->m / g->group, cgr = g->c / g->group;
  int64_t in_sz = z.d * g->h * g->w, kd = kdim_of(g);
  if (g->n * g->m * pos == 0) return;
  size_t a_fl, fl = pos_floats(g, &a_fl);
  float *a = scratch, *ct = a + a_fl;
  void *gs = (char *)scratch + ((fl * sizeof(float) + 63) & ~(size_t)63);
  kn_sgemm_blocking bl = kn_sgemm_blocking_of(isa, caches);
  size_t per = kn_sgemm_pack_b_size(isa, kd, mg);
  for (int64_t b = 0; b < g->n; b++)
    for (int64_t gi = 0; gi < g->group; gi++) {
      im2col im = {.g = g, .x = x + (b * g->c + gi * cgr) * in_sz, .nr = pos};
      im2col_panel(&im, 0, kd, 0, pos, a); /* [kdim][positions] */
      kn_sgemm_args ga;
      pos_args(isa, g, wpacked + (size_t)gi * per, a, ct, &bl, &ga);
      kn_sgemm(isa, NULL, &ga, gs);
      float *yg = y + (b * g->m + gi * mg) * pos;
      for (int64_t p = 0; p < pos; p++)
        for (int64_t j = 0; j < mg; j++) yg[j * pos + p] = ct[p * mg + j];
      if (ep && (ep->bias || ep->res || ep->act.act != KN_ACT_NONE)) {
        kn_epilogue e = *ep;
        e.bias = ep->bias ? ep->bias + gi * mg : NULL;
        e.bias_per_row = true;
        e.res = ep->res ? ep->res + (b * g->m + gi * mg) * pos : NULL;
        e.ldr = pos;
        kn_f32_epilogue(isa, &e, yg, pos, 0, mg, 0, pos);
      }
    }
}
