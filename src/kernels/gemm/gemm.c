/*
 * fp32 GEMM driver: the BLIS loop nest around the per-ISA micro-kernels
 * (ukernel.h), portable C.
 *
 * Per task (a rectangle of whole micro-tiles of C), the loops are BLIS's:
 *
 *   for jc in steps of NC          columns of C
 *     for pc in steps of KC        depth; B block kc x nc packed (L2/L3)
 *       for ic in steps of MC      rows; A block mc x kc packed (L2)
 *         for jr in steps of NR    one B micro-panel, kept in L1
 *           for ir in steps of MR  A micro-panels stream from L2
 *             micro-kernel; on the last pc, the epilogue on the tile
 *
 * The epilogue runs on each MR x NR tile right after its last k block,
 * while the tile is still in L1: bias, a residual before the activation,
 * Relu and Clip inside the micro-kernel's store; other activations and a
 * residual after them by kn_f32_epilogue on the tile.
 *
 * What is skipped:
 *  - prepacked operands (weights) are used in place;
 *  - a single row (GEMV) or a transposed A of at most MR rows is read in
 *    place (a row's k values are contiguous, or MR rows of A^T are);
 *  - with at most 2*MR rows, B is used in place when it is row-major:
 *    packing would cost a whole extra pass over B for one or two uses
 *    (thin products, K << N).  A single row panel also takes the whole k
 *    in one pass (nothing to keep in cache between k blocks).
 *
 * Threads: the output is split into a tm x tn grid of rectangles, one per
 * thread, chosen by a small cost model (compute with tile padding plus
 * packing repeated per rectangle).  Every element is computed by one task,
 * with the same micro-kernel and k order whatever the grid, so results do
 * not depend on the thread count.
 */
#define _GNU_SOURCE
#include "gemm.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "gemm-ukernel.h"

static const kn_sgemm_ukernels *ukernels(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return &kn_f32_gemm_ukernel_14x32__avx512;
  if (isa == KN_ISA_AVX2) return &kn_f32_gemm_ukernel_6x16__avx2;
#else
  (void)isa;
#endif
  return &kn_f32_gemm_ukernel_6x8__portable;
}

int32_t kn_sgemm_mr(kn_isa isa) { return ukernels(isa)->mr; }
int32_t kn_sgemm_nr(kn_isa isa) { return ukernels(isa)->nr; }

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* ---- cache sizes and blocking -------------------------------------------- */

kn_sgemm_blocking kn_sgemm_blocking_for(kn_isa isa, size_t l1d, size_t l2, size_t l3) {
  const kn_sgemm_ukernels *uk = ukernels(isa);
  int64_t mr = uk->mr, nr = uk->nr;
  /* Unknown sizes (callers with no machine description): the common
   * ones (kernels.h), those of the machines kiln is tuned on. */
  kn_caches k = kn_caches_or_common(&(kn_caches){l1d, l2, l3});
  l1d = k.l1d, l2 = k.l2, l3 = k.l3;
  kn_sgemm_blocking b;
  /* The B micro-panel (kc x NR) takes two thirds of L1, the rest is for
   * the A micro-panel streaming through (MR/NR of B's size) and C's tile.
   * Measured on Zen 5 (48 KiB L1, 14x32 tile): kc 256 beats 192 by 5-15%
   * on the BERT shapes (fewer passes over C), 384 and up lose again. */
  b.kc = (int64_t)(l1d * 2 / 3) / (nr * 4);
  b.kc = max64(64, min64(512, b.kc / 16 * 16));
  /* The A block (mc x kc) in half of L2. */
  b.mc = (int64_t)(l2 / 2) / (b.kc * 4) / mr * mr;
  b.mc = max64(mr, min64(b.mc, 64 * mr));
  /* The B block (kc x nc): in L2 too when the L3 is shared by many cores
   * (VMs report the whole socket's), capped so scratch stays small. */
  size_t share = l3 / 4 < l2 ? l3 / 4 : l2;
  b.nc = (int64_t)share / (b.kc * 4) / nr * nr;
  b.nc = max64(4 * nr, min64(b.nc, 128 * nr));
  return b;
}

