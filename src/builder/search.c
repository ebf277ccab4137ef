/* Accuracy-budget builds (kiln.h, kn_model_build_budgeted): which of a
 * reduced-precision build's steps must stay in fp32 for it to keep an
 * accuracy budget against the fp32 reference path.
 *
 * The trials: one set of samples, the reference path's outputs on them
 * and the labels, kept for the whole search; then any number of trial
 * builds of the model, each the requested build with some of its
 * reduced-precision steps (the candidates) kept at fp32 by overrides that
 * name each step exactly, run on every sample and measured against the
 * reference.  The metrics are kn_validate's: the worst cosine and max
 * |error| over outputs and samples, and the top-1 accuracy of output 0.
 *
 * The searches: KN_SEARCH_SENSITIVITY ranks the candidates by the error
 * each makes alone (only it reduced, every other in fp32): errors this
 * small add up nearly linearly (first order), so a step's error alone
 * measures what it contributes against a clean background; the
 * alternative, all reduced but that step, measures a difference of two
 * nearly equal errors and is lost in the other steps' noise.  Then the
 * smallest k for which the k most sensitive in fp32 keep the budget, by
 * bisection over k (all reduced fails, all fp32 must pass): 1 + 1 + N +
 * log2(N) builds.  KN_SEARCH_BISECT is polygraphy's `debug precision`:
 * bisection over the step order, then refinement of the range found. */
#include "builder.h"

#include <math.h>

typedef struct trials {
  const char *model, *label;
  kn_build_options bo;       /* the requested build; overrides copied into ov */
  const char **ov;           /* the caller's overrides, then one per candidate */
  kn_accuracy_budget budget;
  int32_t threads;
  int32_t nin, nout, n_samples;
  kn_tensor *inputs, *ref;   /* [sample * nin + i], [sample * nout + o] */
  const int64_t *labels;
  int64_t n_labels;
  bool recorded;             /* the candidates are known (the requested build ran) */
  /* "NAME=fp32" for every step the requested build ran in fp32: the trial
   * builds name them too, so that a step the requested build left in fp32
   * (its reduced precision timed slower, say) never runs reduced in a trial:
   * with every candidate in fp32 a trial is then the fp32 engine */
  char **keep32;
  int32_t n_keep32;
  kn_budget_report *r;       /* the candidates and the trials */
  char data_text[256];       /* "542 samples from DIR" */
} trials;

void kn_budget_search_options_init(kn_budget_search_options *o) {
  memset(o, 0, sizeof *o);
  o->search = KN_SEARCH_SENSITIVITY;
}

void kn_budget_report_release(kn_budget_report *r) {
  if (!r) return;
  for (int32_t i = 0; i < r->n_steps; i++) {
    if (r->steps) free(r->steps[i]);
    if (r->patterns) free(r->patterns[i]);
  }
  free(r->steps);
  free(r->patterns);
  free(r->precisions);
  for (int32_t i = 0; r->trials && i < r->n_trials; i++) free(r->trials[i].fp32);
  free(r->trials);
  free(r->order);
  free(r->fp32);
  memset(r, 0, sizeof *r);
}

static void trials_close(trials *t) {
  for (int32_t k = 0; t->inputs && k < t->n_samples * t->nin; k++) kn_tensor_release(&t->inputs[k]);
  for (int32_t k = 0; t->ref && k < t->n_samples * t->nout; k++) kn_tensor_release(&t->ref[k]);
  free(t->inputs);
  free(t->ref);
  free(t->ov);
  for (int32_t i = 0; i < t->n_keep32; i++) free(t->keep32[i]);
  free(t->keep32);
}

/* Top-1 accuracy (percent) of output 0 of every sample against the labels. */
static double top1(const trials *t, const kn_tensor *outs) {
  int64_t correct = 0, seen = 0;
  for (int32_t k = 0; k < t->n_samples; k++) {
    const kn_tensor *o = &outs[k * t->nout];
    int64_t c = o->rank > 0 ? o->dims[o->rank - 1] : 1;
    int64_t rows = c > 0 ? kn_tensor_numel(o) / c : 0;
    int64_t *pred = kn_malloc((size_t)(rows > 0 ? rows : 1) * sizeof *pred);
    if (!pred) return NAN;
    rows = kn_argmax_rows(o, pred, rows);
    for (int64_t i = 0; i < rows && seen < t->n_labels; i++, seen++)
      correct += pred[i] == t->labels[seen];
    free(pred);
  }
  return seen ? 100.0 * (double)correct / (double)seen : NAN;
}

