/* What kiln compare and kiln validate share: the seeded inputs they
 * generate and the comparison of an output with its reference. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

kn_status kn_cli_random_input(const kn_value_info *vi, const char *const *shapes, int n_shapes,
                              kn_cli_rng *r, kn_tensor *t, kn_error *err) {
  int64_t dims[KN_MAX_RANK];
  int32_t rank = vi->rank < 0 ? 0 : vi->rank;
  for (int32_t d = 0; d < rank; d++) dims[d] = vi->dims[d] < 0 ? 1 : vi->dims[d];
  for (int k = 0; k < n_shapes; k++) {
    const char *eq = strrchr(shapes[k], '=');
    if (!eq || strlen(vi->name) != (size_t)(eq - shapes[k]) ||
        strncmp(vi->name, shapes[k], (size_t)(eq - shapes[k])))
      continue;
    rank = 0;
    for (const char *p = eq + 1; *p && rank < KN_MAX_RANK;) {
      char *end;
      dims[rank++] = strtoll(p, &end, 10);
      p = *end ? end + 1 : end;
    }
  }
  kn_dtype dt = vi->dtype ? vi->dtype : KN_DTYPE_F32;
  kn_status st = kn_tensor_alloc(t, dt, rank, dims, err);
  if (st) return st;
  int64_t n = kn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = kn_cli_rng_next(r);
    double u = (double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    switch (dt) {
    case KN_DTYPE_F32: ((float *)t->data)[i] = (float)u; break;
    case KN_DTYPE_F64: ((double *)t->data)[i] = u; break;
    case KN_DTYPE_I64: ((int64_t *)t->data)[i] = (int64_t)(x >> 63); break;
    case KN_DTYPE_I32: ((int32_t *)t->data)[i] = (int32_t)(x >> 63); break;
    case KN_DTYPE_BOOL:
    case KN_DTYPE_U8:
    case KN_DTYPE_I8: ((uint8_t *)t->data)[i] = (uint8_t)(x >> 63); break;
    default:
      kn_tensor_release(t);
      snprintf(err->msg, sizeof err->msg,
               "input '%s' has dtype %s: give it with --input NAME=FILE", vi->name,
               kn_dtype_name(dt));
      err->status = KN_ERR_UNSUPPORTED;
      return KN_ERR_UNSUPPORTED;
    }
  }
  return KN_OK;
}

double kn_cli_elem_f64(const kn_tensor *t, int64_t i) {
  switch (t->dtype) {
  case KN_DTYPE_F32: return ((const float *)t->data)[i];
  case KN_DTYPE_F64: return ((const double *)t->data)[i];
  case KN_DTYPE_I64: return (double)((const int64_t *)t->data)[i];
  case KN_DTYPE_I32: return ((const int32_t *)t->data)[i];
  case KN_DTYPE_BOOL:
  case KN_DTYPE_U8: return ((const uint8_t *)t->data)[i];
  case KN_DTYPE_I8: return ((const int8_t *)t->data)[i];
  default: return NAN;
  }
}

bool kn_cli_diff_tensors(const kn_tensor *ref, const kn_tensor *opt, double atol, double rtol,
                         kn_cli_diff *out) {
  memset(out, 0, sizeof *out);
  out->worst = -1;
  bool same_shape = ref->dtype == opt->dtype && ref->rank == opt->rank;
  for (int32_t d = 0; same_shape && d < ref->rank; d++) same_shape = ref->dims[d] == opt->dims[d];
  if (!same_shape) return false;
  int64_t n = kn_tensor_numel(ref), bad = 0, worst = -1;
  double max_abs = 0, max_rel = 0, dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < n; i++) {
    double b = kn_cli_elem_f64(ref, i), a = kn_cli_elem_f64(opt, i);
    if (isnan(a) && isnan(b)) continue;
    double d = fabs(a - b);
    if (!(d <= atol + rtol * fabs(b))) {
      bad++;
      if (worst < 0 ||
          d > fabs(kn_cli_elem_f64(opt, worst) - kn_cli_elem_f64(ref, worst)))
        worst = i;
    }
    if (d > max_abs || isnan(d)) max_abs = isnan(d) ? INFINITY : d;
    double rel = d / fmax(fabs(b), atol);
    if (rel > max_rel || isnan(rel)) max_rel = isnan(rel) ? INFINITY : rel;
    dot += a * b;
    na += a * a;
    nb += b * b;
  }
  out->n = n;
  out->bad = bad;
  out->worst = worst;
  out->max_abs = max_abs;
  out->max_rel = max_rel;
  out->cosine = na > 0 && nb > 0 ? dot / sqrt(na * nb) : (na == nb ? 1.0 : 0.0);
  return true;
}
