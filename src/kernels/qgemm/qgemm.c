/*
 * int8 GEMM (qgemm.h): the family's descriptor for the shared driver
 * (kernels/gemm/driver.h): the per-ISA micro-kernels (qgemm-ukernel.h),
 * the packers (A as u8, or quantized from fp32 while it is packed; B with
 * its column sums and scales), the quantizers, the blocking rule, and
 * kn_qgemm as a wrapper that fills them in.
 *
 * What this family asks of the driver:
 *  - depth in groups of G (kunit), passes of whole A chunks (a packed A
 *    panel's passes start on one);
 *  - exact s32 partial sums between passes (KN_GEMM_ACC_S32), kept per
 *    mc x nc block: the depth loop runs inside the row loop (not k_outer;
 *    BLIS has it outside) so that the sums are those of one block, never
 *    of all the rows: C cannot hold them (fp32 or u8).  The prepacked B is
 *    read once per row block from L2/L3, which its 1-2 bytes per element
 *    make cheap.  With one row panel (m <= MR) the whole k is one pass,
 *    and with one pass every column is one block (A packed once);
 *  - on the last pass the micro-kernel dequantizes to fp32 (in C, or in
 *    the tile buffer for a u8 C, requantized by finish) or writes the
 *    exact s32 sums; the whole epilogue by kn_f32_epilogue after it.
 *
 * Results: integer sums are exact whatever the order (qgemm.h), so tiles,
 * blocks and the thread grid change no bit; the fp32 part (dequantization,
 * epilogue, requantization) is elementwise.
 */
#include "qgemm.h"

#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/gemm/driver.h"
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
  /* The B micro-panel (kc x NR elements) in half of L1: 768 depth steps
   * on 48 KiB for both the VNNI (32 x 1 byte) and the AVX2 (16 x 2) tile.
   * 8 row panels per block (the A block, mc x kc, in an eighth of L2),
   * and as many columns as the s32 partial sums (mc x nc) fit in a
   * quarter of L2: few column blocks, so A is packed few times.
   * VNNI: a 14 x 32 tile reads 184 bytes of A and B per 28 vpdpbusd (28
   * cycles): L2 streams that easily, so the B micro-panel need not stay
   * in L1.  Deep passes instead (the A block and a B micro-panel in half
   * of L2): most shapes take k in one pass, with no s32 partial sums and
   * A packed (quantized) once.  Zen 4: 1-3% over kc = 512. */
  kn_gemm_block_rule rule = {
      .kc_l1_num = 1, .kc_l1_den = 2, .b_bytes = uk->esize, .kc_max = 2048,
      .mc_l2_den = 8, .a_bytes = uk->esize, .mc_panels = 8,
      .kc_l2_den = impl == KN_QGEMM_AVX512VNNI ? 2 : 0, .kc_l2_max = 4096,
      .nc_b_block = false, .nc_l2_den = 4, .nc_min = 1, .nc_max = 256,
  };
  kn_sgemm_blocking b = kn_gemm_driver_blocking(&rule, uk->mr, uk->nr, kn_caches_or_common(caches));
  return (kn_qgemm_blocking){b.kc, b.mc, b.nc};
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

/* ---- the descriptor's hooks ------------------------------------------------------ */

typedef struct call {
  const kn_qgemm_args *g;
  const int32_t *colsum; /* in the packed B */
  const float *w_scale;
} call;

static const call *call_of(const kn_gemm_op *op) { return op->ctx; }

static size_t op_a_panel_bytes(const kn_gemm_op *op, int64_t kg) {
  return a_panel_bytes(op->desc->uk, kg);
}

/* Rows [i0, i0+h) of A, groups [g0, g0+kg): u8 packed, or fp32 quantized
 * and packed (h <= MR: one panel). */
static void pack_a(const kn_gemm_op *op, int64_t i0, int64_t h, int64_t as, int64_t g0,
                   int64_t kg, void *dst) {
  const kn_qgemm_args *g = call_of(op)->g;
  const kn_qgemm_ukernels *uk = op->desc->uk;
  int64_t k0 = g0 * uk->g, kv = g->k - k0; /* valid depth steps from k0 */
  if (g->a_f32)
    quant_pack_a_panel(uk, g->a_f32 + i0 * g->lda + k0, g->lda, h, kv, kg, g->a_scale, g->a_zero,
                       dst);
  else
    pack_a_panel(uk, g->a + i0 * g->lda + k0, g->lda, h, kv, kg, dst);
}

