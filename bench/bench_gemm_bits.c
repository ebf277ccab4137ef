/*
 * bench_gemm_bits: a digest (64-bit FNV-1a) of the output bits of kn_sgemm,
 * kn_hgemm and kn_qgemm over a grid of shapes, operand forms, epilogues,
 * row epilogues, blockings, ISAs (implementations) and thread counts, one
 * line per product, with the scratch size each asked for.  Not a timing:
 * it compares two builds, e.g. before and after a change to the GEMM
 * driver that must not move a bit:
 *
 *   build-old/bench/bench_gemm_bits > old.txt
 *   build-new/bench/bench_gemm_bits > new.txt && cmp old.txt new.txt
 *
 *   bench_gemm_bits [--family sgemm|hgemm|qgemm] [--quick]
 *
 * It uses the public entry points only (gemm.h, hgemm.h, qgemm.h), so the
 * same file builds against either tree.  --quick leaves out the larger
 * shapes.  Output columns: family, variant, shape, threads, scratch bytes,
 * digest.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/cpu.h"
#include "kernels/gemm/gemm.h"
#include "kernels/hgemm/hgemm.h"
#include "kernels/qgemm/qgemm.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
#define FNV0 14695981039346656037ull

static void *xalloc(size_t n) {
  void *p = aligned_alloc(64, (n + 64) / 64 * 64 + 64);
  if (!p) abort();
  memset(p, 0, (n + 64) / 64 * 64 + 64);
  return p;
}

static void fill(float *p, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((int32_t)(seed >> 8) % 4001) / 1000.0f - 0.5f;
  }
}

/* a deterministic row epilogue: each row times (1 + row / 64) plus its
 * first element */
static void rows_f32(void *arg, float *c, int64_t ldc, int64_t r0, int64_t rows, int64_t n) {
  (void)arg;
  for (int64_t r = 0; r < rows; r++) {
    float f = 1.0f + (float)(r0 + r) / 64.0f, c0 = c[r * ldc];
    for (int64_t j = 0; j < n; j++) c[r * ldc + j] = c[r * ldc + j] * f + c0;
  }
}
static void rows_any(void *arg, void *c, int64_t ldc, int64_t r0, int64_t rows, int64_t n) {
  bool half = arg != NULL;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++) {
      if (half) ((uint16_t *)c)[r * ldc + j] ^= (uint16_t)(r0 + r);
      else ((float *)c)[r * ldc + j] *= 1.0f + (float)(r0 + r) / 64.0f;
    }
}

typedef struct panel_arg {
  const float *b;
  int64_t ldb;
  bool trans;
  int64_t nr;
} panel_arg;

static void b_panel(void *arg, int64_t k0, int64_t kc, int64_t n0, int64_t nr, float *dst) {
  const panel_arg *p = arg;
  for (int64_t kk = 0; kk < kc; kk++)
    for (int64_t j = 0; j < p->nr; j++)
      dst[kk * p->nr + j] = j >= nr     ? 0.0f
                            : p->trans ? p->b[(n0 + j) * p->ldb + k0 + kk]
                                       : p->b[(k0 + kk) * p->ldb + n0 + j];
}

typedef struct shape {
  int64_t m, n, k;
} shape;

static const shape small[] = {
    {1, 1, 1},     {1, 7, 3},     {2, 33, 17},   {3, 64, 64},    {7, 13, 0},    {13, 31, 97},
    {14, 32, 33},  {15, 40, 300}, {16, 16, 16},  {17, 97, 129},  {28, 64, 16},  {29, 65, 7},
    {31, 100, 260}, {33, 17, 513}, {45, 70, 31}, {64, 257, 64},  {97, 33, 600}, {128, 128, 128},
    {129, 33, 300}, {130, 96, 40}, {1, 300, 700}, {1, 1000, 64}, {2, 1000, 64}, {4, 520, 256},
    {6, 24, 1100}, {12, 40, 77},   {20, 200, 50}, {257, 1, 97},  {57, 47, 1},   {100, 5, 5},
    /* tests/unit/test_gemm.c's fixed and GEMV shapes */
    {1, 257, 257}, {6, 16, 7},     {4, 16, 3},    {2, 1000, 64}, {1, 64, 1},    {1, 65, 7},
    {1, 97, 300},  {1, 257, 33},   {1, 300, 0},   {1, 1000, 300}, {1, 2000, 150}, {1, 1500, 5},
};
static const shape large[] = {
    {128, 768, 768}, {130, 300, 1030}, {1, 1000, 2048}, {300, 64, 576}, {49, 520, 512},
    {2, 2048, 512},  {250, 250, 2100},
};

