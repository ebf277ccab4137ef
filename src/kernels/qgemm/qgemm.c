/*
 * int8 GEMM driver: packing, blocking and threads around the per-ISA
 * micro-kernels (ukernel.h), portable C.
 *
 * Per task (a rectangle of whole register tiles of C):
 *
 *   for jc in steps of NC          columns; B is always prepacked
 *     for ic in steps of MC        rows
 *       for pg in steps of KC      depth; A block mc x kc packed (L2)
 *         for jr in steps of NR    one B micro-panel (kc x NR), in L1
 *           for ir in steps of MR  A micro-panels stream from L2
 *             micro-kernel: s32 partial sums of the tile in the task's
 *             mc x nc block (L2) between passes; on the last pass,
 *             dequantized to fp32 in C, the epilogue, the requantization
 *
 * The depth loop is inside the row loop (BLIS has it outside) so that the
 * s32 partial sums are those of one mc x nc block, never of all the rows:
 * C cannot hold them (fp32 or u8).  The prepacked B is read once per row
 * block from L2/L3, which its 1-2 bytes per element make cheap.  With one
 * row panel (m <= MR) the whole k is one pass.
 *
 * Results: integer sums are exact whatever the order (qgemm.h), so tiles,
 * blocks and the thread grid change no bit; the fp32 part (dequantization,
 * epilogue, requantization) is elementwise.
 */
#include "qgemm.h"

#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "qgemm-ukernel.h"

