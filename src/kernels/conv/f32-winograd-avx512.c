/*
 * Winograd F(4x4, 3x3) kernels for AVX-512: 16 tiles per zmm.
 *
 * GEMM register tile 14 x 32 (28 accumulators + 2 loaded V rows + 1
 * broadcast U value = 31 of 32 zmm; 8 independent FMA chains hide the
 * 4-cycle latency of two FMA pipes, as in f32-gemm-14x32-avx512.c).  Input
 * windows: per window row, each tile's 6 floats by one masked 8-float load
 * (zeros outside the image, no separate border path), then a 16 x 8
 * transpose (two 8x8 ones side by side in a zmm) turns them into 6 vectors
 * of 16 tiles: about 46 instructions per row against 6 gathers of 16,
 * which ran at about one element per cycle (the input transform took 40%
 * of the products' time with gathers on 64 channels).  Output: one row of 16 tiles is 4 vectors (its
 * columns); two rounds of in-lane unpacks turn them into 128-bit rows of 4
 * outputs, one per tile, stored with a 4-lane mask for the right edge.
 */
#include <immintrin.h>

#include "kernels/conv/winograd.h"

typedef __m512 V;
#define VN 16
#define MR 14
#define KN_WG_TABLE kn_f32_winograd_f43__avx512

static inline V v_zero(void) { return _mm512_setzero_ps(); }
static inline V v_set1(float f) { return _mm512_set1_ps(f); }
static inline V v_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_st(float *p, V v) { _mm512_storeu_ps(p, v); }
static inline V v_add(V a, V b) { return _mm512_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm512_sub_ps(a, b); }
static inline V v_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline V v_fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }

#define WG_LOAD_ROW
static inline __attribute__((always_inline)) void wg_load_row(const float *plane, int64_t w,
                                                              const kn_wg_lanes *ln, int a,
                                                              V d[6]) {
  uint32_t rb = ln->rbits[a];
  __m512 r[8];
  for (int i = 0; i < 8; i++) {
    /* row i of the transpose: tile i in the low half, tile i + 8 high */
    __mmask8 m0 = (__mmask8)(rb >> i & 1 ? ln->cmask[i] : 0);
    __mmask8 m1 = (__mmask8)(rb >> (i + 8) & 1 ? ln->cmask[i + 8] : 0);
    const float *p0 = m0 ? plane + ln->in_off[i] + a * w : plane;
    const float *p1 = m1 ? plane + ln->in_off[i + 8] + a * w : plane;
    r[i] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_maskz_loadu_ps(m0, p0)),
                              _mm256_maskz_loadu_ps(m1, p1), 1);
  }
  /* 8x8 transposes within each 256-bit half */
  __m512 t[8], s[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; h++) { /* rows 0-3, rows 4-7 */
    s[4 * h + 0] = _mm512_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    s[4 * h + 1] = _mm512_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    s[4 * h + 2] = _mm512_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    s[4 * h + 3] = _mm512_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
  /* s[k] (rows 0-3) and s[k + 4] (rows 4-7), 128-bit lanes: column k of
   * tiles 0-3 / 4-7, column k + 4 of those, the same for tiles 8-15 */
  const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
  const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int k = 0; k < 4; k++) d[k] = _mm512_permutex2var_ps(s[k], lo, s[k + 4]);
  for (int k = 0; k < 2; k++) d[k + 4] = _mm512_permutex2var_ps(s[k], hi, s[k + 4]);
}

/* One output row (4 floats) of one tile with the epilogue. */
static inline __attribute__((always_inline)) void store_row(__m128 v, float *y, const float *res,
                                                            int ncols, const kn_wg_epi *e) {
  __mmask8 mk = (__mmask8)((1u << ncols) - 1u);
  if (res && e->res_first) v = _mm_add_ps(v, _mm_maskz_loadu_ps(mk, res));
  if (e->clamp) v = _mm_min_ps(_mm_max_ps(v, _mm_set1_ps(e->lo)), _mm_set1_ps(e->hi));
  if (res && !e->res_first) v = _mm_add_ps(v, _mm_maskz_loadu_ps(mk, res));
  if (ncols == 4) _mm_storeu_ps(y, v);
  else _mm_mask_storeu_ps(y, mk, v);
}

static void wg_store(V o[4][4], const kn_wg_lanes *ln, float *y, const float *res, int64_t ow,
                     const kn_wg_epi *e) {
  for (int a = 0; a < 4; a++) {
    /* z[k]'s 128-bit lane j = row a of tile 4j + k */
    __m512 t0 = _mm512_unpacklo_ps(o[a][0], o[a][1]), t1 = _mm512_unpackhi_ps(o[a][0], o[a][1]);
    __m512 t2 = _mm512_unpacklo_ps(o[a][2], o[a][3]), t3 = _mm512_unpackhi_ps(o[a][2], o[a][3]);
    __m512d z[4] = {
        _mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2)),
        _mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2)),
        _mm512_unpacklo_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)),
        _mm512_unpackhi_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)),
    };
#define WG_LANE(j, k)                                                                    \
  do {                                                                                   \
    int l = 4 * (j) + (k);                                                               \
    if (ln->nrows[l] > a) {                                                              \
      int64_t off = ln->out_off[l] + a * ow;                                             \
      store_row(_mm512_extractf32x4_ps(_mm512_castpd_ps(z[k]), j), y + off,              \
                res ? res + off : NULL, ln->ncols[l], e);                                \
    }                                                                                    \
  } while (0)
#define WG_LANES(j) \
  WG_LANE(j, 0);    \
  WG_LANE(j, 1);    \
  WG_LANE(j, 2);    \
  WG_LANE(j, 3)
    WG_LANES(0);
    WG_LANES(1);
    WG_LANES(2);
    WG_LANES(3);
#undef WG_LANES
#undef WG_LANE
  }
}

#include "kernels/conv/winograd-impl.h"
