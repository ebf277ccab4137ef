/*
 * conv_igemm_nhwc in int8, bf16 and fp16 (conv-lowp.h): gathered rows of
 * converted activations times slabs of packed weights, on the qgemm and
 * hgemm drivers.  Portable C: the products run in those drivers' per-ISA
 * micro-kernels, the conversions in kn_qgemm_quantize's (int8) or in
 * loops gcc vectorises (bf16).
 *
 * Why gathered rows and not the fp32 kernel's pointer tables: the int8
 * and bf16 micro-kernels take a packed A (k in groups of 4 bytes or pairs
 * of halves per row), which a pointer per (pixel, tap) cannot give
 * without a micro-kernel of their own.  The gather is a copy of K values
 * per pixel (1 or 2 bytes each) against K x m multiply-adds, so it costs
 * about 1/m of the products; the GEMM's own packing of those rows another
 * such copy.
 */
#include "kernels/conv/conv-lowp.h"

#include <stdio.h>
#include <string.h>

#include "kernels/hgemm/hgemm.h"

/* Output channels per slab at most (see conv-lowp.h): wide, since each
 * slab's GEMM packs (and converts) its A rows again; narrow enough that a
 * layer with few pixels (ResNet-50's 7x7 maps, 512 and 2048 channels)
 * still has tasks for two threads. */
#define SLAB_MAX 512
/* Tasks a layer is cut into at least, where its pixels allow: enough for
 * the pool to balance two or four threads by whole tasks. */
#define MIN_TASKS 8

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return cdiv(a, b) * b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

enum { MODE_DIRECT, MODE_DIRECT_CONV, MODE_ROWS };

typedef struct lplan {
  int64_t cg, mg, taps, k;
  int64_t nr, sw, nslabs;  /* slab width (whole panels), slabs per group */
  size_t slab_bytes;       /* one packed B block, 64-aligned */
  int mode;
  bool convert;            /* the input is converted whole into scratch */
  bool gconv;              /* the gather converts fp32 input values itself */
  size_t esize;            /* bytes of a converted / gathered A value */
  int64_t np, chunk, nchunks;
  size_t xc_bytes, rows_bytes, gemm_bytes, thread_bytes;
} lplan;

static bool is_int8(const kn_conv_lowp *v) { return v->type == KN_CONV_LOWP_INT8; }

static kn_hgemm_type htype(const kn_conv_lowp *v) {
  return v->type == KN_CONV_LOWP_BF16 ? KN_HGEMM_BF16 : KN_HGEMM_F16;
}

static size_t elem_size(const kn_conv_lowp *v) {
  return v->type == KN_CONV_LOWP_INT8 ? 1 : v->type == KN_CONV_LOWP_F16W ? 4 : 2;
}

static bool pointwise(const kn_conv2d *g) {
  return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
         g->oh == g->h && g->ow == g->w;
}

/* The slab cut and block size of one group's weights. */
static void slab_geom(const kn_conv_lowp *v, const kn_conv2d *g, lplan *p) {
  p->cg = g->c / g->group;
  p->mg = g->m / g->group;
  p->taps = g->kh * g->kw;
  p->k = p->taps * p->cg;
  p->nr = is_int8(v) ? kn_qgemm_nr(v->qimpl) : kn_hgemm_nr(v->isa);
  p->nslabs = cdiv(max64(p->mg, 1), SLAB_MAX);
  p->sw = round_up(cdiv(max64(p->mg, 1), p->nslabs), p->nr);
  p->slab_bytes = align64(is_int8(v) ? kn_qgemm_pack_b_size(v->qimpl, p->k, p->sw)
                                     : kn_hgemm_pack_b_size(v->isa, htype(v), p->k, p->sw) *
                                           sizeof(uint16_t));
}

/* Rows a chunk is a multiple of: two register tiles of the kernels
 * (14 rows on AVX-512, 5 or 6 on AVX2). */
static int64_t row_quantum(const kn_conv_lowp *v) {
  int64_t mr = is_int8(v) ? kn_qgemm_mr(v->qimpl) : v->isa == KN_ISA_AVX512 ? 14 : 6;
  return 2 * mr;
}

/* The arguments of one task's GEMM (pointers left to the task). */
static kn_qgemm_args qargs(const kn_conv_lowp *v, const lplan *p, int64_t rows, int64_t n,
                           const kn_qgemm_blocking *bl) {
  kn_qgemm_args a = {.m = rows, .n = n, .k = p->k, .a_scale = v->a_scale, .a_zero = v->a_zero,
                     .blocking = bl};
  return a;
}

