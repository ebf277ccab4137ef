/*
 * The GEMM driver (driver.h): blocking, packing plan, loop nest, epilogue
 * and threads for every GEMM family, portable C around the families'
 * micro-kernels and packers.
 */
#include "driver.h"

#include <math.h>
#include <string.h>

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
static inline size_t align64(size_t b) { return (b + 63) / 64 * 64; }

/* ---- blocking ---------------------------------------------------------------------- */

kn_sgemm_blocking kn_gemm_driver_blocking(const kn_gemm_block_rule *r, int64_t mr,
                                          int64_t nr, kn_caches caches) {
  /* Unknown sizes (callers with no machine description): the common ones
   * (kernels.h), those of the machines kiln is tuned on. */
  kn_caches c = kn_caches_or_common(&caches);
  kn_sgemm_blocking b;
  b.kc = (int64_t)(c.l1d * (size_t)r->kc_l1_num / (size_t)r->kc_l1_den) / (nr * r->b_bytes);
  b.kc = max64(64, min64(r->kc_max, b.kc / 16 * 16));
  b.mc = (int64_t)(c.l2 / (size_t)r->mc_l2_den) / (b.kc * r->a_bytes) / mr * mr;
  b.mc = max64(mr, min64(b.mc, r->mc_panels * mr));
  if (r->kc_l2_den) {
    b.kc = (int64_t)(c.l2 / (size_t)r->kc_l2_den) / ((b.mc + nr) * r->a_bytes);
    b.kc = max64(64, min64(r->kc_l2_max, b.kc / 64 * 64));
  }
  if (r->nc_b_block) {
    size_t share = c.l3 / 4 < c.l2 ? c.l3 / 4 : c.l2;
    b.nc = (int64_t)share / (b.kc * r->b_bytes) / nr * nr;
  } else {
    b.nc = (int64_t)(c.l2 / (size_t)r->nc_l2_den) / (b.mc * 4) / nr * nr;
  }
  b.nc = max64(r->nc_min * nr, min64(b.nc, r->nc_max * nr));
  return b;
}

/* ---- row tiles ------------------------------------------------------------------- */

/* Row tiles of a block of `rows` rows with A packed here, for a family
 * with row_pairs: panels of mr, except that a short remainder (at most mr
 * / 2 rows, after at least one full panel) shares the last full panel's
 * rows as two tiles of about equal height, each packed at its own height.
 * A thin tile has too few accumulators for the FMA latency (2 rows of 14:
 * 4 chains, half the rate), so M = 128 (BERT at sequence 128: 9 x 14 + 2)
 * ends in 8 + 8 instead.  Each element of C is still one chain of FMAs in
 * k order, so the bits do not change.  Worked out once per block
 * (tile_rows runs per micro-kernel call). */
typedef struct row_tiles {
  int64_t mr, rows;
  int64_t tail, h1, h2; /* first row of the two shared tiles (-1: none), heights */
} row_tiles;

static row_tiles row_tiles_of(int64_t mr, int64_t rows) {
  row_tiles t = {.mr = mr, .rows = rows, .tail = -1};
  int64_t full = rows / mr, rem = rows % mr;
  if (rem > 0 && rem <= mr / 2 && full >= 1) {
    t.tail = (full - 1) * mr;
    t.h1 = (mr + rem + 1) / 2;
    t.h2 = mr + rem - t.h1;
  }
  return t;
}

/* The tile at row `off` (a tile's first) of the block: its height, and in
 * *as its packed stride (rows per depth step); NULL tiles: panels of mr. */
static inline int64_t tile_rows(const row_tiles *t, int64_t mr, int64_t rows, int64_t off,
                                int64_t *as) {
  if (t && t->tail >= 0 && off >= t->tail) return *as = off == t->tail ? t->h1 : t->h2;
  *as = mr;
  return min64(mr, rows - off);
}

/* Whether rows [0, rows) end in a shared pair of tiles (row_tiles_of). */
static bool ends_in_pair(int64_t mr, int64_t rows) {
  return rows % mr > 0 && rows % mr <= mr / 2 && rows >= mr;
}

