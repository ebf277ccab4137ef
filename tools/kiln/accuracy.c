/* What kiln compare, validate, build and debug share: the seeded inputs
 * they generate, the comparison of an output with its reference, labels
 * and top-1 accuracy, and the precision trials (cli.h). */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
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

/* ---- labels ----------------------------------------------------------------- */

int kn_cli_labels_read(const char *path, int64_t **labels, int64_t *n) {
  *labels = NULL;
  *n = 0;
  FILE *f = fopen(path, "r");
  if (!f) return kn_cli_fail("--labels %s: %s", path, strerror(errno));
  int64_t cap = 0, line_no = 0;
  char line[256];
  int rc = KN_EXIT_OK;
  while (fgets(line, sizeof line, f)) {
    line_no++;
    char *p = line;
    while (isspace((unsigned char)*p)) p++;
    if (!*p || *p == '#') continue;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    if (end == p || *end || errno || v < 0) {
      p[strcspn(p, "\r\n")] = 0;
      rc = kn_cli_fail("%s:%lld: '%.40s' is not a class label; expected one integer >= 0 "
                       "per line", path, (long long)line_no, p);
      break;
    }
    if (*n == cap) {
      cap = cap ? cap * 2 : 256;
      int64_t *nl = realloc(*labels, (size_t)cap * sizeof *nl);
      if (!nl) {
        rc = kn_cli_fail("out of memory reading %s", path);
        break;
      }
      *labels = nl;
    }
    (*labels)[(*n)++] = v;
  }
  if (!rc && ferror(f)) rc = kn_cli_fail("--labels %s: read error", path);
  if (!rc && *n == 0) rc = kn_cli_fail("--labels %s: no labels in it", path);
  fclose(f);
  if (rc) {
    free(*labels);
    *labels = NULL;
    *n = 0;
  }
  return rc;
}

int64_t kn_cli_argmax_rows(const kn_tensor *t, int64_t *pred, int64_t cap) {
  int64_t n = kn_tensor_numel(t), c = t->rank > 0 ? t->dims[t->rank - 1] : 1;
  if (n <= 0 || c <= 0 || isnan(kn_cli_elem_f64(t, 0))) return 0;
  int64_t rows = n / c;
  for (int64_t r = 0; r < rows && r < cap; r++) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; j++)
      if (kn_cli_elem_f64(t, r * c + j) > kn_cli_elem_f64(t, r * c + best)) best = j;
    pred[r] = best;
  }
  return rows;
}

/* ---- precision trials --------------------------------------------------------- */

void kn_cli_shell_quote(const char *s, char *buf, size_t n) {
  size_t o = 0;
  if (n < 3) {
    if (n) buf[0] = 0;
    return;
  }
  buf[o++] = '\'';
  for (; *s && o + 6 < n; s++) {
    if (*s == '\'') {
      memcpy(buf + o, "'\\''", 4);
      o += 4;
    } else {
      buf[o++] = *s;
    }
  }
  buf[o++] = '\'';
  buf[o] = 0;
}

void kn_cli_budget_text(const kn_cli_budget *b, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = 0;
  if (b->has_cos && o < n) o += (size_t)snprintf(buf + o, n - o, "--min-cosine %.9g", b->min_cosine);
  if (b->has_abs && o < n)
    o += (size_t)snprintf(buf + o, n - o, "%s--max-abs-error %.6g", o ? " " : "", b->max_abs_error);
  if (b->has_drop && o < n)
    snprintf(buf + o, n - o, "%s--max-accuracy-drop %.6g", o ? " " : "", b->max_drop);
}

void kn_cli_trial_text(const kn_cli_trials *t, const kn_cli_trial *r, char *buf, size_t n) {
  int k = snprintf(buf, n, "cosine %.9f max_abs %.4g", r->cosine, r->max_abs);
  if (t->labels && k >= 0 && (size_t)k < n)
    snprintf(buf + k, n - (size_t)k, " top-1 %.2f%% (%+.2f)", r->accuracy, 0.0 - r->drop + 0.0);
}

