/* Resize row kernels with AVX-512: 8 doubles per vector for the linear
 * passes (the reference computes in double; float lanes would round
 * differently), 16 floats per gather for nearest.  Tails use masks.  The
 * additions keep the reference's order: (0 + w0 * a) + w1 * b, no FMA. */
#include <immintrin.h>

#include "resize-kernels.h"

static void h_pass(const float *a, double w0, const float *b, double w1, double *tmp,
                   int64_t n) {
  const __m512d z = _mm512_setzero_pd(), v0 = _mm512_set1_pd(w0), v1 = _mm512_set1_pd(w1);
  for (int64_t j = 0; j < n; j += 8) {
    __mmask8 m = n - j >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - j)) - 1u);
    __m512d acc = z;
    if (a) acc = _mm512_add_pd(acc, _mm512_mul_pd(v0, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, a + j))));
    if (b) acc = _mm512_add_pd(acc, _mm512_mul_pd(v1, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, b + j))));
    _mm512_mask_storeu_pd(tmp + j, m, acc);
  }
}

static void w_pass(const double *tmp, const kn_resize_taps *w, double extrap, float *y) {
  const __m512d z = _mm512_setzero_pd(), e = _mm512_set1_pd(extrap);
  int64_t n = w->n_out;
  for (int64_t o = 0; o < n; o += 8) {
    __mmask8 m = n - o >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - o)) - 1u);
    __m256i i0 = _mm256_maskz_loadu_epi32(m, w->i0 + o);
    __m256i i1 = _mm256_maskz_loadu_epi32(m, w->i1 + o);
    __m512d w0 = _mm512_maskz_loadu_pd(m, w->w0 + o), w1 = _mm512_maskz_loadu_pd(m, w->w1 + o);
    __m512d t0 = _mm512_mask_i32gather_pd(z, m, i0, tmp, 8);
    __m512d t1 = _mm512_mask_i32gather_pd(z, m, i1, tmp, 8);
    __m512d acc = _mm512_add_pd(_mm512_add_pd(z, _mm512_mul_pd(w0, t0)), _mm512_mul_pd(w1, t1));
    /* a NaN w0 marks an output outside the roi */
    acc = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(w0, w0, _CMP_UNORD_Q), acc, e);
    _mm256_mask_storeu_ps(y + o, m, _mm512_cvtpd_ps(acc));
  }
}

static void nearest_row(const float *row, const int32_t *idx, int64_t n, float extrap,
                        float *y) {
  const __m512 e = _mm512_set1_ps(extrap);
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t o = 0; o < n; o += 16) {
    __mmask16 m = n - o >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - o)) - 1u);
    __m512i ix = _mm512_maskz_loadu_epi32(m, idx + o);
    __mmask16 in = _mm512_mask_cmpge_epi32_mask(m, ix, zero);
    __m512 v = _mm512_mask_i32gather_ps(e, in, ix, row, 4);
    _mm512_mask_storeu_ps(y + o, m, v);
  }
}

const kn_resize_rows kn_f32_resize_rows__avx512 = {h_pass, w_pass, nearest_row};
