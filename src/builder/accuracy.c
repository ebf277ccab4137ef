/* Accuracy against a reference, seeded inputs and samples (builder.h):
 * the definitions kn_validate, kn_model_build_budgeted and the CLI's
 * compare share. */
#include "builder.h"

#include <math.h>
#include <sys/resource.h>
#include <time.h>

/* ---- seeded inputs ----------------------------------------------------------- */

kn_status kn_random_input(const kn_value_info *vi, const char *const *shapes, int32_t n_shapes,
                          uint64_t *rng, kn_tensor *t, kn_error *err) {
  int64_t dims[KN_MAX_RANK];
  int32_t rank = vi->rank < 0 ? 0 : vi->rank;
  for (int32_t d = 0; d < rank; d++) dims[d] = vi->dims[d] < 0 ? 1 : vi->dims[d];
  for (int32_t k = 0; k < n_shapes; k++) {
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
  switch (dt) {
  case KN_DTYPE_F32:
  case KN_DTYPE_F64:
  case KN_DTYPE_I64:
  case KN_DTYPE_I32:
  case KN_DTYPE_BOOL:
  case KN_DTYPE_U8:
  case KN_DTYPE_I8: break;
  default:
    return kn_fail(err, KN_ERR_UNSUPPORTED,
                   "input '%s' has dtype %s: give it with --input NAME=FILE", vi->name,
                   kn_dtype_name(dt) ? kn_dtype_name(dt) : "unknown");
  }
  kn_status st = kn_tensor_alloc(t, dt, rank, dims, err);
  if (st) return st;
  int64_t n = kn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = kn_rng_next(rng);
    double u = (double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    switch (dt) {
    case KN_DTYPE_F32: ((float *)t->data)[i] = (float)u; break;
    case KN_DTYPE_F64: ((double *)t->data)[i] = u; break;
    case KN_DTYPE_I64: ((int64_t *)t->data)[i] = (int64_t)(x >> 63); break;
    case KN_DTYPE_I32: ((int32_t *)t->data)[i] = (int32_t)(x >> 63); break;
    default: ((uint8_t *)t->data)[i] = (uint8_t)(x >> 63); break; /* bool, u8, i8 */
    }
  }
  return KN_OK;
}

/* ---- comparison ------------------------------------------------------------------ */

double kn_elem_f64(const kn_tensor *t, int64_t i) {
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

bool kn_diff_tensors(const kn_tensor *ref, const kn_tensor *opt, double atol, double rtol,
                     kn_diff *out) {
  memset(out, 0, sizeof *out);
  out->worst = -1;
  bool same_shape = ref->dtype == opt->dtype && ref->rank == opt->rank;
  for (int32_t d = 0; same_shape && d < ref->rank; d++) same_shape = ref->dims[d] == opt->dims[d];
  if (!same_shape) return false;
  int64_t n = kn_tensor_numel(ref), bad = 0, worst = -1;
  double max_abs = 0, max_rel = 0, dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < n; i++) {
    double b = kn_elem_f64(ref, i), a = kn_elem_f64(opt, i);
    if (isnan(a) && isnan(b)) continue;
    double d = fabs(a - b);
    if (!(d <= atol + rtol * fabs(b))) {
      bad++;
      if (worst < 0 || d > fabs(kn_elem_f64(opt, worst) - kn_elem_f64(ref, worst))) worst = i;
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

int64_t kn_argmax_rows(const kn_tensor *t, int64_t *pred, int64_t cap) {
  int64_t n = kn_tensor_numel(t), c = t->rank > 0 ? t->dims[t->rank - 1] : 1;
  if (n <= 0 || c <= 0 || isnan(kn_elem_f64(t, 0))) return 0;
  int64_t rows = n / c;
  for (int64_t r = 0; r < rows && r < cap; r++) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; j++)
      if (kn_elem_f64(t, r * c + j) > kn_elem_f64(t, r * c + best)) best = j;
    pred[r] = best;
  }
  return rows;
}

/* ---- statistics ------------------------------------------------------------------- */

double kn_percentile(const double *sorted, int64_t n, double p) {
  double idx = (double)(n - 1) * p;
  int64_t lo = (int64_t)floor(idx), hi = (int64_t)ceil(idx);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - (double)lo);
}

int kn_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double kn_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t kn_peak_rss(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (uint64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

/* ---- samples ------------------------------------------------------------------------ */

void kn_samples_init(kn_samples *s) {
  memset(s, 0, sizeof *s);
  s->seed = 1;
}

const char *kn_samples_name(const kn_samples *s, int32_t k) {
  return s && s->count > 0 && s->names && k >= 0 && k < s->count ? s->names[k] : NULL;
}

kn_status kn_samples_check(const kn_samples *s, int32_t nin, const char *label, kn_error *err) {
  if (!s) return KN_OK;
  if (s->count < 0)
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s: a negative sample count (%d)", label, s->count);
  if (s->n_labels < 0 || (s->n_labels > 0 && !s->labels))
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s: %lld labels but no array of them", label,
                   (long long)s->n_labels);
  if (s->count == 0) return KN_OK;
  if (!s->tensors && !s->read)
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: %d samples but neither tensors nor a reader for them", label, s->count);
  if (s->tensors && s->n_inputs != nin)
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: the samples have %d input%s each, the model takes %d", label,
                   s->n_inputs, s->n_inputs == 1 ? "" : "s", nin);
  return KN_OK;
}

kn_status kn_samples_get(const kn_samples *s, int32_t k, int32_t nin, kn_tensor *ins,
                         kn_error *err) {
  memset(ins, 0, (size_t)nin * sizeof *ins);
  if (s->tensors) {
    for (int32_t i = 0; i < nin; i++) ins[i] = kn_tensor_view(&s->tensors[(int64_t)k * nin + i]);
    return KN_OK;
  }
  kn_status st = s->read(s->read_arg, k, ins, nin, err);
  if (st) {
    kn_samples_put(nin, ins);
    if (err && !err->status) err->status = st;
    if (err && !err->msg[0]) {
      const char *name = kn_samples_name(s, k);
      if (name) snprintf(err->msg, sizeof err->msg, "%s: cannot read the sample", name);
      else snprintf(err->msg, sizeof err->msg, "sample %d: cannot be read", k);
    }
  }
  return st;
}

void kn_samples_put(int32_t nin, kn_tensor *ins) {
  for (int32_t i = 0; ins && i < nin; i++) kn_tensor_release(&ins[i]);
}

void kn_samples_text(const kn_samples *s, char *buf, size_t n) {
  if (!s || s->count == 0)
    snprintf(buf, n, "1 generated sample (seed %llu)", (unsigned long long)(s ? s->seed : 1));
  else if (s->source)
    snprintf(buf, n, "%d sample%s from %s", s->count, s->count == 1 ? "" : "s", s->source);
  else snprintf(buf, n, "%d sample%s", s->count, s->count == 1 ? "" : "s");
}
