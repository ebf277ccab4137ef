/*
 * bf16 / fp16 GEMM driver (hgemm.h): the BLIS loops around the per-ISA
 * micro-kernels (hgemm-ukernel.h), portable C.
 *
 * B is always prepacked (a weight), so the loops keep the C block in L2
 * rather than a packed B block:
 *
 *   for jc in steps of NC          columns of C
 *     for ic in steps of MC        rows; C block mc x nc (fp32) in L2
 *       for pc in steps of KC      depth; A block mc x kc packed (L2)
 *         for jr in steps of NR    one B micro-panel (kc x NR halves), L1
 *           for ir in steps of MR  micro-kernel; on the last pc the
 *                                  epilogue, and a half C rounded
 *
 * A is packed (and converted: rounded to bf16, or fp16 widened, or
 * rounded to fp16 for round_a) per (ic, pc) block, except one fp32 row for
 * fp16 or int8 weights, which is read in place (GEMV: only B streams).  A half C accumulates in an fp32 block buffer (mc x nc) and is
 * rounded per tile after its epilogue, while the tile is in L1.
 *
 * The epilogue splits as kn_sgemm's does: bias, a residual before the
 * activation, Relu and Clip in the micro-kernel's store; other
 * activations and a residual after them by kn_f32_epilogue on the tile.
 *
 * Threads: a tm x tn grid of rectangles of whole register tiles (panel
 * boundaries of MR rows and NR columns), chosen as kn_sgemm's cost model
 * does; every element is one micro-kernel's, with the same k blocks for
 * any grid, so results do not depend on the thread count.
 */
#include "hgemm.h"

#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "hgemm-ukernel.h"

static const kn_hgemm_ukernels *ukernels(kn_isa isa, kn_hgemm_type type, bool dot) {
  bool f16 = type == KN_HGEMM_F16, s8 = type == KN_HGEMM_S8W;
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512)
    return f16   ? &kn_f16_gemm_ukernel_14x32__avx512
           : s8  ? &kn_s8w_gemm_ukernel_14x32__avx512
           : dot ? &kn_bf16_gemm_ukernel_14x32__avx512bf16
                 : &kn_bf16_gemm_ukernel_12x32__avx512;
  if (isa == KN_ISA_AVX2)
    return f16  ? &kn_f16_gemm_ukernel_6x16__avx2
           : s8 ? &kn_s8w_gemm_ukernel_6x16__avx2
                : &kn_bf16_gemm_ukernel_5x16__avx2;
#else
  (void)isa;
  (void)dot;
#endif
  return f16  ? &kn_f16_gemm_ukernel_6x8__portable
         : s8 ? &kn_s8w_gemm_ukernel_6x8__portable
              : &kn_bf16_gemm_ukernel_6x8__portable;
}

int32_t kn_hgemm_nr(kn_isa isa) { return ukernels(isa, KN_HGEMM_F16, false)->nr; }