void kn_cli_trials_close(kn_cli_trials *t) {
  for (int32_t k = 0; t->inputs && k < t->n_samples * t->nin; k++) kn_tensor_release(&t->inputs[k]);
  for (int32_t k = 0; t->ref && k < t->n_samples * t->nout; k++) kn_tensor_release(&t->ref[k]);
  free(t->inputs);
  free(t->ref);
  free(t->labels);
  for (int32_t i = 0; i < t->n_steps; i++) {
    free(t->steps[i]);
    free(t->patterns[i]);
  }
  free(t->steps);
  free(t->patterns);
  free(t->precision);
  free(t->ov);
  memset(t, 0, sizeof *t);
}

/* Top-1 accuracy (percent) of output 0 of every sample against the labels. */
static double top1(const kn_cli_trials *t, const kn_tensor *outs) {
  int64_t correct = 0, seen = 0;
  for (int32_t k = 0; k < t->n_samples; k++) {
    const kn_tensor *o = &outs[k * t->nout];
    int64_t c = o->rank > 0 ? o->dims[o->rank - 1] : 1;
    int64_t rows = c > 0 ? kn_tensor_numel(o) / c : 0;
    int64_t *pred = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *pred);
    if (!pred) return NAN;
    rows = kn_cli_argmax_rows(o, pred, rows);
    for (int64_t r = 0; r < rows && seen < t->n_labels; r++, seen++)
      correct += pred[r] == t->labels[seen];
    free(pred);
  }
  return seen ? 100.0 * (double)correct / (double)seen : NAN;
}

static bool keep_copy(const kn_tensor *t, kn_tensor *out) {
  kn_error err;
  if (!t || t->dtype == KN_DTYPE_STRING) {
    memset(out, 0, sizeof *out);
    out->rank = -1;
    return true;
  }
  if (kn_tensor_alloc(out, t->dtype, t->rank, t->dims, &err)) return false;
  if (t->nbytes) memcpy(out->data, t->data, out->nbytes < t->nbytes ? out->nbytes : t->nbytes);
  return true;
}