static int nshapes(bool quick) {
  int ns = (int)(sizeof small / sizeof small[0]), nl = (int)(sizeof large / sizeof large[0]);
  return ns + (quick ? 0 : nl);
}
static shape shape_at(int i) {
  int ns = (int)(sizeof small / sizeof small[0]);
  return i < ns ? small[i] : large[i - ns];
}

static kn_pool *pools[4];

static void epilogue_of(int v, kn_epilogue *ep, const float *bias, const float *res, int64_t ldr) {
  memset(ep, 0, sizeof *ep);
  switch (v) {
  case 1: /* bias per column, Relu in the store */
    ep->bias = bias;
    ep->act.act = KN_ACT_RELU;
    break;
  case 2: /* bias per row, residual first, Clip */
    ep->bias = bias;
    ep->bias_per_row = true;
    ep->res = res;
    ep->ldr = ldr;
    ep->res_first = true;
    ep->act.act = KN_ACT_CLIP;
    ep->act.lo = -0.25f;
    ep->act.hi = 0.75f;
    break;
  case 3: /* an activation after the store, then the residual */
    ep->bias = bias;
    ep->act.act = KN_ACT_GELU;
    ep->res = res;
    ep->ldr = ldr;
    break;
  case 4: /* residual only */
    ep->res = res;
    ep->ldr = ldr;
    break;
  default:
    break;
  }
}

/* ---- fp32 ------------------------------------------------------------------ */

static void sgemm_all(bool quick) {
  uint64_t feat = kn_cpu_features();
  for (int si = 0; si < nshapes(quick); si++) {
    shape s = shape_at(si);
    const int64_t m = s.m, n = s.n, k = s.k, pad = 3;
    float *a = xalloc((size_t)((m + pad) * (k + pad)) * 4);
    float *b = xalloc((size_t)((k + pad) * (n + pad)) * 4);
    float *bias = xalloc((size_t)(m + n + 1) * 4);
    float *res = xalloc((size_t)(m * (n + pad)) * 4);
    float *c = xalloc((size_t)(m * (n + pad)) * 4);
    fill(a, (m + pad) * (k + pad), 1);
    fill(b, (k + pad) * (n + pad), 2);
    fill(bias, m + n + 1, 3);
    fill(res, m * (n + pad), 4);
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
      if (!kn_isa_available((kn_isa)isa, feat)) continue;
      int64_t mr = kn_sgemm_mr((kn_isa)isa), nr = kn_sgemm_nr((kn_isa)isa);
      float *ap = xalloc(kn_sgemm_pack_a_size((kn_isa)isa, m, k) * 4);
      float *bp = xalloc(kn_sgemm_pack_b_size((kn_isa)isa, k, n) * 4);
      panel_arg pa = {b, n + pad, false, nr};
      kn_sgemm_blocking bls[3] = {kn_sgemm_blocking_for((kn_isa)isa, 0, 0, 0),
                                  kn_sgemm_blocking_for((kn_isa)isa, 32 << 10, 512 << 10, 8 << 20),
                                  {8 + (k % 3) * 4, 2 * mr, 2 * nr}};
      /* variant v: A form (v % 3: raw, transposed, packed), B form (v / 3 % 4: raw,
       * transposed, packed, callback), epilogue, alpha, blocking, rows_done */
      int nv = quick ? 24 : 48;
      for (int v = 0; v < nv; v++) {
        int af = v % 3, bf = v / 3 % 4, epv = (v / 2 + v / 7) % 5, bl = (v / 5) % 3;
        bool rows = v % 11 == 3 || v % 13 == 5;
        float alpha = v % 9 == 4 ? 0.5f : v == 17 ? 0.0f : 1.0f;
        bool ta = af == 1, tb = bf == 1 || (bf == 3 && v % 2);
        int64_t lda = ta ? m + pad : k + pad, ldb = tb ? k + pad : n + pad;
        if (af == 2) kn_sgemm_pack_a((kn_isa)isa, m, k, a, lda, ta, ap);
        if (bf == 2) kn_sgemm_pack_b((kn_isa)isa, k, n, b, ldb, tb, bp);
        pa.ldb = ldb;
        pa.trans = tb;
        kn_epilogue ep;
        epilogue_of(epv, &ep, bias, res, n + pad);
        kn_sgemm_args g = {.m = m, .n = n, .k = k, .alpha = alpha,
                           .a = af == 2 ? NULL : a, .lda = lda, .trans_a = ta,
                           .a_packed = af == 2 ? ap : NULL,
                           .b = bf == 0 || bf == 1 ? b : NULL, .ldb = ldb, .trans_b = tb,
                           .b_packed = bf == 2 ? bp : NULL,
                           .b_panel = bf == 3 ? b_panel : NULL, .b_panel_arg = &pa,
                           .c = c, .ldc = n + pad, .ep = epv ? &ep : NULL,
                           .rows_done = rows ? rows_f32 : NULL, .blocking = &bls[bl]};
        for (int t = 1; t <= 3; t++) {
          kn_pool *pool = t == 1 ? NULL : pools[t];
          void *scratch = xalloc(kn_sgemm_scratch_size((kn_isa)isa, &g, t));
          for (int64_t i = 0; i < m * (n + pad); i++) c[i] = 1e30f;
          kn_sgemm((kn_isa)isa, pool, &g, scratch);
          printf("sgemm %s a%d b%d ep%d al%g bl%d rows%d %lldx%lldx%lld t%d s%zu %016llx\n",
                 kn_isa_name((kn_isa)isa), af, bf, epv, (double)alpha, bl, rows,
                 (long long)m, (long long)n, (long long)k, t,
                 kn_sgemm_scratch_size((kn_isa)isa, &g, t),
                 (unsigned long long)fnv(FNV0, c, (size_t)(m * (n + pad)) * 4));
          free(scratch);
        }
      }
      free(ap);
      free(bp);
    }
    free(a);
    free(b);
    free(bias);
    free(res);
    free(c);
  }
}