/* ---- the plan ---------------------------------------------------------------------- */

enum { A_PACKED, A_DIRECT, A_PACK };
enum { B_PACKED, B_DIRECT, B_PACK };

typedef struct plan {
  const kn_gemm_op *op;
  const kn_gemm_desc *d;
  int64_t m, n, k, K; /* K: depth units */
  int64_t mr, nr, kc, mc, nc; /* kc in units */
  int ma, mb;
  bool passes;       /* more than one depth pass */
  bool pairs;        /* row_pairs boundaries (tasks, blocks) */
  int64_t mpanels, npanels;
  int64_t row_units; /* what threads split rows into (task_rows) */
  int64_t tm, tn;
  size_t a_bytes, b_bytes, blk_bytes, tile_bytes, thread_bytes;
  /* epilogue: what the micro-kernel's store does, and what is left */
  const float *bias;
  bool bias_per_row;
  const float *kres; /* residual added in the store */
  int64_t ldr;
  bool clamp;
  float lo, hi;
  const kn_epilogue *rest; /* NULL: nothing left */
  kn_epilogue rest_own;
  int64_t stream_tasks; /* op->row_stream: tasks over column blocks */
  char *scratch;
} plan;

/* Rows [*i0, *i1) of task row t of tm.  Tasks start on panel boundaries,
 * and with row_pairs the last full panel stays with a short remainder that
 * shares its rows (row_tiles_of): the tiles, and so the bits of every
 * element (the 1- and 2-row micro-kernels sum k in another order), are the
 * same for any number of threads. */
static void task_rows(const plan *p, int64_t t, int64_t tm, int64_t *i0, int64_t *i1) {
  *i0 = t * p->row_units / tm * p->mr;
  *i1 = t + 1 == tm ? p->m : min64(p->m, (t + 1) * p->row_units / tm * p->mr);
}

/* Columns over one row stream task: blocks of this many. */
#define STREAM_COLS 64
/* Below this many multiply-adds, waking workers costs more than it saves. */
#define MIN_PARALLEL 262144.0

static void choose_grid(plan *p, int32_t threads) {
  const kn_gemm_desc *d = p->d;
  const kn_gemm_op *op = p->op;
  const int64_t m = p->m, n = p->n, mr = p->mr, nr = p->nr;
  p->tm = p->tn = 1;
  if (threads <= 1 || (double)m * n * max64(p->k, 1) < MIN_PARALLEL) return;
  double best = -1;
  for (int64_t tn = threads; tn >= 1; tn--) {
    if (threads % tn || (op->rows_done && tn != 1)) continue; /* whole rows per task */
    int64_t tm = threads / tn;
    double rows = 0, cols = 0;
    if (d->coarse_shares) {
      if (m <= mr && tm > 1) continue;
      rows = (double)min64(m, ceil_div(p->mpanels, tm) * mr);
      cols = (double)min64(n, ceil_div(p->npanels, tn) * nr);
    } else {
      /* the largest share, in real rows and columns: the micro-kernels
       * have one function per row count, so a short last panel costs its
       * rows only (M = 128 is 10 panels of 14: 70 + 58 rows split over
       * M, against 2 x 128 rows of equal column halves over N) */
      for (int64_t t = 0; t < tm; t++) {
        int64_t r0, r1;
        task_rows(p, t, tm, &r0, &r1);
        rows = fmax(rows, (double)(r1 - r0));
      }
      for (int64_t t = 0; t < tn; t++)
        cols = fmax(cols, (double)(min64(n, (t + 1) * p->npanels / tn * nr) -
                                   t * p->npanels / tn * nr));
    }
    double kk = (double)max64(p->k, 1);
    double cost = rows * cols * kk;
    /* packing, in multiply-add equivalents per element moved */
    if (p->ma == A_PACK) cost += d->cost_a * rows * kk * (double)ceil_div((int64_t)cols, p->nc);
    if (p->mb == B_PACK) cost += (op->b_fn ? d->cost_b_fn : d->cost_b) * cols * kk;
    if (best < 0 || cost < best) {
      best = cost;
      p->tm = tm;
      p->tn = tn;
    }
  }
}