/* Runs every sample through m, keeping the outputs in outs. */
static int run_all(const kn_cli_trials *t, const kn_model *m, kn_tensor *outs, const char *what) {
  kn_error err = {0};
  kn_context *ctx = NULL;
  int rc = KN_EXIT_OK;
  if (kn_context_create(m, &ctx, &err) || kn_cli_set_threads(ctx, t->threads, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  for (int32_t k = 0; k < t->n_samples && !rc; k++) {
    for (int32_t i = 0; i < t->nin && !rc; i++)
      if (kn_context_set_input(ctx, i, &t->inputs[k * t->nin + i], &err))
        rc = kn_cli_fail("%s (%s), sample %d: %s", t->model, what, k, err.msg);
    if (!rc && kn_context_run(ctx, &err))
      rc = kn_cli_fail("%s (%s), sample %d: %s", t->model, what, k, err.msg);
    for (int32_t o = 0; o < t->nout && !rc; o++)
      if (!keep_copy(kn_context_output(ctx, o), &outs[k * t->nout + o]))
        rc = kn_cli_fail("out of memory keeping the outputs of %s", t->model);
  }
done:
  kn_context_free(ctx);
  return rc;
}

static int read_samples(kn_cli_trials *t, const kn_model *m, const char *data,
                        const char *const *shapes, int n_shapes, uint64_t seed) {
  kn_error err = {0};
  const char **names = calloc((size_t)t->nin + 1, sizeof *names);
  if (!names) return kn_cli_fail("out of memory");
  int rc = KN_EXIT_OK;
  for (int32_t i = 0; i < t->nin; i++) {
    kn_value_info vi;
    names[i] = kn_model_input_info(m, i, &vi) == KN_OK ? vi.name : "?";
  }
  kn_cli_samples s = {0};
  if (data) {
    if ((rc = kn_cli_samples_find(data, t->nin, &s))) goto done;
    t->n_samples = s.n;
    snprintf(t->data_text, sizeof t->data_text, "%d sample%s from %s", s.n, s.n == 1 ? "" : "s",
             data);
  } else {
    t->n_samples = 1;
    snprintf(t->data_text, sizeof t->data_text, "1 generated sample (seed %llu)",
             (unsigned long long)seed);
  }
  t->inputs = calloc((size_t)t->n_samples * (size_t)t->nin + 1, sizeof *t->inputs);
  if (!t->inputs) {
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  if (data) {
    for (int32_t k = 0; k < s.n && !rc; k++)
      rc = kn_cli_sample_read(s.dirs[k], t->model, names, t->nin, &t->inputs[k * t->nin]);
  } else {
    kn_cli_rng r = {seed * 0x9E3779B97F4A7C15ull + 1};
    for (int32_t i = 0; i < t->nin && !rc; i++) {
      kn_value_info vi;
      if (kn_model_input_info(m, i, &vi) ||
          kn_cli_random_input(&vi, shapes, n_shapes, &r, &t->inputs[i], &err))
        rc = kn_cli_fail("%s: %s", t->model, err.msg[0] ? err.msg : "cannot read an input");
    }
  }
done:
  kn_cli_samples_free(&s);
  free(names);
  return rc;
}

int kn_cli_trials_open(kn_cli_trials *t, const char *model, const char *label,
                       const kn_build_options *bo, const char *data, const char *labels,
                       const char *const *shapes, int n_shapes, uint64_t seed,
                       int64_t threads, const kn_cli_budget *budget) {
  memset(t, 0, sizeof *t);
  t->model = model;
  t->label = label;
  t->bo = *bo;
  t->budget = *budget;
  t->threads = threads;
  t->ref_accuracy = -1;
  kn_error err = {0};
  kn_model *m = NULL;
  int rc = KN_EXIT_OK;
  if (kn_model_load(model, &m, &err)) return kn_cli_error(&err);
  if (kn_model_format_version(m) != 0) {
    kn_model_free(m);
    return kn_cli_fail("%s is an engine: %s takes the ONNX model (the fp32 reference and the "
                       "trial builds come from it)", model, label);
  }
  t->nin = kn_model_input_count(m);
  t->nout = kn_model_output_count(m);
  if ((rc = read_samples(t, m, data, shapes, n_shapes, seed))) goto done;
  /* the fp32 reference: the graph as imported, as validate's */
  kn_build_options rb;
  kn_build_options_init(&rb);
  rb.shapes = shapes;
  rb.n_shapes = n_shapes;
  rb.no_optimize = 1;
  rb.machine = bo->machine;
  if (kn_model_build(m, &rb, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  t->ref = calloc((size_t)t->n_samples * (size_t)t->nout + 1, sizeof *t->ref);
  if (!t->ref) {
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  if ((rc = run_all(t, m, t->ref, "reference path"))) goto done;
  if (budget->has_drop) {
    char path[4096];
    if (!labels) {
      if (!data) {
        rc = kn_cli_fail("%s: --max-accuracy-drop needs labelled samples: give --data DIR "
                         "(with DIR/labels.txt, or --labels FILE)", label);
        goto done;
      }
      snprintf(path, sizeof path, "%s/labels.txt", data);
      labels = path;
    }
    if ((rc = kn_cli_labels_read(labels, &t->labels, &t->n_labels))) goto done;
    int64_t rows = 0;
    for (int32_t k = 0; k < t->n_samples; k++) {
      const kn_tensor *o = &t->ref[k * t->nout];
      int64_t c = o->rank > 0 ? o->dims[o->rank - 1] : 1;
      if (o->rank < 0 || c <= 0) {
        rc = kn_cli_fail("%s: output 0 is not a numeric tensor: top-1 accuracy needs logits",
                         model);
        goto done;
      }
      rows += kn_tensor_numel(o) / c;
    }
    if (rows != t->n_labels) {
      rc = kn_cli_fail("%s: %lld label%s for %lld prediction%s (%s; output 0's rows): one "
                       "label per row, in sample order", labels, (long long)t->n_labels,
                       t->n_labels == 1 ? "" : "s", (long long)rows, rows == 1 ? "" : "s",
                       t->data_text);
      goto done;
    }
    t->ref_accuracy = top1(t, t->ref);
  }
  t->ov = calloc((size_t)bo->n_layer_precisions + 1, sizeof *t->ov);
  if (!t->ov) rc = kn_cli_fail("out of memory");
done:
  kn_model_free(m);
  return rc;
}

/* NAME with fnmatch's special characters escaped: a pattern only NAME matches. */
static char *exact_pattern(const char *name) {
  size_t n = strlen(name);
  char *p = malloc(2 * n + 1), *o = p;
  if (!p) return NULL;
  for (const char *s = name; *s; s++) {
    if (strchr("*?[]\\", *s)) *o++ = '\\';
    *o++ = *s;
  }
  *o = 0;
  return p;
}

static int record_steps(kn_cli_trials *t, const kn_model *m) {
  int32_t n = kn_model_step_count(m), k = 0;
  t->steps = calloc((size_t)n + 1, sizeof *t->steps);
  t->patterns = calloc((size_t)n + 1, sizeof *t->patterns);
  t->precision = calloc((size_t)n + 1, sizeof *t->precision);
  const char **ov = realloc(t->ov, ((size_t)t->bo.n_layer_precisions + (size_t)n + 1) * sizeof *ov);
  if (ov) t->ov = ov;
  if (!t->steps || !t->patterns || !t->precision || !ov) return kn_cli_fail("out of memory");
  for (int32_t i = 0; i < n; i++) {
    kn_step_info si;
    if (kn_model_step_info(m, i, &si)) continue;
    if (si.precision != KN_PRECISION_BF16 && si.precision != KN_PRECISION_FP16 &&
        si.precision != KN_PRECISION_INT8)
      continue;
    t->steps[k] = strdup(si.name);
    char *pat = exact_pattern(si.name);
    t->patterns[k] = pat ? malloc(strlen(pat) + 16) : NULL;
    if (!t->steps[k] || !t->patterns[k]) {
      free(t->steps[k]);
      free(pat);
      return kn_cli_fail("out of memory");
    }
    /* PATTERN=: the precision is appended per trial */
    snprintf(t->patterns[k], strlen(pat) + 16, "%s=", pat);
    free(pat);
    t->precision[k] = si.precision;
    t->n_steps = ++k;
  }
  return KN_EXIT_OK;
}

int kn_cli_trials_run(kn_cli_trials *t, const bool *fp32, kn_cli_trial *r, kn_model **keep) {
  kn_error err = {0};
  kn_model *m = NULL;
  kn_tensor *outs = NULL;
  char **owned = NULL;
  int rc = KN_EXIT_OK;
  if (keep) *keep = NULL;
  memset(r, 0, sizeof *r);
  kn_build_options bo = t->bo;
  int32_t n_ov = 0;
  for (int32_t i = 0; i < t->bo.n_layer_precisions; i++) t->ov[n_ov++] = t->bo.layer_precisions[i];
  if (fp32 && !t->steps) /* a programmer error: the requested build comes first */
    return kn_cli_fail("internal error: a precision trial before the requested build");
  if (fp32) {
    /* every reduced step named, in its precision or fp32: what the
     * requested build chose (with best, per step) stays as it was */
    owned = calloc((size_t)t->n_steps + 1, sizeof *owned);
    if (!owned) return kn_cli_fail("out of memory");
    for (int32_t i = 0; i < t->n_steps; i++) {
      const char *p = kn_precision_name(fp32[i] ? KN_PRECISION_FP32 : t->precision[i]);
      size_t len = strlen(t->patterns[i]) + strlen(p) + 1;
      if (!(owned[i] = malloc(len))) {
        rc = kn_cli_fail("out of memory");
        goto done;
      }
      snprintf(owned[i], len, "%s%s", t->patterns[i], p);
      t->ov[n_ov++] = owned[i];
    }
  }
  bo.layer_precisions = t->ov;
  bo.n_layer_precisions = n_ov;
  t->builds++;
  if (kn_model_load(t->model, &m, &err) || kn_model_build(m, &bo, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  if (!fp32 && !t->steps && (rc = record_steps(t, m))) goto done;
  if (fp32) {
    /* the overrides reached exactly the steps meant */
    int32_t n = kn_model_step_count(m);
    for (int32_t s = 0; s < n; s++) {
      kn_step_info si;
      if (kn_model_step_info(m, s, &si)) continue;
      for (int32_t i = 0; i < t->n_steps; i++) {
        int32_t want = fp32[i] ? KN_PRECISION_FP32 : t->precision[i];
        if (strcmp(si.name, t->steps[i]) || si.precision == want) continue;
        if (want == KN_PRECISION_FP32 &&
            (si.precision == KN_PRECISION_FP16_WEIGHTS || si.precision == KN_PRECISION_INT8_WEIGHTS))
          continue; /* --weights applies to the steps left in fp32 */
        rc = kn_cli_fail("%s: step '%s' runs in %s, not the %s asked for (kiln's step names "
                         "changed between builds)", t->model, si.name,
                         kn_precision_name(si.precision), kn_precision_name(want));
        goto done;
      }
    }
  }
  outs = calloc((size_t)t->n_samples * (size_t)t->nout + 1, sizeof *outs);
  if (!outs) {
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  if ((rc = run_all(t, m, outs, "trial build"))) goto done;
  r->cosine = 1;
  for (int32_t k = 0; k < t->n_samples * t->nout; k++) {
    const kn_tensor *a = &t->ref[k], *b = &outs[k];
    if (a->rank < 0 || b->rank < 0) continue;
    kn_cli_diff d;
    if (!kn_cli_diff_tensors(a, b, 1e-4, 0, &d)) {
      rc = kn_cli_fail("%s: output %d of sample %d differs in dtype or shape from the "
                       "reference path's", t->model, k % t->nout, k / t->nout);
      goto done;
    }
    if (isnan(d.cosine) || d.cosine < r->cosine) r->cosine = d.cosine;
    if (d.max_abs > r->max_abs) r->max_abs = d.max_abs;
  }
  r->accuracy = -1;
  if (t->labels) {
    r->accuracy = top1(t, outs);
    r->drop = t->ref_accuracy - r->accuracy;
  }
  const kn_cli_budget *b = &t->budget;
  r->pass = true;
  r->used = 0;
  /* written so that a NaN fails */
  if (b->has_cos) {
    r->pass &= r->cosine >= b->min_cosine;
    double u = (1 - r->cosine) / fmax(1 - b->min_cosine, 1e-300);
    r->used = isnan(u) ? INFINITY : fmax(r->used, u);
  }
  if (b->has_abs) {
    r->pass &= r->max_abs <= b->max_abs_error;
    double u = r->max_abs / fmax(b->max_abs_error, 1e-300);
    r->used = isnan(u) ? INFINITY : fmax(r->used, u);
  }
  if (b->has_drop) {
    r->pass &= r->drop <= b->max_drop;
    double u = r->drop / fmax(b->max_drop, 1e-300);
    r->used = isnan(u) ? INFINITY : fmax(r->used, u);
  }
  if (keep) {
    *keep = m;
    m = NULL;
  }
done:
  for (int32_t k = 0; outs && k < t->n_samples * t->nout; k++) kn_tensor_release(&outs[k]);
  free(outs);
  for (int32_t i = 0; owned && i < t->n_steps; i++) free(owned[i]);
  free(owned);
  kn_model_free(m);
  return rc;
}

double kn_cli_trials_time(const kn_cli_trials *t, const kn_model *m, int64_t runs,
                          int64_t warmup) {
  kn_error err = {0};
  kn_context *ctx = NULL;
  double *ms = calloc((size_t)runs + 1, sizeof *ms), med = -1;
  if (!ms) {
    kn_cli_fail("out of memory");
    return -1;
  }
  if (kn_context_create(m, &ctx, &err) || kn_context_set_threads(ctx, 1, &err)) {
    kn_cli_error(&err);
    goto done;
  }
  for (int32_t i = 0; i < t->nin; i++)
    if (kn_context_set_input(ctx, i, &t->inputs[i], &err)) {
      kn_cli_error(&err);
      goto done;
    }
  for (int64_t w = 0; w < warmup; w++)
    if (kn_context_run(ctx, &err)) {
      kn_cli_error(&err);
      goto done;
    }
  for (int64_t k = 0; k < runs; k++) {
    double a = kn_cli_now_s();
    if (kn_context_run(ctx, &err)) {
      kn_cli_error(&err);
      goto done;
    }
    ms[k] = (kn_cli_now_s() - a) * 1e3;
  }
  qsort(ms, (size_t)runs, sizeof *ms, kn_cli_cmp_double);
  med = kn_cli_percentile(ms, runs, 0.5);
done:
  kn_context_free(ctx);
  free(ms);
  return med;
}
