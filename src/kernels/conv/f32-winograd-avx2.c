/*
 * Winograd F(4x4, 3x3) kernels for AVX2 + FMA: 8 tiles per ymm.
 *
 * GEMM register tile 6 x 16 (12 accumulators + 2 loaded V rows + 1
 * broadcast = 15 of 16 ymm, the shape of f32-gemm-6x16-avx2.c).  Input
 * windows by masked gathers; output rows by in-lane unpacks into 128-bit
 * rows of 4 outputs, one per tile (as in f32-winograd-avx512.c).
 */
#include <immintrin.h>

#include "kernels/conv/winograd.h"

typedef __m256 V;
typedef __m256i VI;
typedef __m256 VM;
#define VN 8
#define MR 6
#define KN_WG_TABLE kn_f32_winograd_f43__avx2

static inline V v_zero(void) { return _mm256_setzero_ps(); }
static inline V v_set1(float f) { return _mm256_set1_ps(f); }
static inline V v_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_st(float *p, V v) { _mm256_storeu_ps(p, v); }
static inline V v_add(V a, V b) { return _mm256_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm256_sub_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline V v_fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
static inline VI vi_ld(const int32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline VI vi_add(VI a, VI b) { return _mm256_add_epi32(a, b); }
static inline VI vi_set1(int32_t i) { return _mm256_set1_epi32(i); }
static inline VM vm_bits(uint32_t b) {
  const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  __m256i m = _mm256_and_si256(_mm256_set1_epi32((int32_t)b), lane);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(m, lane));
}
static inline VM vm_and(VM a, VM b) { return _mm256_and_ps(a, b); }
static inline V v_gather(const float *base, VI idx, VM m) {
  return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, idx, m, 4);
}

static inline __attribute__((always_inline)) void store_row(__m128 v, float *y, const float *res,
                                                            int ncols, const kn_wg_epi *e) {
  __m128i mk = _mm_cmpgt_epi32(_mm_set1_epi32(ncols), _mm_setr_epi32(0, 1, 2, 3));
  if (res && e->res_first) v = _mm_add_ps(v, _mm_maskload_ps(res, mk));
  if (e->clamp) v = _mm_min_ps(_mm_max_ps(v, _mm_set1_ps(e->lo)), _mm_set1_ps(e->hi));
  if (res && !e->res_first) v = _mm_add_ps(v, _mm_maskload_ps(res, mk));
  if (ncols == 4) _mm_storeu_ps(y, v);
  else _mm_maskstore_ps(y, mk, v);
}

static void wg_store(V o[4][4], const kn_wg_lanes *ln, float *y, const float *res, int64_t ow,
                     const kn_wg_epi *e) {
  for (int a = 0; a < 4; a++) {
    /* z[k]'s 128-bit lane j = row a of tile 4j + k */
    __m256 t0 = _mm256_unpacklo_ps(o[a][0], o[a][1]), t1 = _mm256_unpackhi_ps(o[a][0], o[a][1]);
    __m256 t2 = _mm256_unpacklo_ps(o[a][2], o[a][3]), t3 = _mm256_unpackhi_ps(o[a][2], o[a][3]);
    __m256d z[4] = {
        _mm256_unpacklo_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2)),
        _mm256_unpackhi_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2)),
        _mm256_unpacklo_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)),
        _mm256_unpackhi_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)),
    };
#define WG_LANE(j, k)                                                                    \
  do {                                                                                   \
    int l = 4 * (j) + (k);                                                               \
    if (ln->nrows[l] > a) {                                                              \
      int64_t off = ln->out_off[l] + a * ow;                                             \
      store_row(_mm256_extractf128_ps(_mm256_castpd_ps(z[k]), j), y + off,               \
                res ? res + off : NULL, ln->ncols[l], e);                                \
    }                                                                                    \
  } while (0)
    WG_LANE(0, 0);
    WG_LANE(0, 1);
    WG_LANE(0, 2);
    WG_LANE(0, 3);
    WG_LANE(1, 0);
    WG_LANE(1, 1);
    WG_LANE(1, 2);
    WG_LANE(1, 3);
#undef WG_LANE
  }
}

#include "kernels/conv/winograd-impl.h"