/* A copy of an output; a non-tensor or string one is rank -1 (skipped). */
static kn_status keep_copy(const kn_tensor *src, kn_tensor *out, kn_error *err) {
  if (!src || src->dtype == KN_DTYPE_STRING) {
    memset(out, 0, sizeof *out);
    out->rank = -1;
    return KN_OK;
  }
  return kn_tensor_copy(out, src, err);
}

/* Runs every sample through m, keeping the outputs in outs. */
static kn_status run_all(const trials *t, const kn_model *m, kn_tensor *outs, const char *what,
                         kn_error *err) {
  kn_context *ctx = NULL;
  kn_status st = kn_context_create(m, &ctx, err);
  if (!st && t->threads > 0) st = kn_context_set_threads(ctx, t->threads, err);
  for (int32_t k = 0; k < t->n_samples && !st; k++) {
    for (int32_t i = 0; i < t->nin && !st; i++)
      if ((st = kn_context_set_input(ctx, i, &t->inputs[k * t->nin + i], err)))
        kn_error_prefix(err, "%s (%s), sample %d", t->model, what, k);
    if (!st && (st = kn_context_run(ctx, err)))
      kn_error_prefix(err, "%s (%s), sample %d", t->model, what, k);
    for (int32_t o = 0; o < t->nout && !st; o++)
      if ((st = keep_copy(kn_context_output(ctx, o), &outs[k * t->nout + o], err)))
        st = kn_fail(err, st, "out of memory keeping the outputs of %s", t->model);
  }
  kn_context_free(ctx);
  return st;
}

static kn_status read_samples(trials *t, const kn_model *m, const kn_samples *s, kn_error *err) {
  kn_samples_text(s, t->data_text, sizeof t->data_text);
  t->n_samples = s && s->count > 0 ? s->count : 1;
  t->inputs = kn_calloc((size_t)t->n_samples * (size_t)t->nin + 1, sizeof *t->inputs);
  if (!t->inputs) return kn_fail(err, KN_ERR_OOM, "out of memory");
  if (s && s->count > 0) {
    for (int32_t k = 0; k < s->count; k++) {
      kn_status st = kn_samples_get(s, k, t->nin, &t->inputs[k * t->nin], err);
      if (st) return st;
    }
    return KN_OK;
  }
  uint64_t rng = kn_rng_seed(s ? s->seed : 1);
  for (int32_t i = 0; i < t->nin; i++) {
    kn_value_info vi;
    kn_error e = {0};
    kn_status st = kn_model_input_info(m, i, &vi);
    if (st) return kn_fail(err, st, "%s: cannot read an input", t->model);
    if ((st = kn_random_input(&vi, t->bo.shapes, t->bo.n_shapes, &rng, &t->inputs[i], &e)))
      return kn_fail(err, st, "%s: %s", t->model, e.msg);
  }
  return KN_OK;
}