/* ---- packing ----------------------------------------------------------------- */

/* Row tiles of a block of `rows` rows packed by the driver: panels of mr,
 * except that a short remainder (at most mr / 2 rows, after at least one
 * full panel) shares the last full panel's rows as two tiles of about equal
 * height, each packed at its own height.  A thin tile has too few
 * accumulators for the FMA latency (2 rows of 14: 4 chains, half the rate),
 * so M = 128 (BERT at sequence 128: 9 x 14 + 2) ends in 8 + 8 instead.
 * Each element of C is still one chain of FMAs in k order, so the bits do
 * not change.  Worked out once per block (tile_rows runs per micro-kernel
 * call). */
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

/* The tile at row `off` (a tile's first): its height, and in *as its packed
 * stride (floats per depth step). */
static int64_t tile_rows(const row_tiles *t, int64_t off, int64_t *as) {
  if (t->tail >= 0 && off >= t->tail) return *as = off == t->tail ? t->h1 : t->h2;
  *as = t->mr;
  return min64(t->mr, t->rows - off);
}

/* Rows [i0, i0+rows) x depth [k0, k0+kc) of op(A) into panels of mr rows
 * (panel p at dst + p*mr*kc, mr values per kk, zero-padded); with `tiles`
 * (for rows rows), the driver's tiles instead (the tile at row off at
 * dst + off*kc, its stride values per kk). */
static void pack_a_block(int64_t mr, const float *a, int64_t lda, bool trans, int64_t i0,
                         int64_t rows, int64_t k0, int64_t kc, const row_tiles *tiles,
                         float *restrict dst) {
  for (int64_t p = 0, h; p < rows; p += h) {
    int64_t as = mr;
    h = tiles ? tile_rows(tiles, p, &as) : min64(mr, rows - p);
    float *pd = dst + p * kc;
    if (trans) {
      for (int64_t kk = 0; kk < kc; kk++) {
        const float *src = a + (k0 + kk) * lda + i0 + p;
        float *d = pd + kk * as;
        for (int64_t r = 0; r < h; r++) d[r] = src[r];
        for (int64_t r = h; r < as; r++) d[r] = 0.0f;
      }
    } else {
      /* k outer: contiguous writes, mr sequential read streams (row by
       * row, the strided writes made packing cost as much as a thin
       * product itself). */
      const float *src[KN_SGEMM_MR_MAX];
      for (int64_t r = 0; r < h; r++) src[r] = a + (i0 + p + r) * lda + k0;
      for (int64_t kk = 0; kk < kc; kk++) {
        float *d = pd + kk * as;
        for (int64_t r = 0; r < h; r++) d[r] = src[r][kk];
        for (int64_t r = h; r < as; r++) d[r] = 0.0f;
      }
    }
  }
}

/* Depth [k0, k0+kc) x columns [col, col+w) of op(B) into one panel of nr
 * columns (nr values per kk, zero-padded past w). */
static void pack_b_panel(int64_t nr, const float *b, int64_t ldb, bool trans, int64_t k0,
                         int64_t kc, int64_t col, int64_t w, float *restrict dst) {
  if (!trans) {
    for (int64_t kk = 0; kk < kc; kk++) {
      const float *src = b + (k0 + kk) * ldb + col;
      float *d = dst + kk * nr;
      memcpy(d, src, (size_t)w * sizeof(float));
      for (int64_t j = w; j < nr; j++) d[j] = 0.0f;
    }
    return;
  }
  for (int64_t j = 0; j < w; j++) {
    const float *src = b + (col + j) * ldb + k0;
    for (int64_t kk = 0; kk < kc; kk++) dst[kk * nr + j] = src[kk];
  }
  for (int64_t j = w; j < nr; j++)
    for (int64_t kk = 0; kk < kc; kk++) dst[kk * nr + j] = 0.0f;
}

