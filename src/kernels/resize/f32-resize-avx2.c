/* Resize row kernels with AVX2: 4 doubles per vector for the linear passes
 * (double, as the reference), 8 floats per gather for nearest; tails go
 * element by element with the same arithmetic.  Order as the reference:
 * (0 + w0 * a) + w1 * b, no FMA. */
#include <immintrin.h>
#include <math.h>

#include "resize-kernels.h"

static void h_pass(const float *a, double w0, const float *b, double w1, double *tmp,
                   int64_t n) {
  const __m256d z = _mm256_setzero_pd(), v0 = _mm256_set1_pd(w0), v1 = _mm256_set1_pd(w1);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m256d acc = z;
    if (a) acc = _mm256_add_pd(acc, _mm256_mul_pd(v0, _mm256_cvtps_pd(_mm_loadu_ps(a + j))));
    if (b) acc = _mm256_add_pd(acc, _mm256_mul_pd(v1, _mm256_cvtps_pd(_mm_loadu_ps(b + j))));
    _mm256_storeu_pd(tmp + j, acc);
  }
  for (; j < n; j++) {
    double acc = 0;
    if (a) acc += w0 * (double)a[j];
    if (b) acc += w1 * (double)b[j];
    tmp[j] = acc;
  }
}

static void w_pass(const double *tmp, const kn_resize_taps *w, double extrap, float *y) {
  const __m256d z = _mm256_setzero_pd(), e = _mm256_set1_pd(extrap);
  int64_t n = w->n_out, o = 0;
  for (; o + 4 <= n; o += 4) {
    __m128i i0 = _mm_loadu_si128((const __m128i *)(w->i0 + o));
    __m128i i1 = _mm_loadu_si128((const __m128i *)(w->i1 + o));
    __m256d w0 = _mm256_loadu_pd(w->w0 + o), w1 = _mm256_loadu_pd(w->w1 + o);
    __m256d t0 = _mm256_i32gather_pd(tmp, i0, 8), t1 = _mm256_i32gather_pd(tmp, i1, 8);
    __m256d acc = _mm256_add_pd(_mm256_add_pd(z, _mm256_mul_pd(w0, t0)), _mm256_mul_pd(w1, t1));
    acc = _mm256_blendv_pd(acc, e, _mm256_cmp_pd(w0, w0, _CMP_UNORD_Q));
    _mm_storeu_ps(y + o, _mm256_cvtpd_ps(acc));
  }
  for (; o < n; o++) {
    if (isnan(w->w0[o])) {
      y[o] = (float)extrap;
      continue;
    }
    double acc = 0;
    acc += w->w0[o] * tmp[w->i0[o]];
    acc += w->w1[o] * tmp[w->i1[o]];
    y[o] = (float)acc;
  }
}

static void nearest_row(const float *row, const int32_t *idx, int64_t n, float extrap,
                        float *y) {
  const __m256 e = _mm256_set1_ps(extrap);
  const __m256i minus1 = _mm256_set1_epi32(-1);
  int64_t o = 0;
  for (; o + 8 <= n; o += 8) {
    __m256i ix = _mm256_loadu_si256((const __m256i *)(idx + o));
    __m256 in = _mm256_castsi256_ps(_mm256_cmpgt_epi32(ix, minus1));
    _mm256_storeu_ps(y + o, _mm256_mask_i32gather_ps(e, row, ix, in, 4));
  }
  for (; o < n; o++) y[o] = idx[o] < 0 ? extrap : row[idx[o]];
}

const kn_resize_rows kn_f32_resize_rows__avx2 = {h_pass, w_pass, nearest_row};