static kn_status trials_open(trials *t, const char *model, const kn_build_options *bo,
                             const kn_samples *s, const kn_budget_search_options *o,
                             kn_budget_report *r, kn_error *err) {
  memset(t, 0, sizeof *t);
  t->model = model;
  t->label = o->label ? o->label : "kn_model_build_budgeted";
  t->bo = *bo;
  t->budget = o->budget;
  t->threads = o->threads;
  t->r = r;
  r->reference_top1 = -1;
  if (o->budget.has_max_accuracy_drop && !(s && s->n_labels > 0))
    return kn_fail(err, KN_ERR_MISSING,
                   "%s: the max-accuracy-drop bound needs labelled samples: one label per "
                   "prediction (row of output 0)", t->label);
  kn_model *m = NULL;
  kn_status st = kn_model_load(model, &m, err);
  if (st) return st;
  if (kn_model_format_version(m) != 0) {
    st = kn_fail(err, KN_ERR_INVALID_ARG,
                 "%s is an engine: %s takes the ONNX model (the fp32 reference and the trial "
                 "builds come from it)", model, t->label);
    goto done;
  }
  t->nin = kn_model_input_count(m);
  t->nout = kn_model_output_count(m);
  if ((st = kn_samples_check(s, t->nin, model, err)) || (st = read_samples(t, m, s, err)))
    goto done;
  /* the fp32 reference: the graph as imported, as kn_validate's */
  kn_build_options rb;
  kn_build_options_init(&rb);
  rb.shapes = bo->shapes;
  rb.n_shapes = bo->n_shapes;
  rb.no_optimize = 1;
  rb.machine = bo->machine;
  rb.tactics = KN_TACTICS_HEURISTIC; /* deterministic, as kn_validate's */
  if ((st = kn_model_build(m, &rb, err))) goto done;
  t->ref = kn_calloc((size_t)t->n_samples * (size_t)t->nout + 1, sizeof *t->ref);
  if (!t->ref) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory");
    goto done;
  }
  if ((st = run_all(t, m, t->ref, "reference path", err))) goto done;
  if (s && s->n_labels > 0) {
    const char *lname = s->labels_name ? s->labels_name : "labels";
    t->labels = s->labels;
    t->n_labels = s->n_labels;
    int64_t rows = 0;
    for (int32_t k = 0; k < t->n_samples; k++) {
      const kn_tensor *out0 = &t->ref[k * t->nout];
      int64_t c = out0->rank > 0 ? out0->dims[out0->rank - 1] : 1;
      if (t->nout == 0 || out0->rank < 0 || c <= 0) {
        st = kn_fail(err, KN_ERR_INVALID_ARG,
                     "%s: output 0 is not a numeric tensor: top-1 accuracy needs logits", model);
        goto done;
      }
      rows += kn_tensor_numel(out0) / c;
    }
    if (rows != t->n_labels) {
      st = kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: %lld label%s for %lld prediction%s (%s; output 0's rows): one label per "
                   "row, in sample order", lname, (long long)t->n_labels,
                   t->n_labels == 1 ? "" : "s", (long long)rows, rows == 1 ? "" : "s",
                   t->data_text);
      goto done;
    }
    r->reference_top1 = top1(t, t->ref);
  }
  t->ov = kn_calloc((size_t)bo->n_layer_precisions + 1, sizeof *t->ov);
  if (!t->ov) st = kn_fail(err, KN_ERR_OOM, "out of memory");
done:
  kn_model_free(m);
  return st;
}

/* NAME with fnmatch's special characters escaped: a pattern only NAME matches. */
static char *exact_pattern(const char *name) {
  size_t n = strlen(name);
  char *p = kn_malloc(2 * n + 1), *o = p;
  if (!p) return NULL;
  for (const char *c = name; *c; c++) {
    if (strchr("*?[]\\", *c)) *o++ = '\\';
    *o++ = *c;
  }
  *o = 0;
  return p;
}

/* The candidates: the steps the requested build runs in bf16, fp16 or int8. */
static kn_status record_steps(trials *t, const kn_model *m, kn_error *err) {
  kn_budget_report *r = t->r;
  int32_t n = kn_model_step_count(m);
  r->steps = kn_calloc((size_t)n + 1, sizeof *r->steps);
  r->patterns = kn_calloc((size_t)n + 1, sizeof *r->patterns);
  r->precisions = kn_calloc((size_t)n + 1, sizeof *r->precisions);
  size_t n_ov = (size_t)t->bo.n_layer_precisions + (size_t)n + 1;
  const char **ov = kn_realloc(t->ov, n_ov * sizeof *ov);
  if (ov) t->ov = ov;
  if (!r->steps || !r->patterns || !r->precisions || !ov)
    return kn_fail(err, KN_ERR_OOM, "out of memory");
  t->recorded = true;
  t->keep32 = kn_calloc((size_t)n + 1, sizeof *t->keep32);
  if (!t->keep32) return kn_fail(err, KN_ERR_OOM, "out of memory");
  for (int32_t i = 0; i < n; i++) {
    kn_step_info si;
    if (kn_model_step_info(m, i, &si)) continue;
    if (si.precision == KN_PRECISION_FP32) {
      char *pat = exact_pattern(si.name);
      size_t len = pat ? strlen(pat) + 6 : 0;
      char *keep = pat ? kn_malloc(len) : NULL;
      if (keep) snprintf(keep, len, "%s=fp32", pat);
      free(pat);
      if (!keep) return kn_fail(err, KN_ERR_OOM, "out of memory");
      t->keep32[t->n_keep32++] = keep;
      continue;
    }
    if (si.precision != KN_PRECISION_BF16 && si.precision != KN_PRECISION_FP16 &&
        si.precision != KN_PRECISION_INT8)
      continue;
    int32_t k = r->n_steps;
    r->steps[k] = kn_strdup(si.name);
    r->patterns[k] = exact_pattern(si.name);
    if (!r->steps[k] || !r->patterns[k]) {
      free(r->steps[k]);
      free(r->patterns[k]);
      r->steps[k] = r->patterns[k] = NULL;
      return kn_fail(err, KN_ERR_OOM, "out of memory");
    }
    r->precisions[k] = si.precision;
    r->n_steps = k + 1;
  }
  return KN_OK;
}