bool kn_hgemm_bf16_dot(kn_isa isa, uint64_t cpu_features) {
#ifdef KN_HAVE_X86_KERNELS
  return isa == KN_ISA_AVX512 && (cpu_features & KN_CPU_BIT(AVX512BF16)) &&
         (cpu_features & KN_CPU_BIT(AVX512F));
#else
  (void)isa;
  (void)cpu_features;
  return false;
#endif
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* ---- conversions (the packers'; exact or round to nearest even) -------- */

static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
/* kn_f32_to_bf16, inline: NaN quietened, else round to nearest even */
static inline uint16_t to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}
/* kn_f16_to_f32, inline and branch-light (f16-gemm-6x8-portable.c's
 * method): the same bits for every input */
static inline float f16_to_f32(uint16_t h) {
  uint32_t o = (uint32_t)(h & 0x7fff) << 13, e = o & 0x0f800000u;
  o += (127 - 15) << 23;
  if (e == 0x0f800000u) o += (128 - 16) << 23;
  else if (e == 0) o = f32_bits(bits_f32(o + (1u << 23)) - bits_f32(113u << 23));
  return bits_f32(o | (uint32_t)(h & 0x8000) << 16);
}

/* ---- packing B ----------------------------------------------------------- */

static int64_t packed_depth(kn_hgemm_type type, int64_t k) {
  return type == KN_HGEMM_BF16 ? round_up(k, 2) : k;
}

size_t kn_hgemm_s8w_panels_offset(kn_isa isa, int64_t n) {
  return (size_t)round_up(4 * round_up(max64(n, 1), kn_hgemm_nr(isa)), 64);
}

size_t kn_hgemm_pack_b_size(kn_isa isa, kn_hgemm_type type, int64_t k, int64_t n) {
  int64_t nr = kn_hgemm_nr(isa), cols = round_up(max64(n, 1), nr);
  if (type == KN_HGEMM_S8W) {
    size_t bytes = kn_hgemm_s8w_panels_offset(isa, n) + (size_t)(cols * max64(k, 2));
    return (bytes + 1) / 2;
  }
  return (size_t)(cols * max64(packed_depth(type, k), 2));
}

/* S8W (hgemm.h): per column j, w = max|B[.][j]| / 127 (1 when zero) and
 * q = clamp(nearbyint(B / w), -127, 127) in the default rounding mode
 * (to nearest even), all in fp32; every byte of the block written. */
static void pack_s8w(kn_isa isa, int64_t k, int64_t n, const float *b, int64_t ldb, bool trans,
                     uint16_t *dst) {
  int64_t nr = kn_hgemm_nr(isa), cols = round_up(max64(n, 1), nr);
  size_t off = kn_hgemm_s8w_panels_offset(isa, n);
  memset(dst, 0, kn_hgemm_pack_b_size(isa, KN_HGEMM_S8W, k, n) * 2);
  KN_ASSERT(((uintptr_t)dst & 3) == 0);
  float *scale = (float *)(void *)dst;
  int8_t *q = (int8_t *)dst + off;
  for (int64_t j = 0; j < n; j++) {
    float mx = 0.0f;
    for (int64_t kk = 0; kk < k; kk++)
      mx = fmaxf(mx, fabsf(trans ? b[j * ldb + kk] : b[kk * ldb + j]));
    float w = mx > 0.0f ? mx / 127.0f : 1.0f;
    scale[j] = w;
    int8_t *panel = q + (j / nr) * nr * k + (j % nr);
    for (int64_t kk = 0; kk < k; kk++) {
      float v = nearbyintf((trans ? b[j * ldb + kk] : b[kk * ldb + j]) / w);
      panel[kk * nr] = (int8_t)fminf(127.0f, fmaxf(-127.0f, v));
    }
  }
  (void)cols;
}

static void pack_b(kn_isa isa, kn_hgemm_type type, int64_t k, int64_t n, const float *bf,
                   const uint16_t *bh, int64_t ldb, bool trans, uint16_t *dst) {
  int64_t nr = kn_hgemm_nr(isa), kp = packed_depth(type, k);
  bool bf16 = type == KN_HGEMM_BF16;
  for (int64_t col = 0; col < n; col += nr, dst += nr * kp)
    for (int64_t kk = 0; kk < kp; kk++)
      for (int64_t j = 0; j < nr; j++) {
        uint16_t v = 0;
        if (kk < k && col + j < n) {
          int64_t at = trans ? (col + j) * ldb + kk : kk * ldb + col + j;
          v = bh ? bh[at] : bf16 ? to_bf16(bf[at]) : kn_f32_to_f16(bf[at]);
        }
        if (bf16) dst[(kk / 2) * 2 * nr + 2 * j + (kk & 1)] = v;
        else dst[kk * nr + j] = v;
      }
}

void kn_hgemm_pack_b(kn_isa isa, kn_hgemm_type type, int64_t k, int64_t n, const float *b,
                     int64_t ldb, bool trans, uint16_t *dst) {
  if (type == KN_HGEMM_S8W) {
    pack_s8w(isa, k, n, b, ldb, trans, dst);
    return;
  }
  pack_b(isa, type, k, n, b, NULL, ldb, trans, dst);
}

void kn_hgemm_pack_b_half(kn_isa isa, kn_hgemm_type type, int64_t k, int64_t n,
                          const uint16_t *b, int64_t ldb, bool trans, uint16_t *dst) {
  KN_ASSERT(type != KN_HGEMM_S8W);
  pack_b(isa, type, k, n, NULL, b, ldb, trans, dst);
}

/* ---- blocking -------------------------------------------------------------- */

kn_sgemm_blocking kn_hgemm_blocking_for(kn_isa isa, size_t l1d, size_t l2, size_t l3) {
  kn_caches c = kn_caches_or_common(&(kn_caches){l1d, l2, l3});
  int64_t nr = kn_hgemm_nr(isa), mr = ukernels(isa, KN_HGEMM_F16, false)->mr;
  kn_sgemm_blocking b;
  /* a B micro-panel (kc x NR halves) in two thirds of L1, as kn_sgemm */
  b.kc = (int64_t)(c.l1d * 2 / 3) / (nr * 2);
  b.kc = max64(64, min64(512, b.kc / 16 * 16));
  /* the A block (mc x kc fp32) in a quarter of L2 */
  b.mc = (int64_t)(c.l2 / 4) / (b.kc * 4) / mr * mr;
  b.mc = max64(mr, min64(b.mc, 32 * mr));
  /* the C block (mc x nc fp32), accumulated over the k blocks, in half of
   * L2; wide, because A is packed (and converted) again per column block:
   * with nc = 128 that packing cost BERT's FFN up (n 3072) a third of its
   * time on AVX2.  B streams past from L3 or DRAM, a micro-panel at a
   * time, mc flops per byte. */
  b.nc = (int64_t)(c.l2 / 2) / (b.mc * 4) / nr * nr;
  b.nc = max64(4 * nr, min64(b.nc, 128 * nr));
  return b;
}

/* ---- the plan ------------------------------------------------------------- */

enum { A_F32_TO_BF16, A_BF16, A_F32, A_F16 }; /* what A is, for the packer */

typedef struct plan {
  const kn_hgemm_args *g;
  kn_isa isa;
  const kn_hgemm_ukernels *uk;
  int64_t m, n, k, mr, nr, kc, mc, nc, kp; /* kp: packed B depth */
  int amode;
  bool a_direct;
  int64_t npanels, mpanels, tm, tn;
  size_t a_bytes, t_bytes, thread_bytes;
  const float *bias;
  bool bias_per_row;
  const float *kres;
  int64_t ldr;
  bool clamp;
  float lo, hi;
  bool has_rest;
  kn_epilogue rest;
  char *scratch;
} plan;

static size_t align64(size_t b) { return (b + 63) / 64 * 64; }

/* Bytes of one packed A panel of kc depth steps: fp32, or bf16 pairs in
 * whole chunks (hgemm-ukernel.h). */
static size_t a_panel_bytes(const kn_hgemm_ukernels *uk, int64_t kc) {
  kc = max64(kc, 1);
  if (!uk->a_pairs) return (size_t)(uk->mr * kc) * sizeof(float);
  return (size_t)(round_up(ceil_div(kc, 2), uk->pair_chunk) * uk->mr) * sizeof(uint32_t);
}

static void make_plan(kn_isa isa, const kn_hgemm_args *g, int32_t threads, plan *p) {
  memset(p, 0, sizeof *p);
  bool bf16 = g->type == KN_HGEMM_BF16, s8 = g->type == KN_HGEMM_S8W;
  KN_ASSERT(g->type == KN_HGEMM_BF16 || g->type == KN_HGEMM_F16 || s8);
  KN_ASSERT(!(bf16 && g->bf16_dot) || isa == KN_ISA_AVX512);
  KN_ASSERT(!s8 || (!g->a_half && !g->c_half)); /* S8W: fp32 A and C */
  KN_ASSERT(!g->round_a || (!bf16 && !g->a_half));
  p->g = g;
  p->isa = isa;
  p->uk = ukernels(isa, g->type, bf16 && g->bf16_dot);
  p->mr = p->uk->mr;
  p->nr = p->uk->nr;
  p->m = g->m;
  p->n = g->n;
  p->k = g->alpha == 0.0f ? 0 : g->k; /* as kn_sgemm: no product at all */
  p->kp = packed_depth(g->type, g->k);
  p->amode = bf16 ? (g->a_half ? A_BF16 : A_F32_TO_BF16) : (g->a_half ? A_F16 : A_F32);
  p->a_direct = p->amode == A_F32 && p->m == 1 && !g->round_a;
  kn_sgemm_blocking bl = g->blocking ? *g->blocking : kn_hgemm_blocking_for(isa, 0, 0, 0);
  int64_t m = p->m, n = p->n, k = p->k, mr = p->mr, nr = p->nr;
  p->kc = bl.kc;
  /* vdpbf16ps: a 14 x 32 tile reads 184 bytes of A and B per 28
   * instructions, which L2 streams easily; deeper k blocks save the fp32
   * C round trips between them and A packed again per column block, and
   * k up to 12 fp32 blocks (4032 with kc 336) takes one pass.  Zen 4,
   * 1 thread: BERT 128x768x3072 173 -> 194-208 GFLOP/s, 3136x64x576 +10%
   * over the fp32 kernels' kc. */
  if (p->uk->a_pairs) p->kc = 12 * bl.kc;
  if (m <= mr) p->kc = 8 * bl.kc; /* one row panel: nothing to reuse */
  p->kc = max64(0, min64(p->kc, k));
  /* equal passes, multiples of 8 (bf16 pairs: every block but the last
   * starts and ends on a pair) */
  if (p->kc > 0) p->kc = min64(k, round_up(ceil_div(k, ceil_div(k, p->kc)), 8));
  p->mc = max64(mr, bl.mc / mr * mr);
  p->nc = max64(nr, bl.nc / nr * nr);
  p->mc = min64(p->mc, round_up(max64(m, 1), mr));
  p->nc = min64(p->nc, round_up(max64(n, 1), nr));
  /* a single pass keeps no C block between k blocks (fp32 C is written
   * once): every column in one block, so A is packed once (a half C
   * still goes through the mc x nc buffer) */
  if (p->kc >= k && !g->c_half) p->nc = round_up(max64(n, 1), nr);
  p->a_bytes = p->a_direct ? 0 : align64((size_t)(p->mc / mr) * a_panel_bytes(p->uk, p->kc));
  p->t_bytes = g->c_half ? align64((size_t)(p->mc * p->nc) * sizeof(float)) : 0;
  p->thread_bytes = p->a_bytes + p->t_bytes;

  p->mpanels = ceil_div(m, mr);
  p->npanels = ceil_div(n, nr);
  p->tm = p->tn = 1;
  if (threads > 1 && (double)m * n * max64(k, 1) >= 262144.0) {
    double best = -1;
    for (int64_t tn = threads; tn >= 1; tn--) {
      if (threads % tn || (g->rows_done && tn != 1)) continue;
      int64_t tm = threads / tn;
      double rows = 0, cols = 0;
      for (int64_t t = 0; t < tm; t++)
        rows = fmax(rows, (double)(min64(m, (t + 1) * p->mpanels / tm * mr) -
                                   t * p->mpanels / tm * mr));
      for (int64_t t = 0; t < tn; t++)
        cols = fmax(cols, (double)(min64(n, (t + 1) * p->npanels / tn * nr) -
                                   t * p->npanels / tn * nr));
      double kk = (double)max64(k, 1);
      double cost = rows * cols * kk;
      if (!p->a_direct) cost += 4.0 * rows * kk * (double)ceil_div((int64_t)cols, p->nc);
      if (best < 0 || cost < best) {
        best = cost;
        p->tm = tm;
        p->tn = tn;
      }
    }
  }

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

size_t kn_hgemm_scratch_size(kn_isa isa, const kn_hgemm_args *g, int32_t threads) {
  plan p;
  make_plan(isa, g, 1, &p);
  return (size_t)(threads > 0 ? threads : 1) * (p.thread_bytes + 64);
}

/* ---- packing A ------------------------------------------------------------ */

static inline __attribute__((always_inline)) float a_f32(const int mode, const void *row,
                                                         int64_t kk) {
  switch (mode) {
  case A_F32_TO_BF16: return bits_f32((uint32_t)to_bf16(((const float *)row)[kk]) << 16);
  case A_BF16: return bits_f32((uint32_t)((const uint16_t *)row)[kk] << 16);
  case A_F16: return f16_to_f32(((const uint16_t *)row)[kk]);
  default: return ((const float *)row)[kk];
  }
}

/* Rows [i0, i0+rows) x depth [k0, k0+kc) of A into fp32 panels of mr
 * rows, zero-padded (panel at dst + p*kc floats, mr per kk).  k outer:
 * contiguous writes and mr sequential read streams, as gemm.c packs. */
static inline __attribute__((always_inline)) void
pack_a_mode(const int mode, int64_t mr, const kn_hgemm_args *g, int64_t i0, int64_t rows,
            int64_t k0, int64_t kc, void *dst) {
  size_t esz = g->a_half ? 2 : 4;
  for (int64_t p = 0; p < rows; p += mr) {
    int64_t h = min64(mr, rows - p);
    const void *src[KN_SGEMM_MR_MAX];
    for (int64_t r = 0; r < h; r++)
      src[r] = (const char *)g->a + ((size_t)((i0 + p + r) * g->lda + k0)) * esz;
    float *d = (float *)dst + p * kc;
    for (int64_t kk = 0; kk < kc; kk++, d += mr) {
      for (int64_t r = 0; r < h; r++) d[r] = a_f32(mode, src[r], kk);
      for (int64_t r = h; r < mr; r++) d[r] = 0.0f;
    }
  }
}

static void pack_a_block(const plan *p, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
                         void *dst) {
  const kn_hgemm_args *g = p->g;
  const kn_hgemm_ukernels *uk = p->uk;
  if (uk->a_pairs) { /* the kernel's vector packer, panel by panel */
    size_t esz = g->a_half ? 2 : 4, pb = a_panel_bytes(uk, kc);
    for (int64_t r = 0; r < rows; r += p->mr)
      uk->pack_a((const char *)g->a + (size_t)((i0 + r) * g->lda + k0) * esz, g->lda,
                 g->a_half, min64(p->mr, rows - r), kc, (char *)dst + (size_t)(r / p->mr) * pb);
    return;
  }
  switch (p->amode) {
  case A_F32_TO_BF16: pack_a_mode(A_F32_TO_BF16, p->mr, g, i0, rows, k0, kc, dst); break;
  case A_BF16: pack_a_mode(A_BF16, p->mr, g, i0, rows, k0, kc, dst); break;
  case A_F16: pack_a_mode(A_F16, p->mr, g, i0, rows, k0, kc, dst); break;
  default: pack_a_mode(A_F32, p->mr, g, i0, rows, k0, kc, dst); break;
  }
}

/* ---- one task ------------------------------------------------------------ */

static void store_half(const plan *p, const float *t, int64_t ldt, uint16_t *c, int64_t ldc,
                       int64_t h, int64_t w) {
  for (int64_t r = 0; r < h; r++) {
    if (p->g->type == KN_HGEMM_F16) {
      p->uk->to_half(t + r * ldt, c + r * ldc, w);
    } else {
      for (int64_t j = 0; j < w; j++) c[r * ldc + j] = to_bf16(t[r * ldt + j]);
    }
  }
}

static void run_task(void *arg, int64_t task, int32_t thread) {
  const plan *p = arg;
  const kn_hgemm_args *g = p->g;
  const kn_hgemm_ukernels *uk = p->uk;
  const int64_t n = p->n, k = p->k, mr = p->mr, nr = p->nr;
  int64_t ti = task / p->tn, tj = task % p->tn;
  int64_t i0 = ti * p->mpanels / p->tm * mr;
  int64_t i1 = min64(p->m, (ti + 1) * p->mpanels / p->tm * mr);
  int64_t j0 = tj * p->npanels / p->tn * nr;
  int64_t j1 = min64(n, (tj + 1) * p->npanels / p->tn * nr);
  if (i0 >= i1 || j0 >= j1) return;
  char *buf = p->scratch + (size_t)thread * p->thread_bytes;
  void *abuf = buf;
  float *tbuf = (float *)(buf + p->a_bytes);
  size_t csz = g->c_half ? 2 : 4;
  kn_sgemm_ustore s;
  memset(&s, 0, sizeof s);
  s.alpha = g->alpha;
  /* S8W: alpha goes with the column scales, once, on the last k block */
  const bool s8 = g->type == KN_HGEMM_S8W;
  s.scale = g->alpha != 1.0f && !s8;
  const float *wscale = s8 ? (const float *)(const void *)g->b_packed : NULL;
  const int8_t *q8 = s8 ? (const int8_t *)(const void *)g->b_packed +
                              kn_hgemm_s8w_panels_offset(p->isa, n)
                        : NULL;
  bool rows_per_block = g->rows_done && j0 == 0 && j1 == n && p->nc >= n;

  for (int64_t jc = j0; jc < j1; jc += p->nc) {
    int64_t ncur = min64(p->nc, j1 - jc);
    int64_t npan = ceil_div(ncur, nr);
    for (int64_t ic = i0; ic < i1; ic += p->mc) {
      int64_t mcur = min64(p->mc, i1 - ic);
      for (int64_t pc = 0;; pc += p->kc) {
        int64_t kcur = min64(p->kc, k - pc);
        bool first = pc == 0, last = pc + kcur >= k;
        if (!p->a_direct) {
          pack_a_block(p, ic, mcur, pc, kcur, abuf);
          if (g->round_a) uk->round_half(abuf, ceil_div(mcur, mr) * mr * kcur);
        }
        for (int64_t q = 0; q < npan; q++) {
          int64_t col = jc + q * nr, w = min64(nr, n - col);
          const void *bp = s8 ? (const void *)(q8 + (col / nr) * nr * p->kp + pc * nr)
                              : (const void *)(g->b_packed + (col / nr) * nr * p->kp + pc * nr);
          for (int64_t ir = ic; ir < ic + mcur; ir += mr) {
            int64_t h = min64(mr, ic + mcur - ir);
            const void *ap;
            int64_t as = mr;
            if (p->a_direct) {
              ap = (const float *)g->a + ir * g->lda + pc;
              as = 1;
            } else if (uk->a_pairs) {
              ap = (const char *)abuf + (size_t)((ir - ic) / mr) * a_panel_bytes(uk, kcur);
            } else {
              ap = (const float *)abuf + (ir - ic) * kcur;
            }
            s.accumulate = !first;
            s.bias_row = last && p->bias && p->bias_per_row ? p->bias + ir : NULL;
            s.bias_col = last && p->bias && !p->bias_per_row ? p->bias + col : NULL;
            s.res = last && p->kres ? p->kres + ir * p->ldr + col : NULL;
            s.ldr = p->ldr;
            s.clamp = last && p->clamp;
            s.lo = p->lo;
            s.hi = p->hi;
            float *c;
            int64_t ldc;
            if (g->c_half) {
              c = tbuf + (ir - ic) * p->nc + (col - jc);
              ldc = p->nc;
            } else {
              c = (float *)g->c + ir * g->ldc + col;
              ldc = g->ldc;
            }
            uk->fn[h - 1](kcur, ap, as, bp, c, ldc, w, &s, last && s8 ? wscale + col : NULL);
            if (last && p->has_rest) kn_f32_epilogue(p->isa, &p->rest, c, ldc, ir, h, col, w);
            if (last && g->c_half)
              store_half(p, c, ldc, (uint16_t *)g->c + ir * g->ldc + col, g->ldc, h, w);
          }
        }
        if (last) break;
      }
      if (rows_per_block)
        g->rows_done(g->rows_arg, (char *)g->c + (size_t)(ic * g->ldc) * csz, g->ldc, ic, mcur,
                     n);
    }
  }
  if (g->rows_done && !rows_per_block)
    g->rows_done(g->rows_arg, (char *)g->c + (size_t)(i0 * g->ldc) * csz, g->ldc, i0, i1 - i0,
                 n);
}

void kn_hgemm(kn_isa isa, kn_pool *pool, const kn_hgemm_args *g, void *scratch) {
  if (g->m <= 0 || g->n <= 0) return;
  KN_ASSERT(g->type != KN_HGEMM_S8W || ((uintptr_t)g->b_packed & 3) == 0);
  plan p;
  make_plan(isa, g, kn_pool_threads(pool), &p);
  p.scratch = scratch;
  kn_pool_for(pool, p.tm * p.tn, run_task, &p);
}