static void split_epilogue(plan *p) {
  const kn_epilogue *ep = p->op->ep;
  if (!ep || p->op->stage == KN_GEMM_STAGE_NONE) return;
  if (!p->d->fused_store) {
    p->rest = ep;
    return;
  }
  kn_act act = ep->act.act;
  bool clampable = act == KN_ACT_RELU || act == KN_ACT_CLIP;
  p->bias = ep->bias;
  p->bias_per_row = ep->bias_per_row;
  if (ep->res && (ep->res_first || act == KN_ACT_NONE)) {
    p->kres = ep->res;
    p->ldr = ep->ldr;
  }
  if (clampable) {
    p->clamp = true;
    p->lo = act == KN_ACT_RELU ? 0.0f : ep->act.lo;
    p->hi = act == KN_ACT_RELU ? INFINITY : ep->act.hi;
  }
  bool rest_act = act != KN_ACT_NONE && !clampable;
  bool rest_res = ep->res && !p->kres;
  if (rest_act || rest_res) {
    p->rest_own.act = ep->act;
    if (!rest_act) p->rest_own.act.act = KN_ACT_NONE;
    p->rest_own.res = rest_res ? ep->res : NULL;
    p->rest_own.ldr = ep->ldr;
    p->rest_own.res_first = false;
    p->rest = &p->rest_own;
  }
}

static void make_plan(const kn_gemm_op *op, int32_t threads, plan *p) {
  memset(p, 0, sizeof *p);
  const kn_gemm_desc *d = op->desc;
  p->op = op;
  p->d = d;
  p->mr = d->mr;
  p->nr = d->nr;
  p->m = op->m;
  p->n = op->n;
  p->k = op->k;
  if (op->row_stream) {
    p->stream_tasks = 1;
    if (threads > 1 && (double)p->n * max64(p->k, 1) >= MIN_PARALLEL)
      p->stream_tasks = min64(threads, ceil_div(p->n, STREAM_COLS));
    return;
  }
  const int64_t m = p->m, n = p->n, mr = p->mr, nr = p->nr;
  const kn_sgemm_blocking bl = op->blocking;
  const int64_t K = p->K = ceil_div(p->k, d->kunit);
  /* depth passes */
  int64_t base = max64(1, bl.kc / d->kunit);
  int64_t kc = d->kc_scale * base;
  if (m <= mr) kc = d->kc_one_panel ? d->kc_one_panel * base : K; /* nothing to reuse */
  kc = min64(kc, K);
  /* Equal passes (k 576 at kc 256: 3 x 192, not 256 + 256 + 64): a short
   * last pass pays a whole pass's C traffic and packing for little work. */
  if (kc > 0) kc = min64(K, round_up(ceil_div(K, ceil_div(K, kc)), d->kc_align));
  p->kc = kc;
  p->passes = kc < K;
  p->mc = max64(mr, bl.mc / mr * mr);
  p->nc = max64(nr, bl.nc / nr * nr);
  p->mc = min64(p->mc, round_up(max64(m, 1), mr));
  p->nc = min64(p->nc, round_up(max64(n, 1), nr));
  /* a single pass keeps nothing between passes: every column in one
   * block, so A is packed once (a C block buffer is still per block) */
  if (d->wide_one_pass && !p->passes && op->stage != KN_GEMM_STAGE_BLOCK)
    p->nc = round_up(max64(n, 1), nr);

  if (op->a_packed) p->ma = A_PACKED;
  else if (m <= op->a_direct_rows) p->ma = A_DIRECT;
  else p->ma = A_PACK;
  if (op->b_packed) p->mb = B_PACKED;
  else if (op->b_direct && m <= 2 * mr) p->mb = B_DIRECT;
  else p->mb = B_PACK;
  p->pairs = d->row_pairs;

  /* per-thread buffers: A block (with room for a shared pair's extra
   * rows), B block or the ragged panel of an in-place B, C block, tile */
  if (p->ma == A_PACK)
    p->a_bytes = align64((size_t)(p->mc / mr + (p->pairs ? 1 : 0)) * d->a_panel_bytes(op, kc));
  if (p->mb == B_PACK) p->b_bytes = align64((size_t)(p->nc / nr * kc) * op->b_kb);
  else if (p->mb == B_DIRECT) p->b_bytes = align64((size_t)kc * op->b_kb);
  /* one block buffer; s32 tiles are whole panels (no shared tiles) */
  KN_ASSERT(!(d->acc == KN_GEMM_ACC_S32 && (op->stage == KN_GEMM_STAGE_BLOCK || d->row_pairs)));
  if (d->acc == KN_GEMM_ACC_S32)
    p->blk_bytes = align64((size_t)(p->passes ? p->mc * p->nc : mr * nr) * sizeof(int32_t));
  else if (op->stage == KN_GEMM_STAGE_BLOCK)
    p->blk_bytes = align64((size_t)(p->mc * p->nc) * sizeof(float));
  if (op->stage == KN_GEMM_STAGE_TILE) p->tile_bytes = align64((size_t)(mr * nr) * sizeof(float));
  p->thread_bytes = p->a_bytes + p->b_bytes + p->blk_bytes + p->tile_bytes;

  p->mpanels = ceil_div(m, mr);
  p->row_units = p->mpanels - (p->pairs && ends_in_pair(mr, m) ? 1 : 0);
  p->npanels = ceil_div(n, nr);
  choose_grid(p, threads);
  split_epilogue(p);
}