static kn_hgemm_args hargs(const kn_conv_lowp *v, const lplan *p, int64_t rows, int64_t n,
                           const kn_sgemm_blocking *bl) {
  kn_hgemm_args a = {.type = htype(v), .bf16_dot = v->type == KN_CONV_LOWP_BF16 && v->bf16_dot,
                     .m = rows, .n = n, .k = p->k, .alpha = 1.0f, .blocking = bl};
  /* fp32 rows read in place: rounded to fp16 while packed (F16) or used
   * as they are (F16W); BF16 rounds an fp32 A always.  Converted or
   * gathered rows are already of the type (F16W: fp32) */
  bool direct = p->mode == MODE_DIRECT;
  a.a_half = !direct && v->type != KN_CONV_LOWP_F16W;
  a.round_a = direct && v->type == KN_CONV_LOWP_F16;
  return a;
}

static void make_plan(const kn_conv_lowp *v, const kn_conv2d *g, bool scaled,
                      const kn_caches *caches, lplan *p) {
  memset(p, 0, sizeof *p);
  slab_geom(v, g, p);
  kn_caches ca = kn_caches_or_common(caches);
  p->esize = elem_size(v);
  /* a 1x1 conv reads its rows in place, converted by the GEMM's packing,
   * unless there are several slabs (each would convert them again) or a
   * scale: then they are converted once, first */
  bool pw = pointwise(g);
  p->mode = pw ? (scaled || p->nslabs > 1 ? MODE_DIRECT_CONV : MODE_DIRECT) : MODE_ROWS;
  /* F16W without a scale gathers the fp32 input itself; the others
   * gather converted values, converted whole first where windows read an
   * input pixel more than once on average (a 3x3, a stem), and while
   * gathering where they read it once or less (a strided 1x1 reads a
   * quarter of its input: converting all of it cost ResNet-50's
   * downsample layers a fifth of their time) */
  p->convert = p->mode != MODE_DIRECT && (scaled || v->type != KN_CONV_LOWP_F16W);
  if (p->convert && p->mode == MODE_ROWS && !scaled &&
      p->taps * g->oh * g->ow <= g->h * g->w) {
    p->convert = false;
    p->gconv = true;
  }
  p->np = g->n * g->oh * g->ow;
  /* Pixels per chunk: its gathered rows in half of the L2, at least
   * MIN_TASKS tasks where there are pixels for them, whole pairs of
   * register tiles, equal chunks. */
  int64_t q = row_quantum(v);
  int64_t row_bytes = p->k * (int64_t)(p->mode == MODE_ROWS ? p->esize : sizeof(float));
  int64_t chunk = (int64_t)(ca.l2 / 2) / max64(row_bytes, 1);
  int64_t want = cdiv(MIN_TASKS, g->group * p->nslabs);
  chunk = min64(chunk, cdiv(p->np, want));
  chunk = max64(q, chunk / q * q);
  p->nchunks = cdiv(max64(p->np, 1), chunk);
  p->chunk = min64(round_up(cdiv(max64(p->np, 1), p->nchunks), q), round_up(max64(p->np, 1), q));
  p->nchunks = cdiv(max64(p->np, 1), p->chunk);
  p->xc_bytes = p->convert ? align64((size_t)(g->n * g->h * g->w * g->c) * p->esize) : 0;
  p->rows_bytes = p->mode == MODE_ROWS ? align64((size_t)(p->chunk * p->k) * p->esize) : 0;
  /* the GEMM's A buffer grows with the rows, but a chunk of one row panel
   * (the last one may be) takes the whole depth in one pass, and one row
   * may be read in place: the largest of the three cases */
  const int64_t cases[3] = {1, min64(2, p->chunk), p->chunk};
  for (int ci = 0; ci < 3; ci++) {
    int64_t rows = cases[ci];
    size_t bytes;
    if (is_int8(v)) {
      kn_qgemm_blocking bl = kn_qgemm_blocking_of(v->qimpl, &ca);
      kn_qgemm_args a = qargs(v, p, rows, p->sw, &bl);
      if (p->mode == MODE_DIRECT) a.a_f32 = (const float *)p;
      else a.a = (const uint8_t *)p;
      bytes = kn_qgemm_scratch_size(v->qimpl, &a, 1);
    } else {
      kn_sgemm_blocking bl = kn_hgemm_blocking_of(v->isa, &ca);
      kn_hgemm_args a = hargs(v, p, rows, p->sw, &bl);
      bytes = kn_hgemm_scratch_size(v->isa, &a, 1);
    }
    p->gemm_bytes = align64(bytes) > p->gemm_bytes ? align64(bytes) : p->gemm_bytes;
  }
  p->thread_bytes = p->rows_bytes + p->gemm_bytes;
}