static const kn_qgemm_ukernels *ukernels(kn_qgemm_impl impl) {
#ifdef KN_HAVE_X86_KERNELS
  if (impl == KN_QGEMM_AVX512VNNI) return &kn_qu8s8_gemm_ukernel_14x32__avx512vnni;
  if (impl == KN_QGEMM_AVX2) return &kn_qu8s8_gemm_ukernel_5x16__avx2;
#else
  (void)impl;
#endif
  return &kn_qu8s8_gemm_ukernel_4x8__portable;
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
static inline size_t align64(size_t b) { return (b + 63) / 64 * 64; }

bool kn_qgemm_impl_available(kn_qgemm_impl impl, uint64_t f) {
  switch (impl) {
  case KN_QGEMM_PORTABLE:
    return true;
  case KN_QGEMM_AVX2:
    return kn_isa_available(KN_ISA_AVX2, f);
  case KN_QGEMM_AVX512VNNI:
    return kn_isa_available(KN_ISA_AVX512, f) && (f & KN_CPU_BIT(AVX512VNNI));
  default:
    return false;
  }
}

kn_qgemm_impl kn_qgemm_impl_for(kn_isa isa, uint64_t f) {
  if (isa >= KN_ISA_AVX512 && kn_qgemm_impl_available(KN_QGEMM_AVX512VNNI, f))
    return KN_QGEMM_AVX512VNNI;
  if (isa >= KN_ISA_AVX2 && kn_qgemm_impl_available(KN_QGEMM_AVX2, f)) return KN_QGEMM_AVX2;
  return KN_QGEMM_PORTABLE;
}

const char *kn_qgemm_impl_name(kn_qgemm_impl impl) {
  static const char *const names[KN_QGEMM_IMPL_COUNT] = {
      [KN_QGEMM_PORTABLE] = "portable", [KN_QGEMM_AVX2] = "avx2",
      [KN_QGEMM_AVX512VNNI] = "avx512vnni"};
  return (unsigned)impl < KN_QGEMM_IMPL_COUNT ? names[impl] : "?";
}

kn_isa kn_qgemm_impl_isa(kn_qgemm_impl impl) {
  return impl == KN_QGEMM_AVX512VNNI ? KN_ISA_AVX512
         : impl == KN_QGEMM_AVX2     ? KN_ISA_AVX2
                                     : KN_ISA_PORTABLE;
}

int32_t kn_qgemm_mr(kn_qgemm_impl impl) { return ukernels(impl)->mr; }
int32_t kn_qgemm_nr(kn_qgemm_impl impl) { return ukernels(impl)->nr; }
int32_t kn_qgemm_kgroup(kn_qgemm_impl impl) { return ukernels(impl)->g; }
int32_t kn_qgemm_kchunk(kn_qgemm_impl impl) { return ukernels(impl)->kchunk; }

/* ---- blocking ------------------------------------------------------------------ */

kn_qgemm_blocking kn_qgemm_blocking_of(kn_qgemm_impl impl, const kn_caches *caches) {
  const kn_qgemm_ukernels *uk = ukernels(impl);
  kn_caches c = kn_caches_or_common(caches);
  kn_qgemm_blocking b;
  /* The B micro-panel (kc x NR elements) in half of L1: 768 depth steps
   * on 48 KiB for both the VNNI (32 x 1 byte) and the AVX2 (16 x 2) tile. */
  b.kc = (int64_t)(c.l1d / 2) / (uk->nr * uk->esize);
  b.kc = max64(64, min64(2048, b.kc / 16 * 16));
  /* 8 row panels per block (the A block, mc x kc, in an eighth of L2),
   * and as many columns as the s32 partial sums (mc x nc) fit in a
   * quarter of L2: few column blocks, so A is packed few times. */
  int64_t mr = uk->mr, nr = uk->nr;
  b.mc = min64(8 * mr, (int64_t)(c.l2 / 8) / (b.kc * uk->esize) / mr * mr);
  b.mc = max64(mr, b.mc);
  if (impl == KN_QGEMM_AVX512VNNI) {
    /* A 14 x 32 tile reads 184 bytes of A and B per 28 vpdpbusd (28
     * cycles): L2 streams that easily, so the B micro-panel need not stay
     * in L1.  Deep passes instead (the A block and a B micro-panel in half
     * of L2): most shapes take k in one pass, with no s32 partial sums
     * and A packed (quantized) once.  Zen 4: 1-3% over kc = 512. */
    b.kc = (int64_t)(c.l2 / 2) / (b.mc + nr);
    b.kc = max64(64, min64(4096, b.kc / 64 * 64));
  }
  b.nc = (int64_t)(c.l2 / 4) / (b.mc * 4) / nr * nr;
  b.nc = max64(nr, min64(256 * nr, b.nc));
  return b;
}

/* ---- packing ------------------------------------------------------------------ */

/* kg groups of a panel of `rows` (<= MR) rows of u8 A (row stride lda,
 * starting at depth 0 of the panel) with `kv` valid depth steps: the
 * kernel's packer, or this one for kchunk = 1. */
static void pack_a_panel(const kn_qgemm_ukernels *uk, const uint8_t *a, int64_t lda,
                         int64_t rows, int64_t kv, int64_t kg, void *dst) {
  if (uk->pack_a) {
    uk->pack_a(a, lda, rows, kv, kg, dst);
    return;
  }
  KN_ASSERT(uk->kchunk == 1);
  const int64_t mr = uk->mr, G = uk->g;
  if (uk->esize == 1) {
    uint8_t *d = dst;
    for (int64_t g = 0; g < kg; g++, d += mr * G) {
      int64_t k0 = g * G;
      for (int64_t r = 0; r < mr; r++) {
        uint8_t *dr = d + r * G;
        if (r < rows && k0 + G <= kv && G == 4) {
          memcpy(dr, a + r * lda + k0, 4); /* a constant size: one move, no call */
        } else if (r < rows && k0 + G <= kv) {
          memcpy(dr, a + r * lda + k0, (size_t)G);
        } else {
          for (int64_t t = 0; t < G; t++)
            dr[t] = r < rows && k0 + t < kv ? a[r * lda + k0 + t] : 0;
        }
      }
    }
  } else {
    uint16_t *d = dst;
    for (int64_t g = 0; g < kg; g++, d += mr * G) {
      int64_t k0 = g * G;
      for (int64_t r = 0; r < mr; r++)
        for (int64_t t = 0; t < G; t++)
          d[r * G + t] = r < rows && k0 + t < kv ? a[r * lda + k0 + t] : 0;
    }
  }
}

static size_t a_group_bytes(const kn_qgemm_ukernels *uk) {
  return (size_t)(uk->mr * uk->g * uk->esize);
}

/* Bytes of a packed A panel of kg groups (whole chunks). */
static size_t a_panel_bytes(const kn_qgemm_ukernels *uk, int64_t kg) {
  return (size_t)round_up(kg, uk->kchunk) * a_group_bytes(uk);
}

/* The same from fp32 rows: the kernel's quantizing packer, or quantized
 * in chunks on the stack (kernels allocate nothing) and packed. */
#define QCHUNK 256
static void quant_pack_a_panel(const kn_qgemm_ukernels *uk, const float *x, int64_t ldx,
                               int64_t rows, int64_t kv, int64_t kg, float scale,
                               int32_t zero, void *dst) {
  if (uk->quant_pack_a) {
    uk->quant_pack_a(x, ldx, rows, kv, kg, scale, zero, dst);
    return;
  }
  uint8_t q[KN_QGEMM_MR_MAX * QCHUNK];
  const int64_t G = uk->g;
  for (int64_t g0 = 0; g0 < kg; g0 += QCHUNK / G) {
    int64_t k0 = g0 * G, gn = min64(QCHUNK / G, kg - g0);
    int64_t kn = max64(0, min64(QCHUNK, kv - k0));
    for (int64_t r = 0; r < rows; r++) uk->quant(kn, x + r * ldx + k0, scale, zero, q + r * QCHUNK);
    pack_a_panel(uk, q, QCHUNK, rows, kn, gn, (char *)dst + (size_t)g0 * a_group_bytes(uk));
  }
}

size_t kn_qgemm_pack_a_size(kn_qgemm_impl impl, int64_t m, int64_t k) {
  const kn_qgemm_ukernels *uk = ukernels(impl);
  return (size_t)round_up(max64(m, 1), uk->mr) / (size_t)uk->mr *
         a_panel_bytes(uk, ceil_div(max64(k, 1), uk->g));
}

void kn_qgemm_pack_a(kn_qgemm_impl impl, int64_t m, int64_t k, const uint8_t *a, int64_t lda,
                     void *dst) {
  const kn_qgemm_ukernels *uk = ukernels(impl);
  int64_t kg = ceil_div(max64(k, 1), uk->g);
  for (int64_t i = 0; i < m; i += uk->mr)
    pack_a_panel(uk, a + i * lda, lda, min64(uk->mr, m - i), k, kg,
                 (char *)dst + (size_t)(i / uk->mr) * a_panel_bytes(uk, kg));
}

void kn_qgemm_quantize_pack_a(kn_qgemm_impl impl, int64_t m, int64_t k, const float *x,
                              int64_t ldx, float scale, int32_t zero, void *dst) {
  const kn_qgemm_ukernels *uk = ukernels(impl);
  int64_t kg = ceil_div(max64(k, 1), uk->g);
  for (int64_t i = 0; i < m; i += uk->mr)
    quant_pack_a_panel(uk, x + i * ldx, ldx, min64(uk->mr, m - i), k, kg, scale, zero,
                       (char *)dst + (size_t)(i / uk->mr) * a_panel_bytes(uk, kg));
}

void kn_qgemm_quantize_s8(kn_qgemm_impl impl, int64_t n, const float *x, float scale,
                          int32_t zero, int8_t *y) {
  uint8_t *u = (uint8_t *)y;
  ukernels(impl)->quant(n, x, scale, zero + 128, u);
  for (int64_t i = 0; i < n; i++) u[i] ^= 0x80; /* u8 code c -> s8 c - 128 */
  int32_t nans = 0;
  for (int64_t i = 0; i < n; i++) nans |= x[i] != x[i];
  for (int64_t i = 0; nans && i < n; i++)
    if (x[i] != x[i]) y[i] = 0;
}

void kn_qgemm_range(kn_qgemm_impl impl, int64_t n, const float *x, float *lo, float *hi) {
  const kn_qgemm_ukernels *uk = ukernels(impl);
  if (uk->range) {
    uk->range(n, x, lo, hi);
    return;
  }
  float mn = 0.0f, mx = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
  }
  *lo = mn;
  *hi = mx;
}