/* Appends a trial to the report (fp32 NULL: none in fp32). */
static kn_status add_trial(trials *t, int32_t phase, int32_t step, const bool *fp32,
                           const kn_budget_trial *res, kn_error *err) {
  kn_budget_report *r = t->r;
  kn_budget_trial *nt = kn_realloc(r->trials, ((size_t)r->n_trials + 1) * sizeof *nt);
  if (!nt) return kn_fail(err, KN_ERR_OOM, "out of memory");
  r->trials = nt;
  kn_budget_trial *x = &nt[r->n_trials];
  *x = *res;
  x->phase = phase;
  x->step = step;
  x->n_fp32 = 0;
  x->fp32 = kn_calloc((size_t)r->n_steps + 1, 1);
  if (!x->fp32) return kn_fail(err, KN_ERR_OOM, "out of memory");
  for (int32_t i = 0; fp32 && i < r->n_steps; i++) x->n_fp32 += x->fp32[i] = fp32[i];
  r->n_trials++;
  return KN_OK;
}

/* One trial: fp32 NULL is the requested build as given (and the first
 * call records the candidates); else candidate i is kept at fp32 where
 * fp32[i], the others run in their requested precision.  The result goes
 * into the report as a trial of `phase` (and into *res); *keep (when not
 * NULL) receives the built model. */
