/* Fitting the IO model's per-family factors (iofit.h). */
#include "iofit.h"

#include <math.h>

static double loss(double f, const double *r, const double *o, const double *m, int32_t n) {
  double e = 0;
  for (int32_t i = 0; i < n; i++) {
    if (!(r[i] > 0) || !(m[i] > 0)) continue;
    double d = log(f * r[i] + (o[i] > 0 ? o[i] : 0)) - log(m[i]);
    e += d * d;
  }
  return e;
}

double kn_io_fit_factor(const double *roofline_s, const double *overhead_s,
                        const double *measured_s, int32_t n) {
  int32_t used = 0;
  for (int32_t i = 0; i < n; i++) used += roofline_s[i] > 0 && measured_s[i] > 0;
  if (!used) return 0;
  /* a grid over log f, then golden sections around its best point (the
   * loss is smooth in log f; the grid keeps a shallow second minimum,
   * which overheads can make, from trapping the search) */
  const double lo = log(1.0 / 64), hi = log(64.0);
  const int32_t steps = 96;
  double best = lo, best_e = INFINITY;
  for (int32_t k = 0; k <= steps; k++) {
    double x = lo + (hi - lo) * k / steps;
    double e = loss(exp(x), roofline_s, overhead_s, measured_s, n);
    if (e < best_e) {
      best_e = e;
      best = x;
    }
  }
  double h = (hi - lo) / steps;
  double a = best - h, b = best + h;
  const double g = 0.5 * (sqrt(5.0) - 1);
  double c = b - g * (b - a), d = a + g * (b - a);
  double fc = loss(exp(c), roofline_s, overhead_s, measured_s, n);
  double fd = loss(exp(d), roofline_s, overhead_s, measured_s, n);
  for (int32_t it = 0; it < 60 && b - a > 1e-7; it++) {
    if (fc < fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - g * (b - a);
      fc = loss(exp(c), roofline_s, overhead_s, measured_s, n);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + g * (b - a);
      fd = loss(exp(d), roofline_s, overhead_s, measured_s, n);
    }
  }
  return exp(0.5 * (a + b));
}

void kn_io_fit_factors(const kn_io_sample *s, int32_t n,
                       double factors[KN_MACHINE_FAMILIES][2]) {
  double *r = kn_calloc((size_t)n + 1, 3 * sizeof *r);
  for (int32_t f = 0; f < KN_MACHINE_FAMILIES; f++)
    for (int32_t t = 0; t < 2; t++) {
      factors[f][t] = 0;
      if (!r) continue;
      double *o = r + n + 1, *m = o + n + 1;
      int32_t k = 0;
      for (int32_t i = 0; i < n; i++)
        if (s[i].family == f && s[i].all_threads == (t == 1)) {
          r[k] = s[i].roofline_s;
          o[k] = s[i].overhead_s;
          m[k] = s[i].measured_s;
          k++;
        }
      factors[f][t] = kn_io_fit_factor(r, o, m, k);
    }
  free(r);
}