size_t kn_gemm_driver_scratch_size(const kn_gemm_op *op, int32_t threads) {
  plan p;
  make_plan(op, 1, &p);
  /* T times the share of one (never 0), so that a caller may split it */
  return (size_t)(threads > 0 ? threads : 1) * (p.thread_bytes + 64);
}

/* ---- one task ---------------------------------------------------------------------- */

typedef struct task {
  const plan *p;
  char *abuf, *bbuf;
  void *blk;
  float *tbuf;
  int64_t jc, npan; /* the column block */
} task;

/* B for pass [pc, pc + kcur) of the column block: packed into the B buffer
 * panel by panel, or the ragged last panel of an in-place B. */
static void prepare_b(const task *t, int64_t pc, int64_t kcur) {
  const plan *p = t->p;
  const kn_gemm_op *op = p->op;
  const int64_t nr = p->nr, n = p->n;
  if (p->mb == B_PACK) {
    for (int64_t q = 0; q < t->npan; q++) {
      int64_t col = t->jc + q * nr;
      p->d->pack_b(op, pc, kcur, col, min64(nr, n - col),
                   t->bbuf + (size_t)(q * kcur) * op->b_kb);
    }
  } else if (p->mb == B_DIRECT && n - (t->jc + (t->npan - 1) * nr) < nr) {
    int64_t col = t->jc + (t->npan - 1) * nr;
    p->d->pack_b(op, pc, kcur, col, n - col, t->bbuf);
  }
}

/* Rows [ic, ic + mcur) of the column block, pass [pc, pc + kcur): pack the
 * A block, then every tile. */