void kn_qgemm_quantize(kn_qgemm_impl impl, int64_t m, int64_t k, const float *x, int64_t ldx,
                       float scale, int32_t zero, uint8_t *y, int64_t ldy) {
  const kn_qgemm_ukernels *uk = ukernels(impl);
  for (int64_t i = 0; i < m; i++) uk->quant(k, x + i * ldx, scale, zero, y + i * ldy);
}

size_t kn_qgemm_pack_b_size(kn_qgemm_impl impl, int64_t k, int64_t n) {
  const kn_qgemm_ukernels *uk = ukernels(impl);
  int64_t n_pad = round_up(max64(n, 1), uk->nr);
  return (size_t)(8 * n_pad + n_pad * round_up(max64(k, 1), uk->g) * uk->esize);
}

void kn_qgemm_pack_b(kn_qgemm_impl impl, int64_t k, int64_t n, const int8_t *b, int64_t ldb,
                     bool trans, const float *w_scale, void *dst) {
  const kn_qgemm_ukernels *uk = ukernels(impl);
  KN_ASSERT(k <= KN_QGEMM_K_MAX);
  const int64_t nr = uk->nr, G = uk->g, n_pad = round_up(max64(n, 1), nr);
  const int64_t kg = ceil_div(max64(k, 1), G);
  int32_t *colsum = dst;
  float *scale = (float *)(colsum + n_pad);
  int8_t *p8 = (int8_t *)(scale + n_pad);
  int16_t *p16 = (int16_t *)p8;
  for (int64_t j = 0; j < n_pad; j++) {
    int32_t s = 0;
    for (int64_t kk = 0; j < n && kk < k; kk++) s += trans ? b[j * ldb + kk] : b[kk * ldb + j];
    colsum[j] = s;
    scale[j] = j < n ? w_scale[j] : 0.0f;
  }
  for (int64_t p = 0; p < n_pad / nr; p++)
    for (int64_t g = 0; g < kg; g++)
      for (int64_t j = 0; j < nr; j++)
        for (int64_t t = 0; t < G; t++) {
          int64_t col = p * nr + j, kk = g * G + t;
          int8_t v = col < n && kk < k ? (trans ? b[col * ldb + kk] : b[kk * ldb + col]) : 0;
          size_t at = (size_t)(((p * kg + g) * nr + j) * G + t);
          if (uk->esize == 1) p8[at] = v;
          else p16[at] = v;
        }
}