size_t kn_sgemm_pack_a_size(kn_isa isa, int64_t m, int64_t k) {
  int64_t mr = kn_sgemm_mr(isa);
  return (size_t)(round_up(max64(m, 1), mr) * max64(k, 1));
}

size_t kn_sgemm_pack_b_size(kn_isa isa, int64_t k, int64_t n) {
  int64_t nr = kn_sgemm_nr(isa);
  return (size_t)(round_up(max64(n, 1), nr) * max64(k, 1));
}

void kn_sgemm_pack_a(kn_isa isa, int64_t m, int64_t k, const float *a, int64_t lda,
                     bool trans, float *dst) {
  pack_a_block(kn_sgemm_mr(isa), a, lda, trans, 0, m, 0, k, NULL, dst);
}

void kn_sgemm_pack_b(kn_isa isa, int64_t k, int64_t n, const float *b, int64_t ldb,
                     bool trans, float *dst) {
  int64_t nr = kn_sgemm_nr(isa);
  for (int64_t col = 0; col < n; col += nr, dst += nr * k)
    pack_b_panel(nr, b, ldb, trans, 0, k, col, min64(nr, n - col), dst);
}

/* ---- the plan: blocking, operand modes, task grid ----------------------- */

enum { A_PACKED, A_DIRECT, A_PACK };
enum { B_PACKED, B_DIRECT, B_PACK };

typedef struct plan {
  const kn_sgemm_args *g;
  kn_isa isa;
  const kn_sgemm_ukernels *uk;
  int64_t m, n, k;
  int64_t mr, nr, kc, mc, nc;
  int ma, mb;
  int64_t mpanels, npanels;
  int64_t row_units; /* what threads split rows into (task_rows) */
  int64_t tm, tn;
  size_t a_floats, b_floats; /* per-thread buffers */
  size_t thread_bytes;
  /* epilogue: what the micro-kernel's store does, and what is left */
  const float *bias;
  bool bias_per_row;
  const float *kres; /* residual added in the store */
  int64_t ldr;
  bool clamp;
  float lo, hi;
  bool has_rest;
  kn_epilogue rest;
  char *scratch;
  /* one row against a raw B: gemv-impl.h, tasks over column ranges */
  kn_sgemv_fn gemv;
  int64_t gemv_tasks;
} plan;

static size_t align16(size_t floats) { return (floats + 15) / 16 * 16; }

/* Whether rows [0, rows) end in a shared pair of tiles (row_tiles_of). */
static bool ends_in_pair(int64_t mr, int64_t rows) {
  return rows % mr > 0 && rows % mr <= mr / 2 && rows >= mr;
}

/* Rows [*i0, *i1) of task row t of tm.  Tasks start on panel boundaries,
 * and the last full panel stays with a short remainder that shares its
 * rows (row_tiles_of): the tiles, and so the bits of every element (the
 * 1- and 2-row micro-kernels sum k in another order), are the same for any
 * number of threads. */
static void task_rows(const plan *p, int64_t t, int64_t tm, int64_t *i0, int64_t *i1) {
  *i0 = t * p->row_units / tm * p->mr;
  *i1 = t + 1 == tm ? p->m : min64(p->m, (t + 1) * p->row_units / tm * p->mr);
}

/* Narrower rows keep the panel kernels: their B is a few lines per row. */
#define GEMV_MIN_N 64