/* ---- bf16 / fp16 / s8 weights ---------------------------------------------- */

static void hgemm_all(bool quick) {
  uint64_t feat = kn_cpu_features();
  for (int si = 0; si < nshapes(quick); si++) {
    shape s = shape_at(si);
    const int64_t m = s.m, n = s.n, k = s.k, pad = 2;
    float *a = xalloc((size_t)(m * (k + pad)) * 4);
    uint16_t *ah[2] = {xalloc((size_t)(m * (k + pad)) * 2), xalloc((size_t)(m * (k + pad)) * 2)};
    float *b = xalloc((size_t)(k * n) * 4);
    float *bias = xalloc((size_t)(m + n + 1) * 4);
    float *res = xalloc((size_t)(m * (n + pad)) * 4);
    float *c = xalloc((size_t)(m * (n + pad)) * 4);
    fill(a, m * (k + pad), 5);
    fill(b, k * n, 6);
    fill(bias, m + n + 1, 7);
    fill(res, m * (n + pad), 8);
    for (int64_t i = 0; i < m * (k + pad); i++) {
      ah[0][i] = kn_f32_to_bf16(a[i]);
      ah[1][i] = kn_f32_to_f16(a[i]);
    }
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
      if (!kn_isa_available((kn_isa)isa, feat)) continue;
      int64_t nr = kn_hgemm_nr((kn_isa)isa);
      for (int type = 0; type < 4; type++) { /* bf16, bf16 on vdpbf16ps, f16, s8w */
        kn_hgemm_type ty = type <= 1 ? KN_HGEMM_BF16 : type == 2 ? KN_HGEMM_F16 : KN_HGEMM_S8W;
        bool dot = type == 1;
        if (dot && !kn_hgemm_bf16_dot((kn_isa)isa, feat)) continue;
        uint16_t *bp = xalloc(kn_hgemm_pack_b_size((kn_isa)isa, ty, k, n) * 2);
        kn_hgemm_pack_b((kn_isa)isa, ty, k, n, b, n, false, bp);
        kn_sgemm_blocking bls[3] = {
            kn_hgemm_blocking_for((kn_isa)isa, 0, 0, 0),
            kn_hgemm_blocking_for((kn_isa)isa, 32 << 10, 512 << 10, 8 << 20),
            {8 + (k % 3) * 8, 2 * 14, 2 * nr}};
        int nv = quick ? 16 : 30;
        for (int v = 0; v < nv; v++) {
          bool s8 = ty == KN_HGEMM_S8W;
          bool a_half = !s8 && v % 3 == 1, c_half = !s8 && v % 4 == 2;
          bool round_a = ty != KN_HGEMM_BF16 && !a_half && v % 5 == 3;
          int epv = (v / 2 + v / 5) % 5, bl = (v / 3) % 3;
          bool rows = v % 7 == 2;
          float alpha = v % 8 == 5 ? 0.5f : v == 13 ? 0.0f : 1.0f;
          kn_epilogue ep;
          epilogue_of(epv, &ep, bias, res, n + pad);
          kn_hgemm_args g = {.type = ty, .bf16_dot = dot, .m = m, .n = n, .k = k,
                             .alpha = alpha,
                             .a = a_half ? (const void *)ah[ty == KN_HGEMM_F16] : a,
                             .lda = k + pad, .a_half = a_half, .round_a = round_a,
                             .b_packed = bp, .c = c, .ldc = n + pad, .c_half = c_half,
                             .ep = epv ? &ep : NULL, .rows_done = rows ? rows_any : NULL,
                             .rows_arg = c_half ? (void *)c : NULL, .blocking = &bls[bl]};
          for (int t = 1; t <= 3; t++) {
            kn_pool *pool = t == 1 ? NULL : pools[t];
            void *scratch = xalloc(kn_hgemm_scratch_size((kn_isa)isa, &g, t));
            memset(c, 0x7f, (size_t)(m * (n + pad)) * 4);
            kn_hgemm((kn_isa)isa, pool, &g, scratch);
            printf("hgemm %s ty%d ah%d ch%d ra%d ep%d al%g bl%d rows%d %lldx%lldx%lld t%d "
                   "s%zu %016llx\n",
                   kn_isa_name((kn_isa)isa), type, a_half, c_half, round_a, epv, (double)alpha,
                   bl, rows, (long long)m, (long long)n, (long long)k, t,
                   kn_hgemm_scratch_size((kn_isa)isa, &g, t),
                   (unsigned long long)fnv(FNV0, c, (size_t)(m * (n + pad)) * 4));
            free(scratch);
          }
        }
        free(bp);
      }
    }
    free(a);
    free(ah[0]);
    free(ah[1]);
    free(b);
    free(bias);
    free(res);
    free(c);
  }
}

