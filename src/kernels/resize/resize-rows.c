/* Resize fast paths: the row loops over threads and the portable row
 * kernels.  The arithmetic mirrors src/ops/resize.c term by term (double
 * precision, the same additions in the same order, no contraction: the
 * build uses ISO C, where gcc does not fuse a * b + c), which is what makes
 * the results bit-identical to the reference. */
#include "resize-kernels.h"

#include <math.h>
#include <string.h>

/* Row buffers in scratch are padded to a cache line. */
static int64_t tmp_stride(int64_t w_in) { return (w_in + 7) & ~(int64_t)7; }

size_t kn_f32_resize_linear2d_scratch(int64_t w_in, int32_t threads) {
  return (size_t)tmp_stride(w_in) * sizeof(double) * (size_t)(threads < 1 ? 1 : threads);
}

static void h_pass_portable(const float *a, double w0, const float *b, double w1, double *tmp,
                            int64_t n) {
  for (int64_t j = 0; j < n; j++) {
    double acc = 0;
    if (a) acc += w0 * (double)a[j];
    if (b) acc += w1 * (double)b[j];
    tmp[j] = acc;
  }
}

static void w_pass_portable(const double *tmp, const kn_resize_taps *w, double extrap,
                            float *y) {
  for (int64_t o = 0; o < w->n_out; o++) {
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

static void nearest_row_portable(const float *row, const int32_t *idx, int64_t n,
                                 float extrap, float *y) {
  for (int64_t o = 0; o < n; o++) y[o] = idx[o] < 0 ? extrap : row[idx[o]];
}

static const kn_resize_rows rows_portable = {h_pass_portable, w_pass_portable,
                                             nearest_row_portable};

static const kn_resize_rows *rows_for(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return &kn_f32_resize_rows__avx512;
  if (isa == KN_ISA_AVX2) return &kn_f32_resize_rows__avx2;
#endif
  (void)isa;
  return &rows_portable;
}

typedef struct rs_args {
  const kn_resize_rows *k;
  const float *x;
  float *y;
  int64_t planes;
  const kn_resize_taps *h, *w;
  double extrap;
  char *scratch;
  int64_t ntasks;
  bool linear;
} rs_args;

/* Same source taps for output rows a and b of the H axis. */
static bool same_h(const kn_resize_taps *h, bool linear, int64_t a, int64_t b) {
  if (h->i0[a] != h->i0[b]) return false;
  if (!linear) return true;
  if (isnan(h->w0[a]) || isnan(h->w0[b])) return isnan(h->w0[a]) && isnan(h->w0[b]);
  return h->i1[a] == h->i1[b] && h->w0[a] == h->w0[b] && h->w1[a] == h->w1[b] &&
         signbit(h->w0[a]) == signbit(h->w0[b]) && signbit(h->w1[a]) == signbit(h->w1[b]);
}

/* Output rows [r0, r1) of the planes * oh rows. */
static void rs_task(void *arg, int64_t t, int32_t thread) {
  const rs_args *a = arg;
  const kn_resize_taps *h = a->h, *w = a->w;
  int64_t ih = h->n_in, iw = w->n_in, oh = h->n_out, ow = w->n_out;
  int64_t rows = a->planes * oh;
  int64_t r0 = t * rows / a->ntasks, r1 = (t + 1) * rows / a->ntasks;
  double *tmp = a->linear ? (double *)a->scratch + (size_t)thread * (size_t)tmp_stride(iw) : NULL;
  for (int64_t r = r0; r < r1; r++) {
    int64_t p = r / oh, o = r % oh;
    float *y = a->y + (size_t)r * (size_t)ow;
    if (r > r0 && o > 0 && !h->identity && same_h(h, a->linear, o, o - 1)) {
      memcpy(y, y - ow, (size_t)ow * sizeof *y);
      continue;
    }
    const float *plane = a->x + (size_t)(p * ih) * (size_t)iw;
    if (!a->linear) {
      if (h->i0[o] < 0) {
        for (int64_t j = 0; j < ow; j++) y[j] = (float)a->extrap;
      } else {
        a->k->nearest_row(plane + (size_t)h->i0[o] * (size_t)iw, w->i0, ow, (float)a->extrap,
                          y);
      }
      continue;
    }
    /* H pass into tmp (what the reference holds after its pass over H) */
    if (h->identity) {
      const float *xr = plane + (size_t)o * (size_t)iw;
      for (int64_t j = 0; j < iw; j++) tmp[j] = (double)xr[j];
    } else if (isnan(h->w0[o])) {
      for (int64_t j = 0; j < iw; j++) tmp[j] = a->extrap;
    } else {
      /* the reference skips zero weights when a row has more than one
       * element (its inner loop), and sums every tap when it has one */
      bool skip = iw != 1;
      double w0 = h->w0[o], w1 = h->w1[o];
      const float *ra = skip && w0 == 0 ? NULL : plane + (size_t)h->i0[o] * (size_t)iw;
      const float *rb = skip && w1 == 0 ? NULL : plane + (size_t)h->i1[o] * (size_t)iw;
      a->k->h_pass(ra, w0, rb, w1, tmp, iw);
    }
    if (w->identity) {
      for (int64_t j = 0; j < ow; j++) y[j] = (float)tmp[j];
    } else {
      a->k->w_pass(tmp, w, a->extrap, y);
    }
  }
}

/* Below this many output bytes the pool is not woken. */
#define RS_PAR_BYTES ((int64_t)128 << 10)

static void run(kn_isa isa, kn_pool *pool, const float *x, float *y, int64_t planes,
                const kn_resize_taps *h, const kn_resize_taps *w, double extrap, void *scratch,
                bool linear) {
  int64_t rows = planes * h->n_out;
  if (rows <= 0 || w->n_out <= 0) return;
  rs_args a = {rows_for(isa), x, y, planes, h, w, extrap, scratch, 1, linear};
  int32_t threads = kn_pool_threads(pool);
  if (threads > 1 && rows * w->n_out * 4 >= RS_PAR_BYTES) a.ntasks = rows < threads ? rows : threads;
  if (a.ntasks > 1) kn_pool_for(pool, a.ntasks, rs_task, &a);
  else rs_task(&a, 0, 0);
}

void kn_f32_resize_linear2d(kn_isa isa, kn_pool *pool, const float *x, float *y,
                            int64_t planes, const kn_resize_taps *h, const kn_resize_taps *w,
                            double extrap, void *scratch) {
  run(isa, pool, x, y, planes, h, w, extrap, scratch, true);
}

void kn_f32_resize_nearest2d(kn_isa isa, kn_pool *pool, const float *x, float *y,
                             int64_t planes, const kn_resize_taps *h, const kn_resize_taps *w,
                             float extrap) {
  run(isa, pool, x, y, planes, h, w, extrap, NULL, false);
}