static void run_block(const task *t, int64_t ic, int64_t mcur, int64_t pc, int64_t kcur,
                      bool first, bool last) {
  const plan *p = t->p;
  const kn_gemm_op *op = p->op;
  const kn_gemm_desc *d = p->d;
  const int64_t mr = p->mr, nr = p->nr, n = p->n, jc = t->jc;
  row_tiles rt;
  const row_tiles *tiles = NULL;
  size_t apb = 0;
  if (p->ma == A_PACK) {
    if (p->pairs) {
      rt = row_tiles_of(mr, mcur);
      tiles = &rt;
    }
    apb = d->a_panel_bytes(op, kcur);
    char *dst = t->abuf;
    for (int64_t r = 0, h; r < mcur; r += h) {
      int64_t as;
      h = tile_rows(tiles, mr, mcur, r, &as);
      d->pack_a(op, ic + r, h, as, pc, kcur, dst);
      dst += as == mr ? apb : (size_t)as * (apb / (size_t)mr);
    }
  }
  /* the store's fields for every tile of the block; per tile, bias_row
   * and res */
  kn_sgemm_ustore st;
  memset(&st, 0, sizeof st);
  st.alpha = op->alpha;
  st.scale = op->alpha_in_store;
  st.accumulate = !first;
  st.ldr = p->ldr;
  st.clamp = last && p->clamp;
  st.lo = p->lo;
  st.hi = p->hi;
  /* Per tile, every pointer steps from the block's first tile: no
   * divisions in the tile loop.  A: prepacked panels of mr rows, the
   * packed block's tiles (as rows each: a panel, or a shared tile of a
   * row-linear layout), or raw rows. */
  const char *a0;
  size_t arow = 0; /* bytes per row of a packed tile (row-linear layouts) */
  if (p->ma == A_PACKED) {
    a0 = (const char *)op->a_packed + (size_t)(ic / mr) * op->a_ld + (size_t)pc * op->a_kb;
  } else if (p->ma == A_PACK) {
    a0 = t->abuf;
    arow = apb / (size_t)mr;
  } else {
    a0 = (const char *)op->a + (size_t)ic * op->a_rs + (size_t)pc * op->a_ks;
  }
  /* the fp32 result: in C (row stride ldc), the C block buffer (nc), or
   * the tile buffer (the same for every tile) */
  const bool has_c = op->stage != KN_GEMM_STAGE_NONE;
  int64_t crs = 0, ldc = 0; /* crs: floats from tile row r to r + 1 */
  if (op->stage == KN_GEMM_STAGE_C) ldc = crs = op->ldc;
  else if (op->stage == KN_GEMM_STAGE_BLOCK) ldc = crs = p->nc;
  else if (op->stage == KN_GEMM_STAGE_TILE) ldc = nr;
  const bool s32 = d->acc == KN_GEMM_ACC_S32;
  const int64_t acc_step = p->passes ? mr * p->nc : 0; /* s32 tiles of one column panel */
  const float *bias_row = last && p->bias && p->bias_per_row ? p->bias : NULL;
  const float *bias_col = last && p->bias && !p->bias_per_row ? p->bias + jc : NULL;
  const float *kres = last ? p->kres : NULL;
  const float *col_scale = last && op->col_scale ? op->col_scale + jc : NULL;
  const kn_sgemm_ukernel_fn *f32_fn = d->f32_fn;
  const kn_gemm_cs_ukernel_fn *cs_fn = d->cs_fn;
  const kn_qgemm_ukernel_fn *s32_fn = d->s32_fn;
  const bool s32_si = last && op->s32.si && d->s32_si_fn;
  const bool hooks = !f32_fn && !cs_fn && !s32_fn;
  kn_qgemm_ustore qs = op->s32;
  qs.load = !first;
  qs.final = last;
  const bool after = last && has_c && (p->rest || d->finish);
  /* column panel q: B, the fp32 result and the s32 sums step per panel */
  const char *b0;
  size_t b_step;
  if (p->mb == B_PACKED) {
    b0 = (const char *)op->b_packed + (size_t)(jc / nr) * op->b_ld + (size_t)pc * op->b_kb;
    b_step = op->b_ld;
  } else if (p->mb == B_PACK) {
    b0 = t->bbuf;
    b_step = (size_t)kcur * op->b_kb;
  } else {
    b0 = (const char *)op->b + (size_t)pc * op->b_rs + (size_t)jc * op->b_cs;
    b_step = (size_t)nr * op->b_cs;
  }
  float *c0 = op->stage == KN_GEMM_STAGE_C       ? (float *)op->c + ic * op->ldc + jc
              : op->stage == KN_GEMM_STAGE_BLOCK ? (float *)t->blk
                                                 : t->tbuf;
  const int64_t c_step = op->stage == KN_GEMM_STAGE_TILE ? 0 : nr;
  int32_t *acc0 = s32 ? (int32_t *)t->blk : NULL;
  const int64_t acc_q = p->passes ? mr * nr : 0;
  kn_gemm_tile tl; /* for the hooks */
  memset(&tl, 0, sizeof tl);
  tl.kc = kcur;
  tl.first = first;
  tl.last = last;
  tl.ldc = ldc;
  tl.st = &st;
  for (int64_t q = 0; q < t->npan; q++) {
    int64_t col = jc + q * nr, w = min64(nr, n - col);
    const void *b = b0 + (size_t)q * b_step;
    int64_t bs = nr;
    if (p->mb == B_DIRECT) {
      if (w == nr) bs = op->b_bs;
      else b = t->bbuf; /* the ragged last panel, packed */
    }
    st.bias_col = bias_col ? bias_col + q * nr : NULL;
    if (s32_fn) {
      qs.colsum = op->s32.colsum + col;
      qs.w_scale = op->s32.w_scale + col;
    }
    const float *cs = col_scale ? col_scale + q * nr : NULL;
    float *c_q = c0 + q * c_step;
    int32_t *acc = s32 ? acc0 + q * acc_q : NULL;
    if (hooks || after) {
      tl.j = col;
      tl.w = w;
      tl.b = b;
      tl.bs = bs;
    }
    const char *a = a0;
    for (int64_t ir = ic, h; ir < ic + mcur; ir += h) {
      int64_t as, r = ir - ic;
      h = tile_rows(tiles, mr, mcur, r, &as);
      const void *ta = a;
      if (p->ma == A_PACKED) {
        a += op->a_ld;
      } else if (p->ma == A_PACK) {
        a += as == mr ? apb : (size_t)as * arow;
      } else {
        a += (size_t)h * op->a_rs;
        as = op->a_as;
      }
      float *c = has_c ? c_q + r * crs : NULL;
      st.bias_row = bias_row ? bias_row + ir : NULL;
      st.res = kres ? kres + ir * p->ldr + col : NULL;
      if (hooks || after) {
        tl.i = ir;
        tl.h = h;
        tl.a = ta;
        tl.as = as;
        tl.c = c;
        tl.acc = acc;
      }
      if (f32_fn) {
        f32_fn[h - 1](kcur, ta, as, b, bs, c, ldc, w, &st);
      } else if (cs_fn) {
        cs_fn[h - 1](kcur, ta, as, b, c, ldc, w, &st, cs);
      } else if (s32_fn) {
        qs.acc = acc;
        if (op->s32.si) {
          qs.si = op->s32.si + ir * op->s32.ldc + col;
        } else {
          qs.c = c;
          qs.ldc = ldc;
        }
        (s32_si && d->s32_si_fn[h - 1] ? d->s32_si_fn : s32_fn)[h - 1](kcur, ta, b, w, &qs);
      } else {
        d->kernel(op, &tl);
      }
      if (s32) acc += acc_step;
      if (!after) continue;
      if (p->rest) kn_f32_epilogue(op->isa, p->rest, c, ldc, ir, h, col, w);
      if (d->finish) d->finish(op, &tl);
    }
  }
}