/* A u8 C: the finished fp32 tile requantized. */
static void finish(const kn_gemm_op *op, const kn_gemm_tile *t) {
  const kn_qgemm_args *g = call_of(op)->g;
  const kn_qgemm_ukernels *uk = op->desc->uk;
  for (int64_t r = 0; r < t->h; r++)
    uk->quant(t->w, t->c + r * t->ldc, g->y_scale, g->y_zero, g->y + (t->i + r) * g->ldy + t->j);
}

static void describe(kn_qgemm_impl impl, const kn_qgemm_args *g, call *cl, kn_gemm_desc *d,
                     kn_gemm_op *op) {
  const kn_qgemm_ukernels *uk = ukernels(impl);
  *d = (kn_gemm_desc){
      .uk = uk, .mr = uk->mr, .nr = uk->nr, .kunit = uk->g,
      /* one row panel: the whole k in one pass (nothing to reuse between
       * passes); passes but the last of whole A chunks */
      .kc_scale = 1, .kc_one_panel = 0, .kc_align = uk->kchunk,
      .k_outer = false, .row_pairs = false, .wide_one_pass = true,
      .acc = KN_GEMM_ACC_S32, .fused_store = false,
      /* the grid with the smallest largest share: compute, plus packing
       * A again for each column block of a task */
      .cost_a = 2.0, .coarse_shares = true,
      .a_panel_bytes = op_a_panel_bytes, .pack_a = pack_a, .pack_b = NULL,
      .s32_fn = uk->fn, .s32_si_fn = uk->fn_s32, .kernel = NULL,
      .finish = g->y ? finish : NULL, .gemv = NULL,
  };
  const int64_t k = max64(g->k, 1); /* k = 0: one zero group, the same as a zero sum */
  const int64_t nr = uk->nr, kg = ceil_div(k, uk->g), n_pad = round_up(g->n, nr);
  const size_t bgb = (size_t)(nr * uk->g * uk->esize); /* B bytes per group of a panel */
  cl->g = g;
  cl->colsum = g->b_packed;
  cl->w_scale = (const float *)(cl->colsum + n_pad);
  kn_qgemm_blocking bl = g->blocking ? *g->blocking : kn_qgemm_blocking_of(impl, NULL);
  *op = (kn_gemm_op){
      .desc = d, .ctx = cl, .isa = kn_qgemm_impl_isa(impl), .m = g->m, .n = g->n, .k = k,
      .blocking = {bl.kc, bl.mc, bl.nc},
      .a_packed = g->a_packed, .a_ld = a_panel_bytes(uk, kg), .a_kb = a_group_bytes(uk),
      .b_packed = (const char *)(cl->w_scale + n_pad), .b_ld = (size_t)kg * bgb, .b_kb = bgb,
      .c = g->c, .ldc = g->ldc, .c_esize = 4,
      .stage = g->y ? KN_GEMM_STAGE_TILE : g->s ? KN_GEMM_STAGE_NONE : KN_GEMM_STAGE_C,
      .ep = g->ep,
      .s32 = {.colsum = cl->colsum, .w_scale = cl->w_scale, .a_scale = g->a_scale,
              .a_zero = g->a_zero, .si = g->s, .ldc = g->s ? g->lds : 0},
  };
}

size_t kn_qgemm_scratch_size(kn_qgemm_impl impl, const kn_qgemm_args *g, int32_t threads) {
  call cl;
  kn_gemm_desc d;
  kn_gemm_op op;
  describe(impl, g, &cl, &d, &op);
  return kn_gemm_driver_scratch_size(&op, threads);
}

void kn_qgemm(kn_qgemm_impl impl, kn_pool *pool, const kn_qgemm_args *g, void *scratch) {
  if (g->m <= 0 || g->n <= 0) return;
  KN_ASSERT(g->k >= 0 && g->k <= KN_QGEMM_K_MAX);
  KN_ASSERT((g->c != NULL) + (g->y != NULL) + (g->s != NULL) == 1);
  KN_ASSERT(g->a_packed || g->a || g->a_f32);
  KN_ASSERT(g->a_zero >= 0 && g->a_zero <= 255);
  call cl;
  kn_gemm_desc d;
  kn_gemm_op op;
  describe(impl, g, &cl, &d, &op);
  kn_gemm_driver_run(&op, pool, scratch);
}