static void make_plan(kn_isa isa, const kn_sgemm_args *g, int32_t threads, plan *p) {
  memset(p, 0, sizeof *p);
  p->g = g;
  p->isa = isa;
  p->uk = ukernels(isa);
  p->mr = p->uk->mr;
  p->nr = p->uk->nr;
  p->m = g->m;
  p->n = g->n;
  p->k = g->alpha == 0.0f ? 0 : g->k; /* as the reference: no product at all */
  /* One row against a raw row-major B (a MatMul in a Loop body, whose
   * weights are not prepacked; activations times activations): B streams
   * row by row (gemv-impl.h) instead of down its columns panel by panel,
   * with no blocking to work out.  Columns split over threads in blocks of
   * 64; each output is the same chain of FMAs whatever the split. */
  if (p->m == 1 && !g->b_packed && !g->b_panel && !g->trans_b && p->n >= GEMV_MIN_N) {
    p->gemv = p->uk->gemv;
    p->gemv_tasks = 1;
    if (threads > 1 && (double)p->n * max64(p->k, 1) >= 262144.0)
      p->gemv_tasks = min64(threads, ceil_div(p->n, 64));
    return;
  }
  kn_sgemm_blocking bl = g->blocking ? *g->blocking : kn_sgemm_blocking_for(isa, 0, 0, 0);
  int64_t m = p->m, n = p->n, k = p->k, mr = p->mr, nr = p->nr;
  p->kc = bl.kc;
  if (m <= mr) p->kc = 8 * bl.kc; /* one row panel: nothing to reuse */
  p->kc = max64(0, min64(p->kc, k));
  /* Equal passes (k 576 at kc 256: 3 x 192, not 256 + 256 + 64): a short
   * last pass pays a whole pass's C traffic and B packing for little work. */
  if (p->kc > 0) p->kc = min64(k, round_up(ceil_div(k, ceil_div(k, p->kc)), 8));
  p->mc = bl.mc / mr * mr;
  p->nc = bl.nc / nr * nr;
  if (p->mc < mr) p->mc = mr;
  if (p->nc < nr) p->nc = nr;
  p->mc = min64(p->mc, round_up(max64(m, 1), mr));
  p->nc = min64(p->nc, round_up(max64(n, 1), nr));

  if (g->a_packed) p->ma = A_PACKED;
  else if (m == 1 || (g->trans_a && m <= mr)) p->ma = A_DIRECT;
  else p->ma = A_PACK;
  if (g->b_packed) p->mb = B_PACKED;
  else if (!g->b_panel && !g->trans_b && m <= 2 * mr) p->mb = B_DIRECT;
  else p->mb = B_PACK;

  p->a_floats = p->ma == A_PACK ? align16((size_t)((p->mc + mr) * p->kc)) : 0;
  p->b_floats = p->mb == B_PACK     ? align16((size_t)(p->kc * p->nc))
                : p->mb == B_DIRECT ? align16((size_t)(p->kc * nr))
                                    : 0;
  p->thread_bytes = (p->a_floats + p->b_floats) * sizeof(float);

  p->mpanels = ceil_div(m, mr);
  p->row_units = p->mpanels - (ends_in_pair(mr, m) ? 1 : 0);
  p->npanels = ceil_div(n, nr);
  p->tm = p->tn = 1;
  if (threads > 1 && (double)m * n * max64(k, 1) >= 262144.0) { /* else: waking workers costs more */
    double best = -1;
    for (int64_t tn = threads; tn >= 1; tn--) {
      if (threads % tn || (g->rows_done && tn != 1)) continue; /* whole rows per task */
      int64_t tm = threads / tn;
      /* the largest share, in real rows and columns: the micro-kernels
       * have one function per row count, so a short last panel costs its
       * rows only (M = 128 is 10 panels of 14: 70 + 58 rows split over
       * M, against 2 x 128 rows of equal column halves over N) */
      double rows = 0, cols = 0;
      for (int64_t t = 0; t < tm; t++) {
        int64_t r0, r1;
        task_rows(p, t, tm, &r0, &r1);
        rows = fmax(rows, (double)(r1 - r0));
      }
      for (int64_t t = 0; t < tn; t++)
        cols = fmax(cols, (double)(min64(n, (t + 1) * p->npanels / tn * nr) -
                                   t * p->npanels / tn * nr));
      double kk = (double)max64(k, 1);
      double cost = rows * cols * kk;
      /* packing, in FMA-equivalents per float moved */
      if (p->ma == A_PACK) cost += 4.0 * rows * kk * (double)ceil_div((int64_t)cols, p->nc);
      if (p->mb == B_PACK) cost += (g->b_panel ? 8.0 : 4.0) * cols * kk;
      if (best < 0 || cost < best) {
        best = cost;
        p->tm = tm;
        p->tn = tn;
      }
    }
  }

  /* Epilogue split (see the file comment). */
  const kn_epilogue *ep = g->ep;
  if (ep) {
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
      p->has_rest = true;
      p->rest.act = ep->act;
      if (!rest_act) p->rest.act.act = KN_ACT_NONE;
      p->rest.res = rest_res ? ep->res : NULL;
      p->rest.ldr = ep->ldr;
      p->rest.res_first = false;
    }
  }
}

