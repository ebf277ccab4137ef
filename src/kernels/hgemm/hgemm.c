/*
 * bf16 / fp16 / int8-weight GEMM (hgemm.h): the family's descriptor for the
 * shared driver (kernels/gemm/driver.h): the per-ISA micro-kernels
 * (hgemm-ukernel.h), B's packers, A's converting packers, the blocking
 * rule, and kn_hgemm as a wrapper that fills them in.
 *
 * What this family asks of the driver:
 *  - B is always prepacked (a weight), so the loops keep the fp32 C block
 *    (mc x nc) in L2 over the passes rather than a packed B block (not
 *    k_outer): jc > ic > pc > jr > ir;
 *  - A packed (and converted: rounded to bf16, or fp16 widened, or rounded
 *    to fp16 for round_a) per (ic, pc) block, except one fp32 row for fp16
 *    or int8 weights, which is read in place (GEMV: only B streams);
 *  - a half C accumulates in the fp32 C block buffer and is rounded per
 *    tile after its epilogue, while the tile is in L1 (finish);
 *  - the epilogue split as kn_sgemm's: bias, a residual before the
 *    activation, Relu and Clip in the micro-kernel's store, the rest by
 *    kn_f32_epilogue on the tile;
 *  - S8W: alpha and the column scales applied once, on the last pass.
 */
#include "hgemm.h"

#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "hgemm-ukernel.h"
#include "kernels/gemm/driver.h"

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

/* A B micro-panel (kc x NR halves) in two thirds of L1, as kn_sgemm; the A
 * block (mc x kc fp32) in a quarter of L2, at most 32 panels; the C block
 * (mc x nc fp32), accumulated over the passes, in half of L2, 4 to 128
 * panels: wide, because A is packed (and converted) again per column
 * block: with nc = 128 that packing cost BERT's FFN up (n 3072) a third of
 * its time on AVX2.  B streams past from L3 or DRAM, a micro-panel at a
 * time, mc flops per byte.  (The fp16 tile's MR for every type.) */
static const kn_gemm_block_rule block_rule = {
    .kc_l1_num = 2, .kc_l1_den = 3, .b_bytes = 2, .kc_max = 512,
    .mc_l2_den = 4, .a_bytes = 4, .mc_panels = 32,
    .nc_b_block = false, .nc_l2_den = 2, .nc_min = 4, .nc_max = 128,
};

kn_sgemm_blocking kn_hgemm_blocking_for(kn_isa isa, size_t l1d, size_t l2, size_t l3) {
  int64_t mr = ukernels(isa, KN_HGEMM_F16, false)->mr;
  return kn_gemm_driver_blocking(&block_rule, mr, kn_hgemm_nr(isa), (kn_caches){l1d, l2, l3});
}

/* ---- packing A ------------------------------------------------------------ */

enum { A_F32_TO_BF16, A_BF16, A_F32, A_F16 }; /* what A is, for the packer */

/* Bytes of one packed A panel of kc depth steps: fp32, or bf16 pairs in
 * whole chunks (hgemm-ukernel.h). */
static size_t panel_bytes(const kn_hgemm_ukernels *uk, int64_t kc) {
  kc = max64(kc, 1);
  if (!uk->a_pairs) return (size_t)(uk->mr * kc) * sizeof(float);
  return (size_t)(round_up(ceil_div(kc, 2), uk->pair_chunk) * uk->mr) * sizeof(uint32_t);
}

static inline __attribute__((always_inline)) float a_f32(const int mode, const void *row,
                                                         int64_t kk) {
  switch (mode) {
  case A_F32_TO_BF16: return bits_f32((uint32_t)to_bf16(((const float *)row)[kk]) << 16);
  case A_BF16: return bits_f32((uint32_t)((const uint16_t *)row)[kk] << 16);
  case A_F16: return f16_to_f32(((const uint16_t *)row)[kk]);
  default: return ((const float *)row)[kk];
  }
}