/* ---- the plan ------------------------------------------------------------------ */

enum { A_PACKED, A_U8, A_F32 };

typedef struct plan {
  const kn_qgemm_args *g;
  const kn_qgemm_ukernels *uk;
  kn_isa isa;
  int64_t m, n, k, mr, nr, G, esize;
  int64_t kg;        /* depth groups of the whole k */
  int64_t kcg;       /* groups per pass */
  int64_t mc, nc;
  int ma;
  bool passes;       /* more than one depth pass: partial sums in a block */
  int64_t mpanels, npanels, tm, tn;
  size_t a_bytes, acc_bytes, tile_bytes, thread_bytes;
  const int32_t *colsum;
  const float *w_scale;
  const char *bpanels;
  char *scratch;
} plan;

static void make_plan(kn_qgemm_impl impl, const kn_qgemm_args *g, int32_t threads, plan *p) {
  memset(p, 0, sizeof *p);
  p->g = g;
  p->uk = ukernels(impl);
  p->isa = kn_qgemm_impl_isa(impl);
  p->m = g->m;
  p->n = g->n;
  p->k = max64(g->k, 1); /* k = 0: one zero group, the same as a zero sum */
  p->mr = p->uk->mr;
  p->nr = p->uk->nr;
  p->G = p->uk->g;
  p->esize = p->uk->esize;
  int64_t m = p->m, n = p->n, mr = p->mr, nr = p->nr;
  p->kg = ceil_div(p->k, p->G);
  kn_qgemm_blocking bl =
      g->blocking ? *g->blocking : kn_qgemm_blocking_of(impl, NULL);
  const int64_t C = p->uk->kchunk;
  p->kcg = max64(1, bl.kc / p->G);
  if (m <= mr) p->kcg = p->kg; /* one row panel: nothing to reuse between passes */
  /* equal passes (a short last one pays a whole pass's overheads), each
   * but the last whole A chunks (a packed A panel's passes start on one) */
  p->kcg = min64(p->kg, round_up(ceil_div(p->kg, ceil_div(p->kg, p->kcg)), C));
  p->passes = p->kcg < p->kg;
  p->mc = max64(mr, bl.mc / mr * mr);
  p->nc = max64(nr, bl.nc / nr * nr);
  p->mc = min64(p->mc, round_up(m, mr));
  /* nc bounds the s32 partial sums kept between passes; with one pass
   * there are none, and a narrower nc would only pack A again per block */
  p->nc = p->passes ? min64(p->nc, round_up(n, nr)) : round_up(n, nr);
  p->ma = g->a_packed ? A_PACKED : g->a_f32 ? A_F32 : A_U8;

  p->a_bytes = p->ma == A_PACKED
                   ? 0
                   : align64((size_t)(p->mc / mr) * a_panel_bytes(p->uk, p->kcg));
  p->acc_bytes = align64((size_t)(p->passes ? p->mc * p->nc : mr * nr) * sizeof(int32_t));
  p->tile_bytes = g->y ? align64((size_t)(mr * nr) * sizeof(float)) : 0;
  p->thread_bytes = p->a_bytes + p->acc_bytes + p->tile_bytes;

  int64_t n_pad = round_up(n, nr);
  p->colsum = g->b_packed;
  p->w_scale = (const float *)(p->colsum + n_pad);
  p->bpanels = (const char *)(p->w_scale + n_pad);

  p->mpanels = ceil_div(m, mr);
  p->npanels = ceil_div(n, nr);
  p->tm = p->tn = 1;
  if (threads > 1 && (double)m * (double)n * (double)p->k >= 262144.0) {
    /* the grid with the smallest largest share: compute, plus packing A
     * again for each column block of a task */
    double best = -1;
    for (int64_t tn = threads; tn >= 1; tn--) {
      if (threads % tn) continue;
      int64_t tm = threads / tn;
      if (m <= mr && tm > 1) continue;
      double rows = (double)min64(m, ceil_div(p->mpanels, tm) * mr);
      double cols = (double)min64(n, ceil_div(p->npanels, tn) * nr);
      double kk = (double)p->k;
      double cost = rows * cols * kk;
      if (p->ma != A_PACKED) cost += 2.0 * rows * kk * (double)ceil_div((int64_t)cols, p->nc);
      if (best < 0 || cost < best) {
        best = cost;
        p->tm = tm;
        p->tn = tn;
      }
    }
  }
}