size_t kn_sgemm_scratch_size(kn_isa isa, const kn_sgemm_args *g, int32_t threads) {
  plan p;
  make_plan(isa, g, 1, &p);
  /* T times the size for 1 (never 0), so that a caller may split it
   * into per-thread shares (gemm.h). */
  return (size_t)(threads > 0 ? threads : 1) * (p.thread_bytes + 64);
}

/* ---- one task ----------------------------------------------------------- */

static void run_task(void *arg, int64_t task, int32_t thread) {
  const plan *p = arg;
  const kn_sgemm_args *g = p->g;
  const kn_sgemm_ukernels *uk = p->uk;
  const int64_t n = p->n, k = p->k, mr = p->mr, nr = p->nr;
  int64_t ti = task / p->tn, tj = task % p->tn;
  int64_t i0, i1;
  task_rows(p, ti, p->tm, &i0, &i1);
  int64_t j0 = tj * p->npanels / p->tn * nr, j1 = min64(n, (tj + 1) * p->npanels / p->tn * nr);
  if (i0 >= i1 || j0 >= j1) return;
  float *abuf = (float *)(p->scratch + (size_t)thread * p->thread_bytes);
  float *bbuf = abuf + p->a_floats;
  kn_sgemm_ustore s;
  memset(&s, 0, sizeof s);
  s.alpha = g->alpha;
  s.scale = g->alpha != 1.0f;

  /* a row epilogue per MC block when one NC block spans every column */
  bool rows_per_block = g->rows_done && j0 == 0 && j1 == n && p->nc >= n;
  for (int64_t jc = j0; jc < j1; jc += p->nc) {
    int64_t ncur = min64(p->nc, j1 - jc);
    int64_t npan = ceil_div(ncur, nr);
    for (int64_t pc = 0;; pc += p->kc) {
      int64_t kcur = min64(p->kc, k - pc);
      bool first = pc == 0, last = pc + kcur >= k;
      if (p->mb == B_PACK) {
        for (int64_t q = 0; q < npan; q++) {
          int64_t col = jc + q * nr, w = min64(nr, n - col);
          float *dst = bbuf + q * kcur * nr;
          if (g->b_panel) g->b_panel(g->b_panel_arg, pc, kcur, col, w, dst);
          else pack_b_panel(nr, g->b, g->ldb, g->trans_b, pc, kcur, col, w, dst);
        }
      } else if (p->mb == B_DIRECT && n - (jc + (npan - 1) * nr) < nr) {
        int64_t col = jc + (npan - 1) * nr; /* the ragged last panel */
        pack_b_panel(nr, g->b, g->ldb, false, pc, kcur, col, n - col, bbuf);
      }
      for (int64_t ic = i0, mcur; ic < i1; ic += mcur) {
        mcur = min64(p->mc, i1 - ic);
        /* a short remainder joins this block when it would share its last
         * panel (task_rows; the A buffer has room for mc + mr rows) */
        if (i1 - ic - mcur > 0 && i1 - ic - mcur < mr && ends_in_pair(mr, i1 - ic))
          mcur = i1 - ic;
        row_tiles rt = row_tiles_of(mr, mcur);
        if (p->ma == A_PACK)
          pack_a_block(mr, g->a, g->lda, g->trans_a, ic, mcur, pc, kcur, &rt, abuf);
        for (int64_t q = 0; q < npan; q++) {
          int64_t col = jc + q * nr, w = min64(nr, n - col);
          const float *bp;
          int64_t bs = nr;
          if (p->mb == B_PACKED) bp = g->b_packed + (col / nr) * nr * k + pc * nr;
          else if (p->mb == B_PACK) bp = bbuf + q * kcur * nr;
          else if (w == nr) {
            bp = g->b + pc * g->ldb + col;
            bs = g->ldb;
          } else {
            bp = bbuf;
          }
          for (int64_t ir = ic, h; ir < ic + mcur; ir += h) {
            const float *ap;
            int64_t as = mr;
            h = p->ma == A_PACK ? tile_rows(&rt, ir - ic, &as) : min64(mr, ic + mcur - ir);
            if (p->ma == A_PACKED) ap = g->a_packed + (ir / mr) * mr * k + pc * mr;
            else if (p->ma == A_PACK) ap = abuf + (ir - ic) * kcur;
            else if (g->trans_a) {
              ap = g->a + pc * g->lda + ir;
              as = g->lda;
            } else {
              ap = g->a + ir * g->lda + pc;
              as = 1;
            }
            s.accumulate = !first;
            s.bias_row = last && p->bias && p->bias_per_row ? p->bias + ir : NULL;
            s.bias_col = last && p->bias && !p->bias_per_row ? p->bias + col : NULL;
            s.res = last && p->kres ? p->kres + ir * p->ldr + col : NULL;
            s.ldr = p->ldr;
            s.clamp = last && p->clamp;
            s.lo = p->lo;
            s.hi = p->hi;
            float *c = g->c + ir * g->ldc + col;
            uk->fn[h - 1](kcur, ap, as, bp, bs, c, g->ldc, w, &s);
            if (last && p->has_rest) kn_f32_epilogue(p->isa, &p->rest, c, g->ldc, ir, h, col, w);
          }
        }
        if (last && rows_per_block)
          g->rows_done(g->rows_arg, g->c + ic * g->ldc, g->ldc, ic, mcur, n);
      }
      if (last) break;
    }
  }
  if (g->rows_done && !rows_per_block)
    g->rows_done(g->rows_arg, g->c + i0 * g->ldc, g->ldc, i0, i1 - i0, n);
}