/* Rows [i0, i0+h) x depth [k0, k0+kc) of A into one fp32 panel of mr rows,
 * zero-padded (mr values per kk).  k outer: contiguous writes and h
 * sequential read streams, as gemm.c packs. */
static inline __attribute__((always_inline)) void
pack_a_mode(const int mode, int64_t mr, const kn_hgemm_args *g, int64_t i0, int64_t h,
            int64_t k0, int64_t kc, float *d) {
  size_t esz = g->a_half ? 2 : 4;
  const void *src[KN_SGEMM_MR_MAX];
  for (int64_t r = 0; r < h; r++)
    src[r] = (const char *)g->a + ((size_t)((i0 + r) * g->lda + k0)) * esz;
  for (int64_t kk = 0; kk < kc; kk++, d += mr) {
    for (int64_t r = 0; r < h; r++) d[r] = a_f32(mode, src[r], kk);
    for (int64_t r = h; r < mr; r++) d[r] = 0.0f;
  }
}

/* ---- the descriptor's hooks ------------------------------------------------ */

typedef struct call {
  const kn_hgemm_args *g;
  int amode;
} call;

static const call *call_of(const kn_gemm_op *op) { return op->ctx; }

static size_t a_panel_bytes(const kn_gemm_op *op, int64_t kc) {
  return panel_bytes(op->desc->uk, kc);
}

static void pack_a(const kn_gemm_op *op, int64_t i0, int64_t h, int64_t as, int64_t k0,
                   int64_t kc, void *dst) {
  const call *cl = call_of(op);
  const kn_hgemm_args *g = cl->g;
  const kn_hgemm_ukernels *uk = op->desc->uk;
  const int64_t mr = uk->mr;
  if (uk->a_pairs) { /* the kernel's vector packer */
    size_t esz = g->a_half ? 2 : 4;
    uk->pack_a((const char *)g->a + (size_t)(i0 * g->lda + k0) * esz, g->lda, g->a_half, h, kc,
               dst);
    return;
  }
  switch (cl->amode) {
  case A_F32_TO_BF16: pack_a_mode(A_F32_TO_BF16, mr, g, i0, h, k0, kc, dst); break;
  case A_BF16: pack_a_mode(A_BF16, mr, g, i0, h, k0, kc, dst); break;
  case A_F16: pack_a_mode(A_F16, mr, g, i0, h, k0, kc, dst); break;
  default: pack_a_mode(A_F32, mr, g, i0, h, k0, kc, dst); break;
  }
  if (g->round_a) uk->round_half(dst, mr * kc);
}

/* A half C: the finished fp32 tile rounded to B's type (nearest even). */
static void finish(const kn_gemm_op *op, const kn_gemm_tile *t) {
  const kn_hgemm_args *g = call_of(op)->g;
  const kn_hgemm_ukernels *uk = op->desc->uk;
  uint16_t *c = (uint16_t *)g->c + t->i * g->ldc + t->j;
  for (int64_t r = 0; r < t->h; r++) {
    const float *x = t->c + r * t->ldc;
    if (g->type == KN_HGEMM_F16) {
      uk->to_half(x, c + r * g->ldc, t->w);
    } else {
      for (int64_t j = 0; j < t->w; j++) c[r * g->ldc + j] = to_bf16(x[j]);
    }
  }
}