static kn_status trial(trials *t, int32_t phase, int32_t step, const bool *fp32,
                       kn_budget_trial *res, kn_model **keep, kn_error *err) {
  kn_budget_report *r = t->r;
  kn_model *m = NULL;
  kn_tensor *outs = NULL;
  char **owned = NULL;
  kn_status st = KN_OK;
  if (keep) *keep = NULL;
  memset(res, 0, sizeof *res);
  kn_build_options bo = t->bo;
  int32_t n_ov = 0;
  for (int32_t i = 0; i < t->bo.n_layer_precisions; i++) t->ov[n_ov++] = t->bo.layer_precisions[i];
  if (fp32 && !t->recorded) /* a programmer error: the requested build comes first */
    return kn_fail(err, KN_ERR_INTERNAL, "internal error: a precision trial before the "
                                         "requested build");
  if (fp32) {
    /* every candidate named, in its precision or fp32: what the requested
     * build chose (with best, per step) stays as it was */
    owned = kn_calloc((size_t)r->n_steps + 1, sizeof *owned);
    if (!owned) return kn_fail(err, KN_ERR_OOM, "out of memory");
    for (int32_t i = 0; i < r->n_steps; i++) {
      const char *p = kn_precision_name(fp32[i] ? KN_PRECISION_FP32 : r->precisions[i]);
      size_t len = strlen(r->patterns[i]) + strlen(p) + 2;
      if (!(owned[i] = kn_malloc(len))) {
        st = kn_fail(err, KN_ERR_OOM, "out of memory");
        goto done;
      }
      snprintf(owned[i], len, "%s=%s", r->patterns[i], p);
      t->ov[n_ov++] = owned[i];
    }
    for (int32_t i = 0; i < t->n_keep32; i++) t->ov[n_ov++] = t->keep32[i];
  }
  bo.layer_precisions = t->ov;
  bo.n_layer_precisions = n_ov;
  r->builds++;
  if ((st = kn_model_load(t->model, &m, err)) || (st = kn_model_build(m, &bo, err))) goto done;
  if (!fp32 && !t->recorded && (st = record_steps(t, m, err))) goto done;
  if (fp32) {
    /* the overrides reached exactly the steps meant */
    int32_t n = kn_model_step_count(m);
    for (int32_t s = 0; s < n; s++) {
      kn_step_info si;
      if (kn_model_step_info(m, s, &si)) continue;
      for (int32_t i = 0; i < r->n_steps; i++) {
        int32_t want = fp32[i] ? KN_PRECISION_FP32 : r->precisions[i];
        if (strcmp(si.name, r->steps[i]) || si.precision == want) continue;
        if (want == KN_PRECISION_FP32 &&
            (si.precision == KN_PRECISION_FP16_WEIGHTS ||
             si.precision == KN_PRECISION_INT8_WEIGHTS))
          continue; /* --weights applies to the steps left in fp32 */
        st = kn_fail(err, KN_ERR_INTERNAL,
                     "%s: step '%s' runs in %s, not the %s asked for (kiln's step names "
                     "changed between builds)", t->model, si.name,
                     kn_precision_name(si.precision), kn_precision_name(want));
        goto done;
      }
    }
  }
  outs = kn_calloc((size_t)t->n_samples * (size_t)t->nout + 1, sizeof *outs);
  if (!outs) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory");
    goto done;
  }
  if ((st = run_all(t, m, outs, "trial build", err))) goto done;
  res->cosine = 1;
  for (int32_t k = 0; k < t->n_samples * t->nout; k++) {
    const kn_tensor *a = &t->ref[k], *b = &outs[k];
    if (a->rank < 0 || b->rank < 0) continue;
    kn_diff d;
    if (!kn_diff_tensors(a, b, KN_ACC_ATOL, 0, &d)) {
      st = kn_fail(err, KN_ERR_SHAPE,
                   "%s: output %d of sample %d differs in dtype or shape from the reference "
                   "path's", t->model, k % t->nout, k / t->nout);
      goto done;
    }
    if (isnan(d.cosine) || d.cosine < res->cosine) res->cosine = d.cosine;
    if (d.max_abs > res->max_abs_error) res->max_abs_error = d.max_abs;
  }
  res->top1 = -1;
  if (t->labels) {
    res->top1 = top1(t, outs);
    res->top1_drop = r->reference_top1 - res->top1;
  }
  const kn_accuracy_budget *b = &t->budget;
  res->pass = 1;
  res->used = 0;
  /* written so that a NaN fails */
  if (b->has_min_cosine) {
    res->pass &= res->cosine >= b->min_cosine;
    double u = (1 - res->cosine) / fmax(1 - b->min_cosine, 1e-300);
    res->used = isnan(u) ? INFINITY : fmax(res->used, u);
  }
  if (b->has_max_abs_error) {
    res->pass &= res->max_abs_error <= b->max_abs_error;
    double u = res->max_abs_error / fmax(b->max_abs_error, 1e-300);
    res->used = isnan(u) ? INFINITY : fmax(res->used, u);
  }
  if (b->has_max_accuracy_drop) {
    res->pass &= res->top1_drop <= b->max_accuracy_drop;
    double u = res->top1_drop / fmax(b->max_accuracy_drop, 1e-300);
    res->used = isnan(u) ? INFINITY : fmax(res->used, u);
  }
  if ((st = add_trial(t, phase, step, fp32, res, err))) goto done;
  if (keep) {
    *keep = m;
    m = NULL;
  }
done:
  for (int32_t k = 0; outs && k < t->n_samples * t->nout; k++) kn_tensor_release(&outs[k]);
  free(outs);
  for (int32_t i = 0; owned && i < r->n_steps; i++) free(owned[i]);
  free(owned);
  kn_model_free(m);
  return st;
}

/* Median latency in ms of `runs` runs (after `warmup`) of m on the first
 * sample at 1 thread. */
static kn_status time_model(const trials *t, const kn_model *m, int64_t runs, int64_t warmup,
                            double *median, kn_error *err) {
  kn_context *ctx = NULL;
  double *ms = kn_calloc((size_t)runs + 1, sizeof *ms);
  kn_status st = KN_OK;
  if (!ms) return kn_fail(err, KN_ERR_OOM, "out of memory");
  if ((st = kn_context_create(m, &ctx, err)) || (st = kn_context_set_threads(ctx, 1, err)))
    goto done;
  for (int32_t i = 0; i < t->nin; i++)
    if ((st = kn_context_set_input(ctx, i, &t->inputs[i], err))) goto done;
  for (int64_t w = 0; w < warmup; w++)
    if ((st = kn_context_run(ctx, err))) goto done;
  for (int64_t k = 0; k < runs; k++) {
    double a = kn_now_s();
    if ((st = kn_context_run(ctx, err))) goto done;
    ms[k] = (kn_now_s() - a) * 1e3;
  }
  qsort(ms, (size_t)runs, sizeof *ms, kn_cmp_double);
  *median = kn_percentile(ms, runs, 0.5);
done:
  kn_context_free(ctx);
  free(ms);
  return st;
}