static void gemv_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const plan *p = arg;
  const kn_sgemm_args *g = p->g;
  int64_t blocks = ceil_div(p->n, 64);
  int64_t j0 = min64(p->n, task * blocks / p->gemv_tasks * 64);
  int64_t j1 = min64(p->n, (task + 1) * blocks / p->gemv_tasks * 64);
  if (j0 >= j1) return;
  const float *a = g->a_packed ? g->a_packed : g->a;
  int64_t as = g->a_packed ? p->mr : g->trans_a ? g->lda : 1;
  float *c = g->c + j0;
  p->gemv(p->k, j1 - j0, a, as, g->b + j0, g->ldb, c);
  if (g->alpha != 1.0f)
    for (int64_t j = 0; j < j1 - j0; j++) c[j] *= g->alpha;
  if (g->ep) kn_f32_epilogue(p->isa, g->ep, c, g->ldc, 0, 1, j0, j1 - j0);
}

void kn_sgemm(kn_isa isa, kn_pool *pool, const kn_sgemm_args *g, void *scratch) {
  if (g->m <= 0 || g->n <= 0) return;
  plan p;
  make_plan(isa, g, kn_pool_threads(pool), &p);
  p.scratch = scratch;
  if (p.gemv) {
    kn_pool_for(pool, p.gemv_tasks, gemv_task, &p);
    if (g->rows_done) g->rows_done(g->rows_arg, g->c, g->ldc, 0, 1, g->n); /* one row */
  } else {
    kn_pool_for(pool, p.tm * p.tn, run_task, &p);
  }
}