size_t kn_conv_nhwc_lowp_pack_size(const kn_conv_lowp *v, const kn_conv2d *g) {
  lplan p;
  memset(&p, 0, sizeof p);
  slab_geom(v, g, &p);
  return (size_t)(g->group * p.nslabs) * p.slab_bytes;
}

void kn_conv_nhwc_lowp_pack(const kn_conv_lowp *v, const kn_conv2d *g, const float *w_tm,
                            const int8_t *q_tm, const float *w_scale, void *dst) {
  lplan p;
  memset(&p, 0, sizeof p);
  slab_geom(v, g, &p);
  memset(dst, 0, kn_conv_nhwc_lowp_pack_size(v, g));
  for (int64_t gi = 0; gi < g->group; gi++)
    for (int64_t si = 0; si < p.nslabs; si++) {
      int64_t col = gi * p.mg + si * p.sw, n = min64(p.sw, p.mg - si * p.sw);
      void *d = (char *)dst + (size_t)(gi * p.nslabs + si) * p.slab_bytes;
      if (n <= 0) continue;
      if (is_int8(v))
        kn_qgemm_pack_b(v->qimpl, p.k, n, q_tm + col * p.k, p.k, true, w_scale + col, d);
      else
        kn_hgemm_pack_b(v->isa, htype(v), p.k, n, w_tm + col * p.k, p.k, true, d);
    }
}

size_t kn_conv_nhwc_lowp_scratch(const kn_conv_lowp *v, const kn_conv2d *g, int32_t threads,
                                 bool scaled, const kn_caches *caches) {
  lplan p;
  make_plan(v, g, scaled, caches, &p);
  return p.xc_bytes + (size_t)(threads > 0 ? threads : 1) * p.thread_bytes;
}

void kn_conv_nhwc_lowp_tiling(const kn_conv_lowp *v, const kn_conv2d *g,
                              const kn_caches *caches, char *buf, size_t len) {
  static const char *const names[KN_CONV_LOWP_TYPE_COUNT] = {"int8", "bf16", "fp16", "fp16w"};
  lplan p;
  make_plan(v, g, false, caches, &p);
  snprintf(buf, len, "%s %lldpx slab %lldc%s", names[v->type], (long long)p.chunk,
           (long long)p.sw, p.mode == MODE_ROWS ? " rows" : "");
}

/* ---- conversions ---------------------------------------------------------------- */

/* kn_f32_to_bf16 without a branch, so that the loop vectorises: NaN
 * quietened, else round to nearest even (the bits hgemm's packing gives
 * an fp32 A) */
static inline uint16_t to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1)) >> 16, q = (x >> 16) | 0x40;
  return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? q : r);
}

/* n values of x (times sc when not NULL) converted into dst. */
#define CONV_CHUNK 256
static void convert_run(const kn_conv_lowp *v, const float *x, const float *sc, int64_t n,
                        void *dst) {
  float t[CONV_CHUNK];
  for (int64_t i0 = 0; i0 < n; i0 += CONV_CHUNK) {
    int64_t cnt = min64(CONV_CHUNK, n - i0);
    const float *src = x + i0;
    if (sc) {
      for (int64_t i = 0; i < cnt; i++) t[i] = x[i0 + i] * sc[i0 + i];
      src = t;
    }
    switch (v->type) {
    case KN_CONV_LOWP_INT8:
      kn_qgemm_quantize(v->qimpl, 1, cnt, src, cnt, v->a_scale, v->a_zero, (uint8_t *)dst + i0,
                        cnt);
      break;
    case KN_CONV_LOWP_BF16: {
      uint16_t *d = (uint16_t *)dst + i0;
      for (int64_t i = 0; i < cnt; i++) d[i] = to_bf16(src[i]);
      break;
    }
    case KN_CONV_LOWP_F16: {
      uint16_t *d = (uint16_t *)dst + i0;
      for (int64_t i = 0; i < cnt; i++) d[i] = kn_f32_to_f16(src[i]);
      break;
    }
    default: memcpy((float *)dst + i0, src, (size_t)cnt * sizeof(float)); break;
    }
  }
}

/* ---- driver ----------------------------------------------------------------------- */

typedef struct ljob {
  const kn_conv_lowp *v;
  const kn_conv2d *g;
  lplan p;
  const float *x, *s;
  const char *xc; /* converted input, or x itself (F16W unscaled) */
  const char *wp;
  const kn_epilogue *ep;
  float *y;
  char *thread_scratch;
  kn_qgemm_blocking qb;
  kn_sgemm_blocking hb;
} ljob;