/* ---- int8 -------------------------------------------------------------------- */

static void qgemm_all(bool quick) {
  uint64_t feat = kn_cpu_features();
  for (int si = 0; si < nshapes(quick); si++) {
    shape s = shape_at(si);
    const int64_t m = s.m, n = s.n, k = s.k, pad = 5;
    float *af = xalloc((size_t)(m * (k + pad)) * 4);
    uint8_t *a8 = xalloc((size_t)(m * (k + pad)));
    int8_t *b8 = xalloc((size_t)(k * n) + 1);
    float *wsc = xalloc((size_t)n * 4);
    float *bias = xalloc((size_t)(m + n + 1) * 4);
    float *res = xalloc((size_t)(m * (n + pad)) * 4);
    float *c = xalloc((size_t)(m * (n + pad)) * 4);
    fill(af, m * (k + pad), 9);
    fill(bias, m + n + 1, 10);
    fill(res, m * (n + pad), 11);
    uint32_t seed = 12;
    for (int64_t i = 0; i < m * (k + pad); i++) {
      seed = seed * 1664525u + 1013904223u;
      a8[i] = (uint8_t)(seed >> 24);
    }
    for (int64_t i = 0; i < k * n; i++) {
      seed = seed * 1664525u + 1013904223u;
      b8[i] = (int8_t)((seed >> 24) % 255 - 127);
    }
    for (int64_t j = 0; j < n; j++) wsc[j] = 0.001f * (float)(1 + j % 17);
    for (int impl = 0; impl < KN_QGEMM_IMPL_COUNT; impl++) {
      if (!kn_qgemm_impl_available((kn_qgemm_impl)impl, feat)) continue;
      kn_qgemm_impl im = (kn_qgemm_impl)impl;
      int64_t mr = kn_qgemm_mr(im), nr = kn_qgemm_nr(im);
      void *bp = xalloc(kn_qgemm_pack_b_size(im, k, n));
      kn_qgemm_pack_b(im, k, n, b8, n, false, wsc, bp);
      void *ap = xalloc(kn_qgemm_pack_a_size(im, m, k));
      kn_caches small_c = {32 << 10, 512 << 10, 8 << 20};
      kn_qgemm_blocking bls[4] = {kn_qgemm_blocking_of(im, NULL),
                                  kn_qgemm_blocking_of(im, &small_c), {16, mr, nr},
                                  {32 + 16 * (k % 2), 2 * mr, 3 * nr}};
      int nv = quick ? 16 : 30;
      for (int v = 0; v < nv; v++) {
        int amode = v % 4; /* u8, fp32, packed u8, packed quantized */
        int out = v / 4 % 3; /* c, y, s */
        int epv = out == 2 ? 0 : (v / 3 + v / 7) % 5, bl = (v / 2) % 4;
        float a_scale = 0.02f;
        int32_t a_zero = (int32_t)(v * 37 % 256);
        if (amode == 2) kn_qgemm_pack_a(im, m, k, a8, k + pad, ap);
        if (amode == 3) kn_qgemm_quantize_pack_a(im, m, k, af, k + pad, a_scale, a_zero, ap);
        kn_epilogue ep;
        epilogue_of(epv, &ep, bias, res, n + pad);
        kn_qgemm_args g = {.m = m, .n = n, .k = k,
                           .a = amode == 0 ? a8 : NULL, .a_f32 = amode == 1 ? af : NULL,
                           .lda = k + pad, .a_packed = amode >= 2 ? ap : NULL,
                           .a_scale = a_scale, .a_zero = a_zero, .b_packed = bp,
                           .c = out == 0 ? c : NULL, .ldc = n + pad,
                           .y = out == 1 ? (uint8_t *)c : NULL, .ldy = n + pad, .y_scale = 0.05f,
                           .y_zero = 100, .s = out == 2 ? (int32_t *)c : NULL, .lds = n + pad,
                           .ep = epv ? &ep : NULL, .blocking = &bls[bl]};
        for (int t = 1; t <= 3; t++) {
          kn_pool *pool = t == 1 ? NULL : pools[t];
          void *scratch = xalloc(kn_qgemm_scratch_size(im, &g, t));
          memset(c, 0x5a, (size_t)(m * (n + pad)) * 4);
          kn_qgemm(im, pool, &g, scratch);
          printf("qgemm %s a%d out%d ep%d bl%d z%d %lldx%lldx%lld t%d s%zu %016llx\n",
                 kn_qgemm_impl_name(im), amode, out, epv, bl, a_zero, (long long)m,
                 (long long)n, (long long)k, t, kn_qgemm_scratch_size(im, &g, t),
                 (unsigned long long)fnv(FNV0, c, (size_t)(m * (n + pad)) * 4));
          free(scratch);
        }
      }
      free(bp);
      free(ap);
    }
    free(af);
    free(a8);
    free(b8);
    free(wsc);
    free(bias);
    free(res);
    free(c);
  }
}

int main(int argc, char **argv) {
  const char *only = NULL;
  bool quick = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--family") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--quick")) quick = true;
    else {
      fprintf(stderr, "usage: bench_gemm_bits [--family sgemm|hgemm|qgemm] [--quick]\n");
      return 2;
    }
  }
  kn_error err;
  for (int t = 2; t <= 3; t++)
    if (kn_pool_create(t, &pools[t], &err)) return 1;
  if (!only || !strcmp(only, "sgemm")) sgemm_all(quick);
  if (!only || !strcmp(only, "hgemm")) hgemm_all(quick);
  if (!only || !strcmp(only, "qgemm")) qgemm_all(quick);
  for (int t = 2; t <= 3; t++) kn_pool_free(pools[t]);
  return 0;
}