/* Sensitivity order: the largest share of the budget first, then the
 * lower cosine, the larger error, the earlier step. */
typedef struct ranked {
  int32_t step;
  kn_budget_trial r;
} ranked;

static int by_sensitivity(const void *pa, const void *pb) {
  const ranked *a = pa, *b = pb;
  double ua = isnan(a->r.used) ? INFINITY : a->r.used, ub = isnan(b->r.used) ? INFINITY : b->r.used;
  if (ua != ub) return ua > ub ? -1 : 1;
  double ca = isnan(a->r.cosine) ? -2 : a->r.cosine, cb = isnan(b->r.cosine) ? -2 : b->r.cosine;
  if (ca != cb) return ca < cb ? -1 : 1;
  if (a->r.max_abs_error != b->r.max_abs_error)
    return a->r.max_abs_error > b->r.max_abs_error ? -1 : 1;
  return a->step - b->step;
}

/* The budget's bounds as text for messages ("min-cosine 0.9999"), and the
 * measurement ("cosine 0.999 max_abs 0.01"). */
static void budget_text(const kn_accuracy_budget *b, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = 0;
  if (b->has_min_cosine && o < n)
    o += (size_t)snprintf(buf + o, n - o, "min-cosine %.9g", b->min_cosine);
  if (b->has_max_abs_error && o < n)
    o += (size_t)snprintf(buf + o, n - o, "%smax-abs-error %.6g", o ? ", " : "", b->max_abs_error);
  if (b->has_max_accuracy_drop && o < n)
    snprintf(buf + o, n - o, "%smax-accuracy-drop %.6g", o ? ", " : "", b->max_accuracy_drop);
}

static void trial_text(const kn_budget_trial *r, char *buf, size_t n) {
  int k = snprintf(buf, n, "cosine %.9f max_abs %.4g", r->cosine, r->max_abs_error);
  if (r->top1 >= 0 && k >= 0 && (size_t)k < n)
    snprintf(buf + k, n - (size_t)k, " top-1 %.2f%% (%+.2f)", r->top1, 0.0 - r->top1_drop + 0.0);
}

/* KN_ERR_LIMIT: the requested build breaks the budget and there is no
 * step to put back in fp32, or every step in fp32 breaks it too. */
static kn_status unreachable(const trials *t, const kn_budget_trial *res, bool no_steps,
                             kn_error *err) {
  char bt[256], rt[256];
  budget_text(&t->budget, bt, sizeof bt);
  trial_text(res, rt, sizeof rt);
  if (no_steps)
    return kn_fail(err, KN_ERR_LIMIT,
                   "%s: no step runs in reduced precision, and the build breaks the accuracy "
                   "budget (%s; %s): the budget is tighter than fusion's rounding", t->model, bt,
                   rt);
  return kn_fail(err, KN_ERR_LIMIT,
                 "%s: the accuracy budget (%s) breaks even with every step in fp32 (%s): the "
                 "budget is tighter than fp32's rounding differences with the reference path",
                 t->model, bt, rt);
}

static kn_status set_found(kn_budget_report *r, const bool *fp32, kn_error *err) {
  r->fp32 = kn_calloc((size_t)r->n_steps + 1, 1);
  if (!r->fp32) return kn_fail(err, KN_ERR_OOM, "out of memory");
  r->n_fp32 = 0;
  for (int32_t i = 0; fp32 && i < r->n_steps; i++) r->n_fp32 += r->fp32[i] = fp32[i];
  r->pass = 1;
  return KN_OK;
}