static void describe(kn_isa isa, const kn_hgemm_args *g, call *cl, kn_gemm_desc *d,
                     kn_gemm_op *op) {
  bool bf16 = g->type == KN_HGEMM_BF16, s8 = g->type == KN_HGEMM_S8W;
  KN_ASSERT(g->type == KN_HGEMM_BF16 || g->type == KN_HGEMM_F16 || s8);
  KN_ASSERT(!(bf16 && g->bf16_dot) || isa == KN_ISA_AVX512);
  KN_ASSERT(!s8 || (!g->a_half && !g->c_half)); /* S8W: fp32 A and C */
  KN_ASSERT(!g->round_a || (!bf16 && !g->a_half));
  const kn_hgemm_ukernels *uk = ukernels(isa, g->type, bf16 && g->bf16_dot);
  *d = (kn_gemm_desc){
      .uk = uk, .mr = uk->mr, .nr = uk->nr, .kunit = 1,
      /* vdpbf16ps: a 14 x 32 tile reads 184 bytes of A and B per 28
       * instructions, which L2 streams easily; deeper passes save the fp32
       * C round trips between them and A packed again per column block,
       * and k up to 12 fp32 blocks (4032 with kc 336) takes one pass.
       * Zen 4, 1 thread: BERT 128x768x3072 173 -> 194-208 GFLOP/s,
       * 3136x64x576 +10% over the fp32 kernels' kc.  One row panel: 8
       * blocks (nothing to reuse).  Passes multiples of 8 (bf16 pairs:
       * every pass but the last starts and ends on a pair). */
      .kc_scale = uk->a_pairs ? 12 : 1, .kc_one_panel = 8, .kc_align = 8,
      .k_outer = false, .row_pairs = false, .wide_one_pass = true,
      .acc = KN_GEMM_ACC_C, .fused_store = true,
      .cost_a = 4.0, .coarse_shares = false,
      .a_panel_bytes = a_panel_bytes, .pack_a = pack_a, .pack_b = NULL,
      .cs_fn = uk->fn, .finish = g->c_half ? finish : NULL, .gemv = NULL,
  };
  cl->g = g;
  cl->amode = bf16 ? (g->a_half ? A_BF16 : A_F32_TO_BF16) : (g->a_half ? A_F16 : A_F32);
  const int64_t nr = uk->nr, kp = packed_depth(g->type, g->k);
  /* S8W: int8 panels after the scales (hgemm.h); else uint16 halves */
  const char *panels = s8 && g->b_packed
                           ? (const char *)g->b_packed + kn_hgemm_s8w_panels_offset(isa, g->n)
                           : (const char *)g->b_packed;
  const size_t bsz = s8 ? 1 : 2;
  *op = (kn_gemm_op){
      .desc = d, .ctx = cl, .isa = isa, .m = g->m, .n = g->n,
      .k = g->alpha == 0.0f ? 0 : g->k, /* as kn_sgemm: no product at all */
      .blocking = g->blocking ? *g->blocking : kn_hgemm_blocking_for(isa, 0, 0, 0),
      .a = g->a, .a_rs = (size_t)g->lda * 4, .a_ks = 4, .a_as = 1,
      .a_direct_rows = cl->amode == A_F32 && !g->round_a ? 1 : 0, /* one fp32 row in place */
      .b_packed = panels, .b_ld = (size_t)(nr * kp) * bsz, .b_kb = (size_t)nr * bsz,
      .c = g->c, .ldc = g->ldc, .c_esize = g->c_half ? 2 : 4,
      .stage = g->c_half ? KN_GEMM_STAGE_BLOCK : KN_GEMM_STAGE_C,
      /* S8W: alpha goes with the column scales, once, on the last pass */
      .alpha = g->alpha, .alpha_in_store = g->alpha != 1.0f && !s8,
      .col_scale = s8 ? (const float *)(const void *)g->b_packed : NULL, /* S8W: first */
      .ep = g->ep,
      .rows_done = g->rows_done, .rows_arg = g->rows_arg,
  };
}

size_t kn_hgemm_scratch_size(kn_isa isa, const kn_hgemm_args *g, int32_t threads) {
  call cl;
  kn_gemm_desc d;
  kn_gemm_op op;
  describe(isa, g, &cl, &d, &op);
  return kn_gemm_driver_scratch_size(&op, threads);
}

void kn_hgemm(kn_isa isa, kn_pool *pool, const kn_hgemm_args *g, void *scratch) {
  if (g->m <= 0 || g->n <= 0) return;
  KN_ASSERT(g->type != KN_HGEMM_S8W || ((uintptr_t)g->b_packed & 3) == 0);
  call cl;
  kn_gemm_desc d;
  kn_gemm_op op;
  describe(isa, g, &cl, &d, &op);
  kn_gemm_driver_run(&op, pool, scratch);
}
