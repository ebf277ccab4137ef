/* Tap rows (taprows.h): the strip builder, the task split, the portable
 * row kernels and the ISA dispatch. */
#include "kernels/conv/taprows.h"

/* Stride-2 rows: the columns both phases read from the input are split in
 * one vector pass (deint2), the edges element by element. */
static void strip_row2(const kn_taprow_fns *fns, const float *src, int64_t w, int64_t pl,
                       int64_t pw, float pad, float *row) {
  float *ph0 = row, *ph1 = row + pw;
  /* phase q element j reads src[2j + q - pl] */
  int64_t j0 = (pl + 1) / 2;                 /* first j with 2j - pl >= 0 */
  int64_t j1 = w + pl >= 1 ? (w + pl - 1) / 2 : 0; /* first j with 2j + 1 - pl >= w */
  if (j1 > pw) j1 = pw;
  if (j0 > j1) j0 = j1;
  for (int64_t q = 0; q < 2; q++) {
    float *ph = q ? ph1 : ph0;
    for (int64_t j = 0; j < j0; j++) {
      int64_t c = 2 * j + q - pl;
      ph[j] = c >= 0 && c < w ? src[c] : pad;
    }
    for (int64_t j = j1; j < pw; j++) {
      int64_t c = 2 * j + q - pl;
      ph[j] = c >= 0 && c < w ? src[c] : pad;
    }
  }
  if (j1 > j0) fns->deint2(src + 2 * j0 - pl, j1 - j0, ph0 + j0, ph1 + j0);
}

void kn_f32_taprow_strip(kn_isa isa, const float *x, int64_t h, int64_t w, int64_t iy0,
                         int64_t nrows, int64_t pl, int64_t sw, int64_t pw, float pad,
                         float *dst) {
  const kn_taprow_fns *fns = kn_f32_taprow_fns(isa);
  for (int64_t r = 0; r < nrows; r++) {
    int64_t iy = iy0 + r;
    float *row = dst + r * sw * pw;
    if (iy < 0 || iy >= h) {
      for (int64_t j = 0; j < sw * pw; j++) row[j] = pad;
      continue;
    }
    const float *src = x + iy * w;
    if (sw == 2) {
      strip_row2(fns, src, w, pl, pw, pad, row);
      continue;
    }
    for (int64_t q = 0; q < sw; q++) {
      float *ph = row + q * pw;
      /* element j reads src[j*sw + q - pl]: valid for j in [lo, hi) */
      int64_t first = q - pl; /* input column of j = 0 */
      int64_t lo = first >= 0 ? 0 : (-first + sw - 1) / sw;
      int64_t hi = first >= w ? 0 : (w - 1 - first) / sw + 1;
      if (hi > pw) hi = pw;
      if (lo > hi) lo = hi;
      for (int64_t j = 0; j < lo; j++) ph[j] = pad;
      if (sw == 1) {
        if (hi > lo) memcpy(ph + lo, src + first + lo, (size_t)(hi - lo) * sizeof(float));
      } else {
        for (int64_t j = lo; j < hi; j++) ph[j] = src[first + j * sw];
      }
      for (int64_t j = hi; j < pw; j++) ph[j] = pad;
    }
  }
}

int64_t kn_taprow_chunk_rows(int64_t planes, int64_t oh, int64_t sh, int64_t kh, int64_t dh,
                             int64_t sw, int64_t pw, int32_t threads, const kn_caches *caches) {
  /* At least 4 tasks per thread so a slow thread does not hold the loop
   * up; each chunk repeats the (kh-1)*dh halo rows, so split rows only
   * when there are too few planes. */
  int64_t want = 4 * (int64_t)threads;
  int64_t chunks = planes >= want ? 1 : (want + planes - 1) / planes;
  if (chunks > oh) chunks = oh;
  int64_t rows = (oh + chunks - 1) / chunks;
  /* Keep a strip under an eighth of the L2 (kn_caches; 128 KiB of 1 MiB),
   * well inside it. */
  int64_t strip = (int64_t)(kn_caches_or_common(caches).l2 / 8 / sizeof(float));
  while (rows > 1 && ((rows - 1) * sh + (kh - 1) * dh + 1) * sw * pw > strip)
    rows = (rows + 1) / 2;
  return rows < 1 ? 1 : rows;
}

/* Portable kernels: blocks of 64 outputs accumulated in a local array the
 * compiler keeps in vector registers. */
#define PBLK 64

static void max_portable(const float *const *src, int32_t ntaps, float *y, int64_t n) {
  for (int64_t i0 = 0; i0 < n; i0 += PBLK) {
    int64_t nb = n - i0 < PBLK ? n - i0 : PBLK;
    float acc[PBLK];
    memcpy(acc, src[0] + i0, (size_t)nb * sizeof(float));
    for (int32_t t = 1; t < ntaps; t++) {
      const float *s = src[t] + i0;
      for (int64_t i = 0; i < nb; i++) acc[i] = s[i] > acc[i] ? s[i] : acc[i];
    }
    memcpy(y + i0, acc, (size_t)nb * sizeof(float));
  }
}

static void avg_portable(const float *const *src, int32_t ntaps, const float *dx, float dy,
                         float *y, int64_t n) {
  for (int64_t i0 = 0; i0 < n; i0 += PBLK) {
    int64_t nb = n - i0 < PBLK ? n - i0 : PBLK;
    float acc[PBLK];
    memcpy(acc, src[0] + i0, (size_t)nb * sizeof(float));
    for (int32_t t = 1; t < ntaps; t++) {
      const float *s = src[t] + i0;
      for (int64_t i = 0; i < nb; i++) acc[i] += s[i];
    }
    for (int64_t i = 0; i < nb; i++) y[i0 + i] = acc[i] / (dy * dx[i0 + i]);
  }
}

static void deint2_portable(const float *src, int64_t n, float *even, float *odd) {
  for (int64_t j = 0; j < n; j++) {
    even[j] = src[2 * j];
    odd[j] = src[2 * j + 1];
  }
}

static const kn_taprow_fns taprow_portable = {max_portable, avg_portable,
                                              deint2_portable};

const kn_taprow_fns *kn_f32_taprow_fns(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return &kn_f32_taprow__avx512;
  if (isa == KN_ISA_AVX2) return &kn_f32_taprow__avx2;
#endif
  (void)isa;
  return &taprow_portable;
}