static kn_status search_sensitivity(trials *t, const kn_budget_search_options *o, kn_model **out,
                                    kn_error *err) {
  kn_budget_report *r = t->r;
  kn_model *req = NULL, *all32 = NULL, *fin = NULL, *m = NULL;
  bool *mask = NULL;
  ranked *rk = NULL;
  kn_budget_trial res;
  kn_status st = trial(t, KN_TRIAL_REQUESTED, -1, NULL, &res, &req, err);
  if (st) goto done;
  int32_t n = r->n_steps;
  if (res.pass) {
    fin = req;
    req = NULL;
    st = set_found(r, NULL, err);
    goto done;
  }
  if (n == 0) {
    st = unreachable(t, &res, true, err);
    goto done;
  }
  mask = kn_calloc((size_t)n, sizeof *mask);
  rk = kn_calloc((size_t)n, sizeof *rk);
  if (!mask || !rk) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory");
    goto done;
  }
  /* every step in fp32 first: when that fails, no fallback can help */
  for (int32_t i = 0; i < n; i++) mask[i] = true;
  if ((st = trial(t, KN_TRIAL_ALL_FP32, -1, mask, &res, &all32, err))) goto done;
  if (!res.pass) {
    st = unreachable(t, &res, false, err);
    goto done;
  }
  for (int32_t i = 0; i < n; i++) rk[i].step = i;
  if (n > 1) {
    for (int32_t i = 0; i < n; i++) {
      for (int32_t j = 0; j < n; j++) mask[j] = j != i;
      if ((st = trial(t, KN_TRIAL_SENSITIVITY, i, mask, &rk[i].r, NULL, err))) goto done;
    }
    qsort(rk, (size_t)n, sizeof *rk, by_sensitivity);
  }
  /* set once every candidate is ranked */
  if (!(r->order = kn_calloc((size_t)n, sizeof *r->order))) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory");
    goto done;
  }
  for (int32_t i = 0; i < n; i++) r->order[i] = rk[i].step;
  /* the smallest k: lo fails, hi passes */
  int32_t lo = 0, hi = n;
  fin = all32;
  while (hi - lo > 1) {
    int32_t mid = lo + (hi - lo) / 2;
    for (int32_t j = 0; j < n; j++) mask[j] = false;
    for (int32_t j = 0; j < mid; j++) mask[rk[j].step] = true;
    if ((st = trial(t, KN_TRIAL_BISECT, -1, mask, &res, &m, err))) goto done;
    if (res.pass) {
      hi = mid;
      if (fin != all32) kn_model_free(fin);
      fin = m;
    } else {
      lo = mid;
      kn_model_free(m);
    }
    m = NULL;
  }
  if (fin == all32) all32 = NULL;
  for (int32_t j = 0; j < n; j++) mask[j] = false;
  for (int32_t j = 0; j < hi; j++) mask[rk[j].step] = true;
  if ((st = set_found(r, mask, err))) goto done;
  if (o->time_runs > 0) {
    if ((st = time_model(t, req, o->time_runs, o->time_warmup, &r->ms_requested, err)) ||
        (st = time_model(t, fin, o->time_runs, o->time_warmup, &r->ms_found, err)))
      goto done;
    if (all32) st = time_model(t, all32, o->time_runs, o->time_warmup, &r->ms_fp32, err);
    else r->ms_fp32 = r->ms_found;
  }
done:
  if (st) r->pass = 0;
  if (!st && out) {
    *out = fin;
    fin = NULL;
  }
  if (fin != all32) kn_model_free(fin);
  kn_model_free(all32);
  kn_model_free(req);
  kn_model_free(m);
  free(mask);
  free(rk);
  return st;
}