size_t kn_qgemm_scratch_size(kn_qgemm_impl impl, const kn_qgemm_args *g, int32_t threads) {
  plan p;
  make_plan(impl, g, 1, &p);
  return (size_t)(threads > 0 ? threads : 1) * (p.thread_bytes + 64);
}

/* ---- one task ----------------------------------------------------------------- */

static void run_task(void *arg, int64_t task, int32_t thread) {
  const plan *p = arg;
  const kn_qgemm_args *g = p->g;
  const kn_qgemm_ukernels *uk = p->uk;
  const int64_t m = p->m, n = p->n, mr = p->mr, nr = p->nr;
  const size_t agb = a_group_bytes(uk), bgb = (size_t)(nr * p->G * p->esize);
  int64_t ti = task / p->tn, tj = task % p->tn;
  int64_t i0 = min64(m, ti * p->mpanels / p->tm * mr);
  int64_t i1 = min64(m, (ti + 1) * p->mpanels / p->tm * mr);
  int64_t j0 = min64(n, tj * p->npanels / p->tn * nr);
  int64_t j1 = min64(n, (tj + 1) * p->npanels / p->tn * nr);
  if (i0 >= i1 || j0 >= j1) return;
  char *base = p->scratch + (size_t)thread * (p->thread_bytes + 64);
  base = (char *)(((uintptr_t)base + 63) & ~(uintptr_t)63);
  char *abuf = base;
  int32_t *accbuf = (int32_t *)(base + p->a_bytes);
  float *tile = (float *)(base + p->a_bytes + p->acc_bytes);
  const int64_t npan_nc = p->nc / nr;

  kn_qgemm_ustore s;
  memset(&s, 0, sizeof s);
  s.a_scale = g->a_scale;
  s.a_zero = g->a_zero;
  for (int64_t jc = j0; jc < j1; jc += p->nc) {
    int64_t npan = ceil_div(min64(p->nc, j1 - jc), nr);
    for (int64_t ic = i0; ic < i1; ic += p->mc) {
      int64_t mcur = min64(p->mc, i1 - ic);
      for (int64_t pg = 0; pg < p->kg; pg += p->kcg) {
        int64_t kgc = min64(p->kcg, p->kg - pg);
        const size_t apb = a_panel_bytes(uk, kgc);
        int64_t k0 = pg * p->G, kv = min64(p->k, g->k) - k0;
        if (p->ma != A_PACKED)
          for (int64_t r = 0; r < mcur; r += mr) {
            int64_t rows = min64(mr, mcur - r);
            void *dst = abuf + (size_t)(r / mr) * apb;
            if (p->ma == A_U8)
              pack_a_panel(uk, g->a + (ic + r) * g->lda + k0, g->lda, rows, kv, kgc, dst);
            else
              quant_pack_a_panel(uk, g->a_f32 + (ic + r) * g->lda + k0, g->lda, rows, kv, kgc,
                                 g->a_scale, g->a_zero, dst);
          }
        s.load = pg > 0;
        s.final = pg + kgc >= p->kg;
        for (int64_t q = 0; q < npan; q++) {
          int64_t col = jc + q * nr, w = min64(nr, n - col);
          const char *bp = p->bpanels + (size_t)((col / nr) * p->kg + pg) * bgb;
          s.colsum = p->colsum + col;
          s.w_scale = p->w_scale + col;
          for (int64_t ir = ic; ir < ic + mcur; ir += mr) {
            int64_t h = min64(mr, ic + mcur - ir);
            const char *ap = p->ma == A_PACKED
                                 ? (const char *)g->a_packed +
                                       (size_t)(ir / mr) * a_panel_bytes(uk, p->kg) +
                                       (size_t)pg * agb
                                 : abuf + (size_t)((ir - ic) / mr) * apb;
            s.acc = p->passes ? accbuf + ((ir - ic) / mr * npan_nc + q) * mr * nr : accbuf;
            if (g->y) {
              s.c = tile;
              s.ldc = nr;
            } else if (g->s) {
              s.si = g->s + ir * g->lds + col;
              s.ldc = g->lds;
            } else {
              s.c = g->c + ir * g->ldc + col;
              s.ldc = g->ldc;
            }
            (s.final && g->s && uk->fn_s32[h - 1] ? uk->fn_s32 : uk->fn)[h - 1](kgc, ap, bp, w,
                                                                                &s);
            if (!s.final || g->s) continue;
            if (g->ep) kn_f32_epilogue(p->isa, g->ep, s.c, s.ldc, ir, h, col, w);
            if (g->y)
              for (int64_t r = 0; r < h; r++)
                uk->quant(w, tile + r * nr, g->y_scale, g->y_zero, g->y + (ir + r) * g->ldy + col);
          }
        }
      }
    }
  }
}

void kn_qgemm(kn_qgemm_impl impl, kn_pool *pool, const kn_qgemm_args *g, void *scratch) {
  if (g->m <= 0 || g->n <= 0) return;
  KN_ASSERT(g->k >= 0 && g->k <= KN_QGEMM_K_MAX);
  KN_ASSERT((g->c != NULL) + (g->y != NULL) + (g->s != NULL) == 1);
  KN_ASSERT(g->a_packed || g->a || g->a_f32);
  KN_ASSERT(g->a_zero >= 0 && g->a_zero <= 255);
  plan p;
  make_plan(impl, g, kn_pool_threads(pool), &p);
  p.scratch = scratch;
  kn_pool_for(pool, p.tm * p.tn, run_task, &p);
}