static void rows_done(const plan *p, int64_t r0, int64_t rows) {
  const kn_gemm_op *op = p->op;
  op->rows_done(op->rows_arg, (char *)op->c + (size_t)(r0 * op->ldc) * op->c_esize, op->ldc, r0,
                rows, p->n);
}

static void run_task(void *arg, int64_t task_index, int32_t thread) {
  const plan *p = arg;
  const kn_gemm_op *op = p->op;
  const int64_t n = p->n, K = p->K, mr = p->mr, nr = p->nr;
  int64_t ti = task_index / p->tn, tj = task_index % p->tn;
  int64_t i0, i1;
  task_rows(p, ti, p->tm, &i0, &i1);
  int64_t j0 = tj * p->npanels / p->tn * nr, j1 = min64(n, (tj + 1) * p->npanels / p->tn * nr);
  if (i0 >= i1 || j0 >= j1) return;
  char *base = p->scratch + (size_t)thread * (p->thread_bytes + 64);
  base = (char *)(((uintptr_t)base + 63) & ~(uintptr_t)63);
  task t = {.p = p,
            .abuf = base,
            .bbuf = base + p->a_bytes,
            .blk = base + p->a_bytes + p->b_bytes,
            .tbuf = (float *)(base + p->a_bytes + p->b_bytes + p->blk_bytes)};

  /* a row epilogue per MC block when one NC block spans every column */
  bool rows_per_block = op->rows_done && j0 == 0 && j1 == n && p->nc >= n;
  for (int64_t jc = j0; jc < j1; jc += p->nc) {
    t.jc = jc;
    t.npan = ceil_div(min64(p->nc, j1 - jc), nr);
    if (p->d->k_outer) {
      for (int64_t pc = 0;; pc += p->kc) {
        int64_t kcur = min64(p->kc, K - pc);
        bool first = pc == 0, last = pc + kcur >= K;
        prepare_b(&t, pc, kcur);
        for (int64_t ic = i0, mcur; ic < i1; ic += mcur) {
          mcur = min64(p->mc, i1 - ic);
          /* a short remainder joins this block when it would share its
           * last panel (task_rows; the A buffer has room for mc + mr rows) */
          if (p->pairs && i1 - ic - mcur > 0 && i1 - ic - mcur < mr && ends_in_pair(mr, i1 - ic))
            mcur = i1 - ic;
          run_block(&t, ic, mcur, pc, kcur, first, last);
          if (last && rows_per_block) rows_done(p, ic, mcur);
        }
        if (last) break;
      }
    } else {
      for (int64_t ic = i0, mcur; ic < i1; ic += mcur) {
        mcur = min64(p->mc, i1 - ic);
        if (p->pairs && i1 - ic - mcur > 0 && i1 - ic - mcur < mr && ends_in_pair(mr, i1 - ic))
          mcur = i1 - ic;
        for (int64_t pc = 0;; pc += p->kc) {
          int64_t kcur = min64(p->kc, K - pc);
          bool first = pc == 0, last = pc + kcur >= K;
          prepare_b(&t, pc, kcur);
          run_block(&t, ic, mcur, pc, kcur, first, last);
          if (last) break;
        }
        if (rows_per_block) rows_done(p, ic, mcur);
      }
    }
  }
  if (op->rows_done && !rows_per_block) rows_done(p, i0, i1 - i0);
}

static void stream_task(void *arg, int64_t task_index, int32_t thread) {
  (void)thread;
  const plan *p = arg;
  const kn_gemm_op *op = p->op;
  int64_t blocks = ceil_div(p->n, STREAM_COLS);
  int64_t j0 = min64(p->n, task_index * blocks / p->stream_tasks * STREAM_COLS);
  int64_t j1 = min64(p->n, (task_index + 1) * blocks / p->stream_tasks * STREAM_COLS);
  if (j0 >= j1) return;
  p->d->gemv(op, j0, j1);
  if (op->ep)
    kn_f32_epilogue(op->isa, op->ep, (float *)op->c + j0, op->ldc, 0, 1, j0, j1 - j0);
}

void kn_gemm_driver_run(const kn_gemm_op *op, kn_pool *pool, void *scratch) {
  if (op->m <= 0 || op->n <= 0) return;
  plan p;
  make_plan(op, kn_pool_threads(pool), &p);
  p.scratch = scratch;
  if (op->row_stream) {
    kn_pool_for(pool, p.stream_tasks, stream_task, &p);
    if (op->rows_done) rows_done(&p, 0, 1); /* one row */
  } else {
    kn_pool_for(pool, p.tm * p.tn, run_task, &p);
  }
}