#define CONVERT_PIXELS 64

static void convert_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const ljob *j = arg;
  const kn_conv2d *g = j->g;
  int64_t hw = g->h * g->w, total = g->n * hw, c = g->c;
  int64_t p1 = min64(total, (task + 1) * CONVERT_PIXELS);
  if (!j->s) { /* the task's pixels are one run of values: one call, not one per pixel
                  (a 3-channel stem's 150528 values took 12% of its time in calls) */
    int64_t px0 = task * CONVERT_PIXELS;
    convert_run(j->v, j->x + px0 * c, NULL, (p1 - px0) * c,
                (char *)j->xc + (size_t)(px0 * c) * j->p.esize);
    return;
  }
  for (int64_t px = task * CONVERT_PIXELS; px < p1; px++)
    convert_run(j->v, j->x + px * c, j->s ? j->s + px / hw * c : NULL, c,
                (char *)j->xc + (size_t)(px * c) * j->p.esize);
}

/* memcpy for the short runs of a gather (a stem's 7 x 3 bytes, a tap's
 * channels): two overlapping fixed-size moves instead of a call, which
 * cost more than the copy itself below 64 bytes. */
static inline void copy_run(char *restrict d, const char *restrict s, size_t n) {
  if (n > 64) {
    memcpy(d, s, n);
  } else if (n >= 32) {
    memcpy(d, s, 32);
    memcpy(d + n - 32, s + n - 32, 32);
  } else if (n >= 16) {
    memcpy(d, s, 16);
    memcpy(d + n - 16, s + n - 16, 16);
  } else if (n >= 8) {
    memcpy(d, s, 8);
    memcpy(d + n - 8, s + n - 8, 8);
  } else {
    for (size_t i = 0; i < n; i++) d[i] = s[i];
  }
}

/* Fill n values of the A row with the real zero. */
static inline void pad_fill(const ljob *j, char *d, int64_t n) {
  memset(d, is_int8(j->v) ? j->v->a_zero : 0, (size_t)n * j->p.esize);
}

/* n values from src into the A row at d: copied, or converted from fp32
 * when the gather converts (src then points at floats). */
static inline void gather_run(const ljob *j, char *d, const char *src, int64_t n) {
  if (j->p.gconv) convert_run(j->v, (const float *)src, NULL, n, d);
  else copy_run(d, src, (size_t)n * j->p.esize);
}

/* The gathered rows of pixels [p0, p1) of group gi: row r holds, for
 * each tap (ky, kx) and channel ci of the group, the converted input
 * under it (the real zero outside the image), k values. */
static void gather_rows(const ljob *j, int64_t gi, int64_t p0, int64_t p1, char *rows) {
  const kn_conv2d *g = j->g;
  const lplan *p = &j->p;
  const size_t es = p->esize;
  /* bytes of a source value: fp32 when the gather converts */
  const size_t ses = p->gconv ? sizeof(float) : es;
  const int64_t c = g->c, cg = p->cg, k = p->k, ohw = g->oh * g->ow;
  const bool row_copy = g->group == 1 && g->dw == 1;
  for (int64_t q = p0; q < p1; q++) {
    int64_t b = q / ohw, oy = q % ohw / g->ow, ox = q % g->ow;
    int64_t iy0 = oy * g->sh - g->pt, ix0 = ox * g->sw - g->pl;
    char *d = rows + (size_t)((q - p0) * k) * es;
    for (int64_t ky = 0; ky < g->kh; ky++, d += (size_t)(g->kw * cg) * es) {
      int64_t iy = iy0 + ky * g->dh;
      if (iy < 0 || iy >= g->h) {
        pad_fill(j, d, g->kw * cg);
        continue;
      }
      const char *row = j->xc + (size_t)((b * g->h + iy) * g->w * c + gi * cg) * ses;
      if (row_copy && ix0 >= 0 && ix0 + g->kw <= g->w) {
        gather_run(j, d, row + (size_t)(ix0 * c) * ses, g->kw * c);
        continue;
      }
      for (int64_t kx = 0; kx < g->kw; kx++) {
        int64_t ix = ix0 + kx * g->dw;
        char *dt = d + (size_t)(kx * cg) * es;
        if (ix < 0 || ix >= g->w) pad_fill(j, dt, cg);
        else gather_run(j, dt, row + (size_t)(ix * c) * ses, cg);
      }
    }
  }
}