static kn_status search_bisect(trials *t, const kn_budget_search_options *o, kn_model **out,
                               kn_error *err) {
  kn_budget_report *r = t->r;
  bool *fp32 = NULL;
  bool rev = o->reverse != 0;
  kn_model *cur = NULL, *m = NULL, **keep = out ? &m : NULL;
  kn_budget_trial res;
  kn_status st = trial(t, KN_TRIAL_REQUESTED, -1, NULL, &res, keep, err);
  if (st) goto done;
  int32_t n = r->n_steps;
  if (res.pass) {
    cur = m;
    m = NULL;
    st = set_found(r, NULL, err);
    goto done;
  }
  kn_model_free(m);
  m = NULL;
  if (n == 0) {
    st = unreachable(t, &res, true, err);
    goto done;
  }
  fp32 = kn_calloc((size_t)n, sizeof *fp32);
  if (!fp32) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory");
    goto done;
  }
  for (int32_t i = 0; i < n; i++) fp32[i] = true;
  if ((st = trial(t, KN_TRIAL_ALL_FP32, -1, fp32, &res, keep, err))) goto done;
  if (!res.pass) {
    st = unreachable(t, &res, false, err);
    goto done;
  }
  cur = m; /* the model of the last trial that passed is the set's */
  m = NULL;
  /* 1. the smallest k whose first (last) k steps in fp32 pass: lo fails, hi passes */
  int32_t lo = 0, hi = n;
  while (hi - lo > 1) {
    int32_t mid = lo + (hi - lo) / 2;
    for (int32_t i = 0; i < n; i++) fp32[i] = rev ? i >= n - mid : i < mid;
    if ((st = trial(t, KN_TRIAL_BISECT, -1, fp32, &res, keep, err))) goto done;
    if (res.pass) {
      hi = mid;
      kn_model_free(cur);
      cur = m;
    } else {
      lo = mid;
      kn_model_free(m);
    }
    m = NULL;
  }
  for (int32_t i = 0; i < n; i++) fp32[i] = rev ? i >= n - hi : i < hi;
  /* 2. refinement: a step of the range that the budget does not need goes back */
  if (hi > 1)
    for (int32_t k = 0; k < hi; k++) {
      int32_t i = rev ? n - 1 - k : k;
      fp32[i] = false;
      if ((st = trial(t, KN_TRIAL_REFINE, -1, fp32, &res, keep, err))) goto done;
      if (res.pass) {
        kn_model_free(cur);
        cur = m;
      } else {
        fp32[i] = true;
        kn_model_free(m);
      }
      m = NULL;
    }
  st = set_found(r, fp32, err);
done:
  if (st) r->pass = 0;
  if (!st && out) {
    *out = cur;
    cur = NULL;
  }
  kn_model_free(cur);
  kn_model_free(m);
  free(fp32);
  return st;
}

static kn_status check_budget(const kn_budget_search_options *o, kn_error *err) {
  const kn_accuracy_budget *b = &o->budget;
  if (!b->has_min_cosine && !b->has_max_abs_error && !b->has_max_accuracy_drop)
    return kn_fail(err, KN_ERR_INVALID_ARG, "kn_model_build_budgeted: no bound in the budget "
                                            "(min_cosine, max_abs_error, max_accuracy_drop)");
  if ((b->has_max_abs_error && !(b->max_abs_error >= 0)) ||
      (b->has_min_cosine && !(b->min_cosine >= -1 && b->min_cosine <= 1)) ||
      (b->has_max_accuracy_drop && !(b->max_accuracy_drop >= 0 && b->max_accuracy_drop <= 100)))
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "kn_model_build_budgeted: a bound out of range (max_abs_error >= 0, "
                   "min_cosine in [-1, 1], max_accuracy_drop in [0, 100])");
  if ((o->search != KN_SEARCH_SENSITIVITY && o->search != KN_SEARCH_BISECT) || o->threads < 0 ||
      o->time_runs < 0 || o->time_warmup < 0)
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "kn_model_build_budgeted: search %d, threads %d, time_runs %lld or "
                   "time_warmup %lld out of range", o->search, o->threads,
                   (long long)o->time_runs, (long long)o->time_warmup);
  return KN_OK;
}

kn_status kn_model_build_budgeted(const char *model_path, const kn_build_options *build,
                                  const kn_samples *samples,
                                  const kn_budget_search_options *options, kn_model **out,
                                  kn_budget_report *report, kn_error *err) {
  kn_budget_report local;
  kn_budget_report *r = report ? report : &local;
  memset(r, 0, sizeof *r);
  r->reference_top1 = -1;
  r->ms_requested = r->ms_found = r->ms_fp32 = -1;
  if (out) *out = NULL;
  kn_build_options dflt;
  if (!build) {
    kn_build_options_init(&dflt);
    build = &dflt;
  }
  if (!model_path || !options)
    return kn_fail(err, KN_ERR_INVALID_ARG, "kn_model_build_budgeted: %s is NULL",
                   model_path ? "options" : "the model path");
  kn_status st = check_budget(options, err);
  if (st) return st;
  double t0 = kn_now_s();
  trials t;
  st = trials_open(&t, model_path, build, samples, options, r, err);
  if (!st)
    st = options->search == KN_SEARCH_BISECT ? search_bisect(&t, options, out, err)
                                             : search_sensitivity(&t, options, out, err);
  trials_close(&t);
  r->seconds = kn_now_s() - t0;
  if (r == &local) kn_budget_report_release(&local);
  return st;
}