static void conv_task(void *arg, int64_t task, int32_t thread) {
  const ljob *j = arg;
  const kn_conv_lowp *v = j->v;
  const kn_conv2d *g = j->g;
  const lplan *p = &j->p;
  int64_t si = task % p->nslabs, ci = task / p->nslabs % p->nchunks;
  int64_t gi = task / p->nslabs / p->nchunks;
  int64_t p0 = ci * p->chunk, p1 = min64(p0 + p->chunk, p->np);
  int64_t col = gi * p->mg + si * p->sw, n = min64(p->sw, p->mg - si * p->sw);
  if (p0 >= p1 || n <= 0) return;
  char *ts = j->thread_scratch + (size_t)thread * p->thread_bytes;
  char *rows = ts, *gs = ts + p->rows_bytes;
  const void *a;
  int64_t lda;
  if (p->mode == MODE_ROWS) {
    gather_rows(j, gi, p0, p1, rows);
    a = rows;
    lda = p->k;
  } else if (p->mode == MODE_DIRECT_CONV) {
    a = j->xc + (size_t)(p0 * g->c + gi * p->cg) * p->esize;
    lda = g->c;
  } else {
    a = j->x + p0 * g->c + gi * p->cg;
    lda = g->c;
  }
  int64_t ldy = kn_conv2d_ldy(g);
  kn_epilogue e = {0}, *ep = NULL;
  if (j->ep) {
    e = *j->ep;
    e.bias = e.bias ? e.bias + col : NULL;
    e.bias_per_row = false;
    e.res = e.res ? e.res + p0 * g->m + col : NULL;
    e.ldr = g->m;
    ep = &e;
  }
  float *c = j->y + p0 * ldy + col;
  const void *b = j->wp + (size_t)(gi * p->nslabs + si) * p->slab_bytes;
  if (is_int8(v)) {
    kn_qgemm_args qa = qargs(v, p, p1 - p0, n, &j->qb);
    if (p->mode == MODE_DIRECT) qa.a_f32 = a;
    else qa.a = a;
    qa.lda = lda;
    qa.b_packed = b;
    qa.c = c;
    qa.ldc = ldy;
    kn_qgemm(v->qimpl, NULL, &qa, gs);
    /* the epilogue once over the task's block (in L2), not per register
     * tile: kn_qgemm applies it with a call per 14 x 32 tile after the
     * store, which cost 12% of ResNet-50's int8 time */
    if (ep) kn_f32_epilogue(kn_qgemm_impl_isa(v->qimpl), ep, c, ldy, 0, p1 - p0, 0, n);
  } else {
    kn_hgemm_args ha = hargs(v, p, p1 - p0, n, &j->hb);
    ha.a = a;
    ha.lda = lda;
    ha.b_packed = b;
    ha.c = c;
    ha.ldc = ldy;
    ha.ep = ep;
    kn_hgemm(v->isa, NULL, &ha, gs);
  }
}

void kn_conv_nhwc_lowp(const kn_conv_lowp *v, kn_pool *pool, const kn_conv2d *g, const float *x,
                       const float *s, const void *wpacked, const kn_epilogue *ep, float *y,
                       void *scratch, const kn_caches *caches) {
  if (g->n * g->m * g->oh * g->ow == 0) return;
  KN_ASSERT(!(ep && ep->res) || kn_conv2d_ldy(g) == g->m); /* the residual shares y's stride */
  KN_ASSERT(!is_int8(v) || (v->a_zero >= 0 && v->a_zero <= 255));
  ljob j = {.v = v, .g = g, .x = x, .s = s, .wp = wpacked, .ep = ep, .y = y};
  make_plan(v, g, s != NULL, caches, &j.p);
  KN_ASSERT(j.p.k <= KN_QGEMM_K_MAX || !is_int8(v));
  kn_caches ca = kn_caches_or_common(caches);
  j.qb = kn_qgemm_blocking_of(v->qimpl, &ca);
  j.hb = kn_hgemm_blocking_of(v->isa, &ca);
  char *sp = scratch;
  j.xc = j.p.convert ? sp : (const char *)x;
  sp += j.p.xc_bytes;
  j.thread_scratch = sp;
  double xb = 4.0 * (double)(g->n * g->h * g->w * g->c);
  if (j.p.convert)
    kn_pool_for(kn_pool_worth(pool, 0, xb * 1.5), cdiv(g->n * g->h * g->w, CONVERT_PIXELS),
                convert_task, &j);
  double flops = 2.0 * (double)j.p.np * (double)g->m * (double)j.p.k;
  double yb = 4.0 * (double)(j.p.np * g->m);
  kn_pool_for(kn_pool_worth(pool, flops, xb + yb), g->group * j.p.nchunks * j.p.nslabs, conv_task,
              &j);
}
